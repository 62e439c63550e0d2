"""FTS5's shadow tables keep fixed planner statistics (why:
:mod:`persistence.sqlite.sql.planner_sql`).

The engine's own compound steps, run on a connection the caller holds: read what the
file's statistics say and, where they differ, replace them in a savepoint. Every
statement is built by :mod:`~persistence.sqlite.sql.planner_sql`.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw

from persistence.sqlite.sql import planner_sql as sql
from persistence.statements import Statement, column, row, rows, run, run_all, run_batch, value


def wanted_statistics(conn: apsw.Connection) -> dict[str, list[sql.StatRow]]:
    """Shadow table -> the ``sqlite_stat1`` rows it should have (existing tables only)."""
    wanted: dict[str, list[sql.StatRow]] = {}
    for (fts,) in rows(conn, sql.FTS_TABLES):
        for suffix in sql.SHADOW_STATISTICS:
            table, stat_rows = sql.shadow_rows(fts, suffix)
            if row(conn, sql.table_exists(table)) is not None:
                wanted[table] = stat_rows
    return wanted


def shadow_statistics_right(conn: apsw.Connection) -> bool:
    """True if the file has no statistics, or FTS5's shadow tables have exactly theirs."""
    if row(conn, sql.table_exists("sqlite_stat1")) is None:
        return True
    wanted = wanted_statistics(conn)
    stat4 = row(conn, sql.table_exists("sqlite_stat4")) is not None
    for table, stat_rows in wanted.items():
        if [tuple(r) for r in rows(conn, sql.stat1_rows(table))] != stat_rows:
            return False
        if stat4 and row(conn, sql.has_stat4(table)):
            return False
    return True


def fix_shadow_statistics(conn: apsw.Connection) -> bool:
    """Give FTS5's shadow tables their fixed statistics (in one transaction, a savepoint
    inside the caller's) and have this connection load them (``ANALYZE sqlite_schema``:
    its statements are planned again). True if anything changed."""
    if shadow_statistics_right(conn):
        return False
    wanted = wanted_statistics(conn)
    stat4 = row(conn, sql.table_exists("sqlite_stat4")) is not None

    def replace() -> None:
        for table, stat_rows in wanted.items():
            deletes, insert = sql.replace_statistics(table, stat_rows, stat4)
            run_all(conn, deletes)
            run_batch(conn, insert)
        run(conn, sql.RELOAD)

    _in_savepoint(conn, replace)
    return True


def _in_savepoint(conn: apsw.Connection, work: Callable[[], None]) -> None:
    """``work()`` in one savepoint, all or nothing. Outside a transaction its release is
    the commit, and a commit that fails (a full disk) leaves the transaction open: it is
    rolled back too, so the connection is never left inside one. Statements, not ``with
    conn``: the SQL tracer hears every statement as a cursor's."""
    run(conn, sql.SAVEPOINT)
    try:
        work()
        run(conn, sql.RELEASE)
    except BaseException:
        run(conn, sql.ROLLBACK)
        run(conn, sql.RELEASE)  # nothing left to write: releasing an empty savepoint
        raise


def refresh_statistics(conn: apsw.Connection) -> list[str]:
    """Refresh the statistics SQLite finds stale, on every table but FTS5's shadow tables
    (their fixed ones stand; why: :mod:`persistence.sqlite.sql.planner_sql`), each
    index read up to :data:`~persistence.sqlite.sql.planner_sql.ANALYSIS_LIMIT` rows:
    ``PRAGMA optimize=0x10012`` less those tables, in one savepoint inside the caller's
    transaction. Returns the statements it ran (none: nothing written)."""
    plan = [str(text) for text in column(conn, sql.STALE_TABLES)]
    if not plan:
        return []
    fixed = {sql.analyze(table) for table in wanted_statistics(conn)}
    stale = [text for text in plan if text not in fixed]
    if not stale:
        return []
    limit = int(value(conn, sql.READ_ANALYSIS_LIMIT) or 0)
    bounded = sql.ANALYSIS_LIMIT if limit <= 0 else min(limit, sql.ANALYSIS_LIMIT)
    run(conn, sql.set_analysis_limit(bounded))
    try:
        _in_savepoint(conn, lambda: run_all(conn, [Statement(text) for text in stale]))
    finally:
        run(conn, sql.set_analysis_limit(limit))
    return stale

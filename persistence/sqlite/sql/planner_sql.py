"""SQL for the query planner's statistics of FTS5's shadow tables.

``PRAGMA optimize`` at a file's first open analyzes every table, FTS5's shadow tables
too, when they hold a row or two; later runs re-analyze a table only once a query used
one of its indexes, and ``memory_fts_data`` has none. So a file kept statistics saying
its keyword segments were two rows, forever, and FTS5's segment delete (``DELETE FROM
memory_fts_data WHERE id>=? AND id<=?``, run by the merges inside commits) was planned
as a scan of the whole table: a commit's cost grew with the file (1,400 page visits per
``remember()`` at 10k memories where the raw floor, without statistics, made 24).
Deleting the rows is not enough: a connection keeps the estimates it loaded. So FTS5's
shadow tables get fixed statistics of a large table, under which every one of FTS5's
statements (rowid and primary-key lookups and ranges) is planned as a search, whatever
the file's size.
"""

from __future__ import annotations

import apsw

LARGE = 1_000_000
"""The rows each shadow table is said to have."""

SHADOW_STATISTICS = {
    "data": None,  # rowid tables: the table's own row
    "docsize": None,
    "content": None,
    "idx": f"{LARGE} 1000 1",  # WITHOUT ROWID: its primary key (segid, term)
    "config": f"{LARGE} 1",  # WITHOUT ROWID: its primary key (k)
}
"""Shadow table suffix -> ``sqlite_stat1.stat`` of its primary key (None: a rowid table,
whose row is ``(tbl, NULL, LARGE)``)."""

_FTS_TABLES = (
    "SELECT name FROM main.sqlite_schema WHERE type = 'table' "
    "AND sql LIKE 'CREATE VIRTUAL TABLE%' AND lower(sql) LIKE '%using fts5%'"
)
_EXISTING = "SELECT name FROM main.sqlite_schema WHERE type = 'table' AND name = ?"
_STAT1 = "SELECT tbl, idx, stat FROM main.sqlite_stat1 WHERE tbl = ?"


def wanted_statistics(conn: apsw.Connection) -> dict[str, list[tuple[str, str | None, str]]]:
    """Shadow table -> the ``sqlite_stat1`` rows it should have (existing tables only)."""
    wanted: dict[str, list[tuple[str, str | None, str]]] = {}
    for (fts,) in conn.execute(_FTS_TABLES).fetchall():
        for suffix, stat in SHADOW_STATISTICS.items():
            table = f"{fts}_{suffix}"
            if conn.execute(_EXISTING, (table,)).fetchone() is not None:
                index, value = (None, str(LARGE)) if stat is None else (table, stat)
                wanted[table] = [(table, index, value)]
    return wanted


def shadow_statistics_right(conn: apsw.Connection) -> bool:
    """True if the file has no statistics, or FTS5's shadow tables have exactly theirs."""
    if conn.execute(_EXISTING, ("sqlite_stat1",)).fetchone() is None:
        return True
    wanted = wanted_statistics(conn)
    stat4 = conn.execute(_EXISTING, ("sqlite_stat4",)).fetchone() is not None
    for table, rows in wanted.items():
        if [tuple(r) for r in conn.execute(_STAT1, (table,))] != rows:
            return False
        if (
            stat4
            and conn.execute(
                "SELECT 1 FROM main.sqlite_stat4 WHERE tbl = ? LIMIT 1", (table,)
            ).fetchone()
        ):
            return False
    return True


def fix_shadow_statistics(conn: apsw.Connection) -> bool:
    """Give FTS5's shadow tables their fixed statistics (in one transaction, a savepoint
    inside the caller's) and have this connection load them (``ANALYZE sqlite_schema``:
    its statements are planned again). True if anything changed."""
    if shadow_statistics_right(conn):
        return False
    wanted = wanted_statistics(conn)
    stat4 = conn.execute(_EXISTING, ("sqlite_stat4",)).fetchone() is not None
    # Statements, not ``with conn``: the SQL tracer hears every statement as a cursor's.
    conn.execute("SAVEPOINT tm_shadow_statistics")
    try:
        for table, rows in wanted.items():
            conn.execute("DELETE FROM main.sqlite_stat1 WHERE tbl = ?", (table,))
            if stat4:
                conn.execute("DELETE FROM main.sqlite_stat4 WHERE tbl = ?", (table,))
            conn.executemany(
                "INSERT INTO main.sqlite_stat1 (tbl, idx, stat) VALUES (?, ?, ?)", rows
            )
        conn.execute("ANALYZE sqlite_schema")
    except BaseException:
        conn.execute("ROLLBACK TO tm_shadow_statistics")
        conn.execute("RELEASE tm_shadow_statistics")
        raise
    conn.execute("RELEASE tm_shadow_statistics")
    return True

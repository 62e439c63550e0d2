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

The same tables are left out of the statistics refreshed at open
(:data:`STALE_TABLES`): ``PRAGMA optimize=0x10002`` checks every table, finds each
shadow table's size far from its fixed estimate, and analyzes it whole (no analysis
limit in that mask), every open: at 1M memories a read of the keyword index's hundreds
of MB, 0.2-0.8 s, whose result the fix above then threw away.

Built, not run: :mod:`persistence.sqlite.planner` runs these statements.
"""

from __future__ import annotations

from persistence.statements import Batch, Statement

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

StatRow = tuple[str, str | None, str]
"""A ``sqlite_stat1`` row: ``(tbl, idx, stat)``."""

FTS_TABLES = Statement(
    "SELECT name FROM main.sqlite_schema WHERE type = 'table' "
    "AND sql LIKE 'CREATE VIRTUAL TABLE%' AND lower(sql) LIKE '%using fts5%'"
)
"""The names of the file's FTS5 tables."""

_EXISTING = "SELECT name FROM main.sqlite_schema WHERE type = 'table' AND name = ?"

SAVEPOINT = Statement("SAVEPOINT tm_shadow_statistics")
ROLLBACK = Statement("ROLLBACK TO tm_shadow_statistics")
RELEASE = Statement("RELEASE tm_shadow_statistics")
RELOAD = Statement("ANALYZE sqlite_schema")
"""Has the connection load the statistics again (its statements are planned again)."""

STALE_TABLES = Statement("PRAGMA optimize(0x10013)")
"""What ``PRAGMA optimize`` would run, without running it (0x01): for every table
(0x10000), the ``ANALYZE "main"."<table>"`` of each one whose statistics look stale,
one a row. SQLite decides which; the engine runs them less its fixed ones."""

ANALYSIS_LIMIT = 2000
"""Rows an index's statistics are taken from: SQLite's own limit for ``PRAGMA
optimize`` (``SQLITE_DEFAULT_OPTIMIZE_LIMIT``, bit 0x10), so a refresh costs about the
same at any size."""

READ_ANALYSIS_LIMIT = Statement("PRAGMA analysis_limit")


def set_analysis_limit(rows: int) -> Statement:
    """Have this connection's ``ANALYZE`` read at most about ``rows`` rows an index
    (0: all of them)."""
    return Statement(f"PRAGMA analysis_limit = {int(rows)}")


def analyze(table: str) -> str:
    """The text of ``PRAGMA optimize``'s own statement for ``table``, as
    :data:`STALE_TABLES` lists it."""
    quoted = table.replace('"', '""')
    return f'ANALYZE "main"."{quoted}"'


def table_exists(name: str) -> Statement:
    """A row if the file has the table ``name``."""
    return Statement(
        "SELECT name FROM main.sqlite_schema WHERE type = 'table' AND name = ?", (name,)
    )


def shadow_rows(fts: str, suffix: str) -> tuple[str, list[StatRow]]:
    """The shadow table ``suffix`` of the FTS5 table ``fts`` and the ``sqlite_stat1`` rows
    it should have."""
    table, stat = f"{fts}_{suffix}", SHADOW_STATISTICS[suffix]
    index, value = (None, str(LARGE)) if stat is None else (table, stat)
    return table, [(table, index, value)]


def stat1_rows(table: str) -> Statement:
    """The ``sqlite_stat1`` rows of ``table``."""
    return Statement("SELECT tbl, idx, stat FROM main.sqlite_stat1 WHERE tbl = ?", (table,))


def has_stat4(table: str) -> Statement:
    """A row if ``sqlite_stat4`` holds samples of ``table``."""
    return Statement("SELECT 1 FROM main.sqlite_stat4 WHERE tbl = ? LIMIT 1", (table,))


def replace_statistics(
    table: str, rows: list[StatRow], stat4: bool
) -> tuple[list[Statement], Batch]:
    """Delete ``table``'s statistics (``sqlite_stat4``'s too, where the file has that
    table), then insert ``rows`` into ``sqlite_stat1``."""
    deletes = [Statement("DELETE FROM main.sqlite_stat1 WHERE tbl = ?", (table,))]
    if stat4:
        deletes.append(Statement("DELETE FROM main.sqlite_stat4 WHERE tbl = ?", (table,)))
    return deletes, Batch("INSERT INTO main.sqlite_stat1 (tbl, idx, stat) VALUES (?, ?, ?)", rows)

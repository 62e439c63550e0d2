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

"""SQL for ``salvage``: reading what is still readable of a damaged file, and dropping the
rows that point at rows lost with it. Built (and decoded) here, run by
:mod:`persistence.sqlite.salvage`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from persistence.statements import Row, Statement

_ALL_IDS = (
    "SELECT id FROM scratchpad UNION ALL SELECT id FROM episodic UNION ALL SELECT id FROM semantic"
)

_ORPHANS = {
    "memory_tags": f"memory_tags WHERE memory_id NOT IN ({_ALL_IDS})",
    "repetition_schedules": f"repetition_schedules WHERE memory_id NOT IN ({_ALL_IDS})",
    "promotion_log": (
        f"promotion_log WHERE memory_id NOT IN ({_ALL_IDS}) "
        "AND memory_id NOT IN (SELECT memory_id FROM forgetting_log)"
    ),
    "memory_entities": f"memory_entities WHERE memory_id NOT IN ({_ALL_IDS})",
    "memory_relations": f"memory_relations WHERE memory_id NOT IN ({_ALL_IDS})",
    "graph_queue": f"graph_queue WHERE memory_id NOT IN ({_ALL_IDS})",
    "session_transcripts": "session_transcripts WHERE session_id NOT IN "
    "(SELECT session_id FROM sessions)",
}

ORPHANS = {table: Statement(f"DELETE FROM {rows} RETURNING 1") for table, rows in _ORPHANS.items()}
"""Per table: delete the rows that point at a memory (or session) that was not salvaged
(a row per row deleted)."""

ORPHAN_PARENTS = frozenset({"sessions", "scratchpad", "episodic", "semantic"})
"""The tables :data:`ORPHANS` reads (its deletes run only where all of them exist)."""


BEGIN = Statement("BEGIN")
COMMIT = Statement("COMMIT")

SCHEMA = Statement(
    "SELECT type, name, tbl_name, sql FROM sqlite_schema "
    "WHERE sql IS NOT NULL AND type IN ('table', 'index') ORDER BY type DESC, rowid"
)
"""``(type, name, table, sql)`` of every table and index, tables first."""

TOLERATE_SCHEMA = Statement("PRAGMA writable_schema = ON")
"""Read a schema SQLite refuses to load (an index or table whose root page lies past the
end of a truncated file) instead of stopping at it: on the read-only source only, where
nothing can be written; the tables whose pages survive can then be read."""


def create(definition: str) -> Statement:
    """Create a table with the source's own definition (its ``sqlite_schema.sql``)."""
    return Statement(definition)


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _listed(names: Sequence[str]) -> str:
    return ", ".join(quote(n) for n in names)


def columns(table: str) -> Statement:
    """The columns of ``table``, hidden ones too (see :func:`column_names`)."""
    return Statement(f"PRAGMA table_xinfo({quote(table)})")


def column_names(found: Sequence[Row]) -> list[str]:
    """The names in :func:`columns`' rows."""
    return [r[1] for r in found]


def rowid_probe(table: str) -> Statement:
    """Fails (``SQLError``) if ``table`` has no rowid (``WITHOUT ROWID``)."""
    return Statement(f"SELECT rowid FROM {quote(table)} LIMIT 0")


_ROWID_MAX = 2**63 - 1


def _from_above(after: int) -> tuple[str, tuple[int, ...]]:
    """The condition "rowid above ``after``" as ``rowid >= after + 1``: SQLite seeks to
    ``after + 1`` itself, into the page that holds it, where ``rowid > after`` would seek
    to ``after`` and step on from there, reading the page that held ``after``, which damage
    may have taken (the first row of the next readable page was lost with it)."""
    if after >= _ROWID_MAX:
        return "false", ()
    return "rowid >= ?", (after + 1,)


def rows_after(table: str, names: Sequence[str], after: int) -> Statement:
    """``(rowid, *columns)`` of the rows with a rowid above ``after``, in rowid order."""
    cond, params = _from_above(after)
    return Statement(
        f"SELECT rowid, {_listed(names)} FROM {quote(table)} WHERE {cond} ORDER BY rowid",
        params,
    )


def first_after(table: str, names: Sequence[str], after: int) -> Statement:
    """The first row above rowid ``after`` in full (reading it raises where it is damaged)."""
    cond, params = _from_above(after)
    return Statement(
        f"SELECT rowid, {_listed(names)} FROM {quote(table)} WHERE {cond} ORDER BY rowid LIMIT 1",
        params,
    )


def all_rows(table: str, names: Sequence[str]) -> Statement:
    """Every row of ``table``, in key order."""
    return Statement(f"SELECT {_listed(names)} FROM {quote(table)}")


def inserter(table: str, names: Sequence[str]) -> Callable[[Sequence[Any]], Statement]:
    """The insert of one row of ``names``' values into ``table``."""
    sql = f"INSERT INTO {quote(table)} ({_listed(names)}) VALUES ({', '.join('?' * len(names))})"

    def insert(values: Sequence[Any]) -> Statement:
        return Statement(sql, values)

    return insert


SCHEMA_VERSIONS = Statement("SELECT count(*) FROM schema_version")


def stamp_version(version: int, at: int, description: str) -> Statement:
    """Record the schema ``version`` the salvaged rows are at."""
    return Statement(
        "INSERT INTO schema_version (version, applied_at, description) VALUES (?, ?, ?)",
        (version, at, description),
    )


FK_VIOLATIONS = Statement("PRAGMA foreign_key_check")
"""The rows whose foreign key points nowhere (see :func:`violations`)."""


def violations(found: Sequence[Row]) -> list[tuple[str, int]]:
    """``(table, rowid)`` of :data:`FK_VIOLATIONS`' rows (a row without rowid left out)."""
    return [(r[0], r[1]) for r in found if r[1] is not None]


def delete_rowid(table: str, rowid: int) -> Statement:
    return Statement(f"DELETE FROM {quote(table)} WHERE rowid = ?", (rowid,))


def wrong_size_embeddings(table: str) -> Statement:
    """Clear the vectors whose size is not the file's (they are embedded again)."""
    return Statement(
        f"UPDATE {quote(table)} SET embedding = NULL WHERE embedding IS NOT NULL AND "
        "length(embedding) <> 4 * (SELECT CAST(value AS INTEGER) FROM store_meta "
        "WHERE key = 'embedding_dim')"
    )


def memory_count(tier: str) -> Statement:
    """How many memories the tier table ``tier`` holds (one value)."""
    return Statement(f"SELECT count(*) FROM {quote(tier)}")


INDEXED_IDS = Statement("SELECT memory_id FROM memory_index")
"""The memory ids the keyword index lists (the source's record of every memory)."""

SAVED_IDS = Statement(_ALL_IDS)
"""The ids of the memories salvaged."""

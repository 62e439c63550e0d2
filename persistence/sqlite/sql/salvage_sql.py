"""SQL for ``salvage``: reading what is still readable of a damaged file, and dropping the
rows that point at rows lost with it. Built here, run by :mod:`persistence.sqlite.salvage`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apsw

from persistence.sqlite.connection import query_all

_ALL_IDS = (
    "SELECT id FROM scratchpad UNION ALL SELECT id FROM episodic UNION ALL SELECT id FROM semantic"
)

ORPHANS = {
    "memory_tags": f"DELETE FROM memory_tags WHERE memory_id NOT IN ({_ALL_IDS})",
    "repetition_schedules": f"DELETE FROM repetition_schedules WHERE memory_id NOT IN ({_ALL_IDS})",
    "promotion_log": (
        f"DELETE FROM promotion_log WHERE memory_id NOT IN ({_ALL_IDS}) "
        "AND memory_id NOT IN (SELECT memory_id FROM forgetting_log)"
    ),
    "memory_entities": f"DELETE FROM memory_entities WHERE memory_id NOT IN ({_ALL_IDS})",
    "memory_relations": f"DELETE FROM memory_relations WHERE memory_id NOT IN ({_ALL_IDS})",
    "graph_queue": f"DELETE FROM graph_queue WHERE memory_id NOT IN ({_ALL_IDS})",
    "session_transcripts": (
        "DELETE FROM session_transcripts WHERE session_id NOT IN (SELECT session_id FROM sessions)"
    ),
}
"""Per table: delete the rows that point at a memory (or session) that was not salvaged."""


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def schema(conn: apsw.Connection) -> list[tuple[str, str, str, str]]:
    """``(type, name, table, sql)`` of every table and index, tables first."""
    return query_all(
        conn,
        "SELECT type, name, tbl_name, sql FROM sqlite_schema "
        "WHERE sql IS NOT NULL AND type IN ('table', 'index') ORDER BY type DESC, rowid",
    )


def columns(conn: apsw.Connection, table: str) -> list[str]:
    return [row[1] for row in query_all(conn, f"PRAGMA table_xinfo({quote(table)})")]


def has_rowid(conn: apsw.Connection, table: str) -> bool:
    try:
        conn.execute(f"SELECT rowid FROM {quote(table)} LIMIT 0").fetchall()
    except apsw.SQLError:
        return False
    return True


def rows_after(
    conn: apsw.Connection, table: str, names: list[str], after: int
) -> Iterator[tuple[Any, ...]]:
    """``(rowid, *columns)`` of the rows with a rowid above ``after``, in rowid order."""
    listed = ", ".join(quote(n) for n in names)
    return conn.execute(
        f"SELECT rowid, {listed} FROM {quote(table)} WHERE rowid > ? ORDER BY rowid", (after,)
    )


def first_after(conn: apsw.Connection, table: str, names: list[str], after: int) -> None:
    """Read the first row above rowid ``after`` in full (raises where it is damaged)."""
    listed = ", ".join(quote(n) for n in names)
    conn.execute(
        f"SELECT rowid, {listed} FROM {quote(table)} WHERE rowid > ? ORDER BY rowid LIMIT 1",
        (after,),
    ).fetchall()


def all_rows(conn: apsw.Connection, table: str, names: list[str]) -> Iterator[tuple[Any, ...]]:
    listed = ", ".join(quote(n) for n in names)
    return conn.execute(f"SELECT {listed} FROM {quote(table)}")


def insert(table: str, names: list[str]) -> str:
    listed = ", ".join(quote(n) for n in names)
    return f"INSERT INTO {quote(table)} ({listed}) VALUES ({', '.join('?' * len(names))})"


def fk_violations(conn: apsw.Connection) -> list[tuple[str, int | None]]:
    """``(table, rowid)`` of the rows whose foreign key points nowhere."""
    return [(row[0], row[1]) for row in query_all(conn, "PRAGMA foreign_key_check")]


def delete_rowid(table: str) -> str:
    return f"DELETE FROM {quote(table)} WHERE rowid = ?"


def wrong_size_embeddings(table: str) -> str:
    """Clear the vectors whose size is not the file's (they are embedded again)."""
    return (
        f"UPDATE {quote(table)} SET embedding = NULL WHERE embedding IS NOT NULL AND "
        "length(embedding) <> 4 * (SELECT CAST(value AS INTEGER) FROM store_meta "
        "WHERE key = 'embedding_dim')"
    )


def indexed_ids(conn: apsw.Connection) -> list[str]:
    """The memory ids the keyword index lists (the source's record of every memory)."""
    return [row[0] for row in query_all(conn, "SELECT memory_id FROM memory_index")]


def saved_ids(conn: apsw.Connection) -> set[str]:
    return {row[0] for row in query_all(conn, _ALL_IDS)}

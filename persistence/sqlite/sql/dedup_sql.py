"""SQL for deduplication: ``content_keys`` (schema version 10) maps each memory to a
hash of its normalised content, agent and session (the rule and the key:
:mod:`persistence.dedup_key`)."""

from __future__ import annotations

from collections.abc import Sequence

import apsw
import orjson

from persistence.dedup_key import content_key, content_key_rows  # both backends' key
from persistence.records import Memory, Tier
from persistence.sqlite.connection import query_all
from persistence.sqlite.sql.memory_sql import TABLE

__all__ = ["content_key", "find", "forget", "record", "rebuild"]


_RECORD = "INSERT OR REPLACE INTO content_keys (memory_id, key) VALUES (?, ?)"


def record(conn: apsw.Connection, memories: Sequence[Memory]) -> None:
    """Remember the content keys of these memories (replacing older ones)."""
    rows = content_key_rows(memories)
    if len(rows) == 1:  # remember(): execute is cheaper than executemany for one row
        conn.execute(_RECORD, rows[0])
    elif rows:
        conn.executemany(_RECORD, rows)


ANY = "SELECT 1 FROM content_keys WHERE key = ? LIMIT 1"
_FIND = {
    tier: f"SELECT k.memory_id FROM content_keys AS k JOIN {table} AS t ON t.id = k.memory_id "
    "WHERE k.key = ? ORDER BY t.created_at, t.id LIMIT 8"
    for tier, table in TABLE.items()
}


def find(conn: apsw.Connection, key: bytes, tier: Tier) -> list[str]:
    """Ids of live memories of ``tier`` whose key is ``key`` (oldest first); the caller
    checks the content itself (a key may be stale after an edit).

    Probe with :data:`ANY` first: most contents are new, and this join with its sort
    costs several times the probe (20 of a ``remember``'s ~400 µs, measured in one)."""
    return [str(r[0]) for r in query_all(conn, _FIND[tier], (key,))]


def forget(conn: apsw.Connection, memory_ids: Sequence[str]) -> None:
    """Drop the keys of memories that are gone."""
    conn.execute(
        "DELETE FROM content_keys WHERE memory_id IN (SELECT value FROM json_each(?))",
        (orjson.dumps(list(memory_ids)).decode(),),
    )


def rebuild(conn: apsw.Connection) -> None:
    """Recompute every key from the tier tables (after an import)."""
    conn.execute("DELETE FROM content_keys")
    for tier in Tier:
        rows = conn.execute(
            f"SELECT id, content, agent_id, session_id FROM {TABLE[tier]}"
        ).fetchall()
        conn.executemany(
            "INSERT INTO content_keys (memory_id, key) VALUES (?, ?)",
            [(i, content_key(c, a, s)) for i, c, a, s in rows],
        )

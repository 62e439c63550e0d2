"""SQL of deduplication notes: ``tm_content_keys`` maps each memory to the key of its
normalised content, agent and session (the rule and the key: :mod:`persistence.dedup_key`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from persistence.dedup_key import content_key_rows
from persistence.records import Memory, Tier

_RECORD = (
    "INSERT INTO tm_content_keys (memory_id, key) VALUES (%s, %s) "
    "ON CONFLICT (memory_id) DO UPDATE SET key = excluded.key"
)
_ANY = "SELECT 1 FROM tm_content_keys WHERE key = %s LIMIT 1"
_FIND = (
    "SELECT k.memory_id FROM tm_content_keys AS k JOIN tm_memories AS t ON t.id = k.memory_id "
    'WHERE k.key = %s AND t.tier = %s ORDER BY t.created_at, t.id COLLATE "C" LIMIT 8'
)


def record(conn: psycopg.Connection[Any], memories: Sequence[Memory]) -> None:
    """Note the content keys of these memories (replacing older notes)."""
    rows = content_key_rows(memories)
    if len(rows) == 1:
        conn.execute(_RECORD, rows[0])
    elif rows:
        with conn.cursor() as cur:
            cur.executemany(_RECORD, rows)


def find(conn: psycopg.Connection[Any], key: bytes, tier: Tier) -> list[str]:
    """Ids of live memories of ``tier`` noted with ``key``, oldest first (at most 8).
    Probes first: most contents are new, and the probe is cheaper than the join."""
    if conn.execute(_ANY, (key,)).fetchone() is None:
        return []
    return [str(r[0]) for r in conn.execute(_FIND, (key, tier.value))]

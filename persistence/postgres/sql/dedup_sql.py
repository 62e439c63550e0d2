"""SQL of deduplication notes: ``tm_content_keys`` maps each memory to the key of its
normalised content, agent and session (the rule and the key: :mod:`persistence.dedup_key`).
Builds statements; the stores run them."""

from __future__ import annotations

from collections.abc import Sequence

from persistence.dedup_key import content_key_rows
from persistence.records import Memory, Tier
from persistence.statements import Batch, Statement

_RECORD = (
    "INSERT INTO tm_content_keys (memory_id, key) VALUES (%s, %s) "
    "ON CONFLICT (memory_id) DO UPDATE SET key = excluded.key"
)
_ANY = "SELECT 1 FROM tm_content_keys WHERE key = %s LIMIT 1"
_FIND = (
    "SELECT k.memory_id FROM tm_content_keys AS k JOIN tm_memories AS t ON t.id = k.memory_id "
    'WHERE k.key = %s AND t.tier = %s ORDER BY t.created_at, t.id COLLATE "C" LIMIT 8'
)


def record(memories: Sequence[Memory]) -> Batch:
    """Note the content keys of these memories (replacing older notes)."""
    return Batch(_RECORD, content_key_rows(memories))


def seen(key: bytes) -> Statement:
    """A row if some memory is noted with ``key``: the probe before :func:`find` (most
    contents are new, and the probe is cheaper than the join)."""
    return Statement(_ANY, (key,))


def find(key: bytes, tier: Tier) -> Statement:
    """Ids of live memories of ``tier`` noted with ``key``, oldest first (at most 8)."""
    return Statement(_FIND, (key, tier.value))

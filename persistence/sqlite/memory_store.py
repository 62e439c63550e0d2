"""The SQLite half of the memory store: what a file does its own way for memories.

The shared :class:`~persistence.stores.memories.MemoryStore` runs over this
:class:`FileMemories` and the statements of :mod:`~persistence.sqlite.sql.memory_sql`
(its compound writes: :mod:`~persistence.sqlite.memory_steps`). Here: an embedding
is a float32 BLOB in the row and the file's dimension a ``store_meta`` value
(:func:`check_dimension`); promotion moves the row to the next tier's table; forgetting
deletes row by row and logs each; the uncached read and the dedup probe run on the
thread's reader without a block (:meth:`Database.read_row`); there is no one-trip write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import apsw

from persistence.codecs import encode_embedding
from persistence.errors import EmbeddingDimensionError
from persistence.records import Memory, RepetitionSchedule, Tier
from persistence.sqlite import memory_steps
from persistence.sqlite.database import Database
from persistence.sqlite.forgetting_steps import forget
from persistence.sqlite.sql import (
    dedup_sql,
    memory_sql,
    meta_sql,
    schedule_sql,
    tag_counts_sql,
)
from persistence.sqlite.sql.meta_sql import EMBEDDING_DIM_KEY
from persistence.sqlite.translate import SQLITE_ERRORS, _from_sqlite
from persistence.statements import column, run, run_batch, value
from persistence.stores.config import StoreConfig
from persistence.stores.memories import Encoded, MemoryStore, ids_taken

__all__ = ["FileMemories", "MemoryStore", "check_dimension"]  # MemoryStore: for sqlite/__init__


def check_dimension(conn: apsw.Connection, dim: int, configured: int | None) -> None:
    """The first embedding fixes the file's dimension (``configured``, if the store was
    given one); later ones must match it."""
    stored = value(conn, meta_sql.read(EMBEDDING_DIM_KEY))
    expected = int(stored) if stored is not None else configured
    if expected is not None and dim != expected:
        raise EmbeddingDimensionError(dim, expected)
    if stored is None:
        run(conn, meta_sql.write(EMBEDDING_DIM_KEY, str(dim)))


class FileMemories:
    """The :class:`~persistence.stores.memories.MemoryEngine` of one file."""

    ids_per_query = 500

    def __init__(self, engine: Database, config: StoreConfig) -> None:
        self.engine = engine
        self.config = config

    def encode(self, memory: Memory) -> Encoded:
        blob = None if memory.embedding is None else encode_embedding(memory.embedding, None)
        row = memory_sql.encode_row(memory, blob)  # tags are not in the row
        return Encoded(
            memory_sql.as_stored(memory, row), row, None if blob is None else len(blob) // 4
        )

    def check_dimension(self, conn: apsw.Connection, dim: int) -> None:
        check_dimension(conn, dim, self.config.embedding_dim)

    def upsert(self, conn: apsw.Connection, encoded: Encoded) -> None:
        memory_steps.write(conn, encoded.memory, encoded.row)

    def insert_new(
        self,
        conn: apsw.Connection,
        batch: Sequence[Encoded],
        schedules: Sequence[RepetitionSchedule],
    ) -> None:
        taken = column(conn, memory_sql.existing_ids([e.memory.id for e in batch]))
        if taken:
            raise ids_taken(set(taken))
        for insert in memory_sql.insert_new([(e.memory, e.row) for e in batch]):
            run_batch(conn, insert)
        run_batch(conn, dedup_sql.record([e.memory for e in batch]))
        run_batch(conn, schedule_sql.insert_many(schedules))

    def move(
        self, conn: apsw.Connection, memory: Memory, target: Tier, metadata: dict[str, Any], at: int
    ) -> None:
        """The row leaves its tier's table for ``target``'s (tags and schedule stay)."""
        moved = replace(memory, tier=target, key=None, metadata=metadata,
                        updated_at=max(at, memory.created_at))  # fmt: skip
        run(conn, memory_sql.remove_row(memory.tier, memory.id))
        self.upsert(conn, self.encode(moved))

    def forget(
        self,
        conn: apsw.Connection,
        memory_id: str,
        tier: Tier | None,
        retention: float | None,
        reason: str | None,
        at: int,
    ) -> Tier | None:
        scope = self.config.scope
        found = tier
        if tier is None or scope.scoped:
            name = value(conn, memory_sql.tier_of(memory_id, scope))
            found = None if name is None else Tier(name)
        if found is None or (tier is not None and found is not tier):
            return None
        if not forget(conn, found, memory_id, retention, reason, at):
            return None
        return found

    def remove(self, conn: apsw.Connection, memory_ids: Sequence[str], tier: Tier) -> int:
        for memory_id in memory_ids:
            memory_steps.delete(conn, tier, memory_id)
        return len(memory_ids)

    def read_any(self, memory_id: str) -> Memory | None:
        row = self.engine.read_row(*memory_sql.fetch_any_query(memory_id, self.config.scope))
        try:
            return memory_sql.any_tier_memory(row)
        except SQLITE_ERRORS as exc:  # a damaged value (read_row translated the read's)
            raise _from_sqlite(exc, f"reading {self.engine.path}", self.engine.path) from exc

    def content_key_seen(self, key: bytes) -> bool:
        return self.engine.read_row(dedup_sql.ANY, (key,)) is not None

    def find_same(self, conn: apsw.Connection, key: bytes, tier: Tier) -> list[str]:
        return [str(found) for found in column(conn, dedup_sql.find(key, tier))]


def file_memory_store(engine: Database, config: StoreConfig) -> MemoryStore:
    """The shared memory store over a file (no one-trip write: a file write is a local
    call, the step-by-step path costs no round trips)."""
    return MemoryStore(
        engine,
        memory_sql,
        FileMemories(engine, config),
        config,
        dedup=dedup_sql,
        tag_counts=tag_counts_sql,
    )

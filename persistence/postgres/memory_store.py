"""The PostgreSQL half of the memory store: what a server does its own way for memories.

The shared :class:`~persistence.stores.memories.MemoryStore` runs over this
:class:`ServerMemories` and the statements of :mod:`~persistence.postgres.sql.memory_sql`.
Here: a memory's
vector lives in ``tm_vectors`` and the store's dimension is the column's type, checked
against the server once and then remembered (:meth:`ServerMemories.check_dimension`);
one new memory goes in with one statement, a batch with a few; promotion updates the
row's tier in place; forgetting is one statement for many; ``remember()``'s write can
take one round trip (:meth:`ServerMemories.remember_new`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from psycopg import errors as pg

from persistence.codecs import decode_embedding, encode_embedding, encode_json
from persistence.dedup_key import content_key
from persistence.errors import DuplicateMemoryError, EmbeddingDimensionError, StorageError
from persistence.postgres import memory_steps, vector_column
from persistence.postgres.database import Connection, PgDatabase
from persistence.postgres.empty_cache import EmptyAtVersion
from persistence.postgres.sql import dedup_sql, memory_sql, schedule_sql, tag_counts_sql
from persistence.postgres.vector_dim import fix_dimension
from persistence.records import Memory, RepetitionSchedule, Tier
from persistence.statements import column, row, rows, run, run_all, run_batch
from persistence.stores.config import StoreConfig
from persistence.stores.memories import Encoded, MemoryStore, ids_taken

_EXPECTED_DIM = re.compile(r"expected (\d+) dimensions")
"""pgvector's refusal of a vector of another size than the column's."""
_UNIQUE_VIOLATION = "23505"


def _vector(embedding: Any) -> np.ndarray | None:
    """A validated, read-only float32 copy of an embedding (``None`` stays ``None``)."""
    return None if embedding is None else decode_embedding(encode_embedding(embedding, None))


def _timing(s: RepetitionSchedule) -> tuple[Any, ...]:
    """A schedule's columns as :func:`memory_sql.insert_one` takes them."""
    return (s.next_review_at, s.interval_ms, s.review_count,
            float(s.ease_factor), float(s.stability_days), s.last_reviewed_at)  # fmt: skip


class ServerMemories:
    """The :class:`~persistence.stores.memories.MemoryEngine` of one server database.
    ``row`` of an :class:`Encoded` is ``(columns, vector)``."""

    ids_per_query = 1000

    def __init__(self, engine: PgDatabase, config: StoreConfig) -> None:
        self.engine = engine
        self.config = config
        self._dim: int | None = None  # the vector column's dimension, once typed (committed)
        engine.on_external_change(self.forget_dimension)

    def encode(self, memory: Memory) -> Encoded:
        vector = _vector(memory.embedding)
        row = memory_sql.encode_row(memory)
        stored = memory_sql.as_stored(memory, row, vector)
        return Encoded(stored, (row, vector), None if vector is None else len(vector))

    def check_dimension(self, conn: Connection, dim: int) -> None:
        """Check (and on the first embedding fix) the store's dimension and its vector
        index. Once the vector column is typed with it, the dimension is remembered (after
        the commit) and not read again: the column itself refuses any other size."""
        if self._dim == dim:
            return
        if fix_dimension(conn, dim, self.config.embedding_dim):
            vector_column.ensure_vector_index(conn, dim)
        if vector_column.column_dimension(conn) == dim:
            self.engine.after_commit(lambda: setattr(self, "_dim", dim))

    def forget_dimension(self) -> None:
        """Read the dimension again at the next write (it changed, or may have)."""
        self._dim = None

    def upsert(self, conn: Connection, encoded: Encoded) -> None:
        memory_steps.upsert(conn, *encoded.row)

    def insert_new(
        self, conn: Connection, batch: Sequence[Encoded], schedules: Sequence[RepetitionSchedule]
    ) -> None:
        """One memory (``remember()``'s path): one statement writes the row, its vector,
        content key and schedule. A batch: the ids checked, then a few set-based writes."""
        if len(batch) == 1:
            self._insert_one(conn, batch[0], schedules[0] if schedules else None)
            return
        run(conn, memory_sql.bulk_keyword_entries())
        taken = column(conn, memory_sql.existing_ids([e.memory.id for e in batch]))
        if taken:
            raise ids_taken(set(taken))
        vectors = [(e.memory.id, e.row[1]) for e in batch if e.row[1] is not None]
        memories, vectored = memory_sql.insert_many([e.row[0] for e in batch], vectors)
        try:
            run_all(conn, memories)
        except pg.UniqueViolation:  # another writer took an id since the check
            raise DuplicateMemoryError(
                "a memory id of the batch was taken by another writer; nothing was written"
            ) from None
        run_all(conn, vectored)
        run_batch(conn, dedup_sql.record([e.memory for e in batch]))
        run_batch(conn, schedule_sql.insert_many(schedules))

    def _insert_one(
        self, conn: Connection, encoded: Encoded, schedule: RepetitionSchedule | None
    ) -> None:
        memory, (columns, vector) = encoded.memory, encoded.row
        key = content_key(memory.content, memory.agent_id, memory.session_id)
        timing = None if schedule is None else _timing(schedule)
        try:
            inserted = row(conn, memory_sql.insert_one(columns, vector, key, timing)) is not None
        except pg.UniqueViolation:  # another writer (or another agent) has the id
            raise DuplicateMemoryError(
                f"memory id {memory.id} is already used; nothing was written"
            ) from None
        except pg.DataException as exc:  # the dimension changed since it was read
            expected = _EXPECTED_DIM.search(str(exc))
            if vector is None or expected is None:
                raise
            self.forget_dimension()
            raise EmbeddingDimensionError(len(vector), int(expected[1])) from None
        if not inserted:
            raise DuplicateMemoryError(
                f"memory id {memory.id} is already used (1 in the batch); nothing was written"
            )

    def move(
        self, conn: Connection, memory: Memory, target: Tier, metadata: dict[str, Any], at: int
    ) -> None:
        """The row's tier is updated in place (vector, tags and schedule stay)."""
        encoded = encode_json(metadata, "metadata") if metadata else "{}"
        run(conn, memory_sql.move(memory.id, memory.tier, target, encoded, at))

    def forget(
        self,
        conn: Connection,
        memory_id: str,
        tier: Tier | None,
        retention: float | None,
        reason: str | None,
        at: int,
    ) -> Tier | None:
        statement = memory_sql.forget_rows(
            [memory_id], [retention], tier, reason, at, self.config.scope
        )
        gone = memory_sql.forgotten(rows(conn, statement))
        return gone[0][1] if gone else None

    def remove(self, conn: Connection, memory_ids: Sequence[str], tier: Tier) -> int:
        statement = memory_sql.forget_rows(memory_ids, None, tier, None, None, self.config.scope)
        return len(rows(conn, statement))

    def read_any(self, memory_id: str) -> Memory | None:
        with self.engine.reading() as conn:
            found = row(conn, memory_sql.fetch(None, memory_id, self.config.scope))
            return None if found is None else memory_sql.to_memory(found)

    def content_key_seen(self, key: bytes) -> bool:
        """True: :meth:`find_same` is one round trip itself, a probe would double it."""
        return True

    def find_same(self, conn: Connection, key: bytes, tier: Tier) -> list[str]:
        """Probes first: most contents are new, and the probe is cheaper than the join."""
        if row(conn, dedup_sql.seen(key)) is None:
            return []
        return [str(found) for found in column(conn, dedup_sql.find(key, tier))]

    def remember_new(
        self,
        memory: Memory,
        schedule: RepetitionSchedule,
        key: bytes,
        touch_at: int | None,
        dedup: bool,
    ) -> Memory | None:
        """One round trip (:meth:`PgDatabase.write_in_one_trip`); ``None`` too when the
        store's vector dimension is not known yet, or a vector of another size is refused."""
        vector = _vector(memory.embedding)
        if vector is not None and self._dim != len(vector):
            return None  # the first embedding, or another size: the checked path
        columns = memory_sql.encode_row(memory)
        statement = memory_sql.remember_statement(
            columns, vector, key, _timing(schedule), touch_at=touch_at, dedup=dedup
        )
        try:
            (answer,) = self.engine.write_in_one_trip(
                [statement], wrote=memory_sql.inserted_condition(memory.id)
            )
        except StorageError as exc:
            if exc.sqlstate == _UNIQUE_VIOLATION:  # another agent's memory has the id
                raise DuplicateMemoryError(
                    f"memory id {memory.id} is already used; nothing was written"
                ) from None
            if vector is not None and _EXPECTED_DIM.search(str(exc)):  # the size changed
                self.forget_dimension()
                return None  # the checked path reads it again and says so
            raise
        if answer is None or not answer[0]:
            return None
        if answer[1] is None:
            raise DuplicateMemoryError(
                f"memory id {memory.id} is already used (1 in the batch); nothing was written"
            )
        return memory_sql.as_stored(memory, columns, vector)


def server_memory_store(engine: PgDatabase, config: StoreConfig) -> MemoryStore:
    """The shared memory store over a server database."""
    own = ServerMemories(engine, config)
    return MemoryStore(
        engine,
        memory_sql,
        own,
        config,
        one_trip=own.remember_new,
        dedup=dedup_sql,
        tag_counts=tag_counts_sql,
        none_superseded=EmptyAtVersion(engine),
    )

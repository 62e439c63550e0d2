"""PgMemoryStore: the memories of the three tiers, promotion and its log, deduplication
notes and the scratchpad, on PostgreSQL.

One part of :class:`~persistence.postgres.store.PostgresStore`, over its
:class:`~persistence.postgres.database.PgDatabase`: the twin of
:class:`persistence.sqlite.memory_store.MemoryStore`, validating input the same way and
raising the same errors. Each method runs :mod:`~persistence.postgres.sql.memory_sql`
(or ``dedup_sql``) in one transaction (durable when it returns) or on a read connection.
A memory's vector lives in ``tm_vectors``; promotion updates the row's tier in place.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np
import psycopg
from psycopg import errors as pg

from persistence.codecs import decode_embedding, encode_embedding, encode_json
from persistence.dedup_key import content_key
from persistence.errors import (
    DuplicateMemoryError,
    EmbeddingDimensionError,
    InvalidInputError,
    InvalidPromotionError,
    MemoryNotFoundError,
    StorageError,
    TieredMemoryError,
)
from persistence.postgres.config import StoreConfig
from persistence.postgres.database import Connection, PgDatabase
from persistence.postgres.sql import dedup_sql, memory_sql, schedule_sql, tag_counts_sql, vector_sql
from persistence.postgres.sql.vector_dim_sql import fix_dimension
from persistence.postgres.translate import call_error
from persistence.records import Memory, PromotionRecord, QueryOptions, RepetitionSchedule, Tier
from persistence.validation import (
    parse_tier,
    require_content_size,
    require_int,
    require_str,
    validate_memory,
    validate_schedule,
)

_EXPECTED_DIM = re.compile(r"expected (\d+) dimensions")
"""pgvector's refusal of a vector of another size than the column's."""
_UNIQUE_VIOLATION = "23505"


def _vector(embedding: Any) -> np.ndarray | None:
    """A validated, read-only float32 copy of an embedding (``None`` stays ``None``)."""
    return None if embedding is None else decode_embedding(encode_embedding(embedding, None))


class PgMemoryStore:
    """Memories of the scratchpad, episodic and semantic tiers on one server (see the
    module docstring); ``config`` is the store's, read live. The per-tier methods
    (``put_episodic`` ...) are the reference design's lower-level API."""

    def __init__(self, db: PgDatabase, config: StoreConfig) -> None:
        self.db = db
        self.config = config
        self._dim: int | None = None  # the vector column's dimension, once typed (committed)
        db.on_external_change(self.forget_dimension)

    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        """One transaction (a savepoint inside the caller's); server errors translated."""
        with self.db.transaction() as conn:
            try:
                yield conn
            except psycopg.Error as exc:
                raise call_error(exc, self.db._url) from None

    # --- memories of any tier ---------------------------------------------------------------

    def check_content_size(self, content: str, what: str = "content") -> None:
        """Refuse new content over ``max_content_bytes`` before any work is done on it."""
        require_content_size(content, what, self.config.max_content_bytes)

    def put_memory(self, memory: Memory) -> Memory:
        """Insert or update ``memory`` in the tier it names (a scratchpad one needs a key)."""
        validate_memory(memory)
        if memory.tier is Tier.SCRATCHPAD:
            require_str(memory.key, "memory.key of a scratchpad memory", allow_empty=False)
        return self._write(memory, memory.tier)

    def insert_memories(
        self, memories: Sequence[Memory], schedules: Sequence[RepetitionSchedule] = ()
    ) -> list[Memory]:
        """Insert new episodic or semantic memories (and their schedules) in one
        transaction: all of them or none. Returns them as stored.

        Every memory is checked before anything is written; an id already used anywhere
        (or twice in the batch) raises :class:`DuplicateMemoryError`, an embedding of
        another size :class:`EmbeddingDimensionError`. Each schedule must belong to one
        of ``memories``. Their content is noted for :meth:`find_same_content`.
        """
        rows: list[tuple[Any, ...]] = []
        vectors: list[tuple[str, np.ndarray]] = []
        stored: list[Memory] = []
        for position, memory in enumerate(memories):
            try:
                validate_memory(memory, max_content_bytes=self.config.max_content_bytes)
                if memory.tier is Tier.SCRATCHPAD:
                    raise InvalidInputError(
                        "insert_memories() takes episodic and semantic memories; "
                        "use put_scratchpad() for the scratchpad"
                    )
                vector = _vector(memory.embedding)
                normal = replace(memory, tags=tuple(dict.fromkeys(memory.tags)))
                row = memory_sql.encode_row(normal)
            except TieredMemoryError as exc:
                exc.add_note(f"in memory {position} of the batch; nothing was written")
                raise
            rows.append(row)
            if vector is not None:
                vectors.append((memory.id, vector))
            stored.append(memory_sql.as_stored(normal, row, vector))
        ids = [memory.id for memory in stored]
        if len(set(ids)) != len(ids):
            raise DuplicateMemoryError("insert_memories(): an id appears twice in the batch")
        for schedule in schedules:
            validate_schedule(schedule)
        unknown = {s.memory_id for s in schedules}.difference(ids)
        if unknown:
            raise MemoryNotFoundError(
                f"schedules for memories not in the batch: {sorted(unknown)[:3]}"
            )
        if not stored:
            return []
        if len(stored) == 1:
            self._insert_one(stored[0], rows[0], vectors, schedules)
            return stored
        with self._writing() as conn:
            memory_sql.bulk_keyword_entries(conn)
            for dim in sorted({len(v) for _, v in vectors}):
                self._check_dimension(conn, dim)
            taken = memory_sql.existing_ids(conn, ids)
            if taken:
                raise DuplicateMemoryError(
                    f"memory id {sorted(taken)[0]} is already used ({len(taken)} in the batch); "
                    "nothing was written"
                )
            try:
                memory_sql.insert_many(conn, rows, vectors)
            except pg.UniqueViolation:  # another writer took an id since the check
                raise DuplicateMemoryError(
                    "a memory id of the batch was taken by another writer; nothing was written"
                ) from None
            dedup_sql.record(conn, stored)
            schedule_sql.insert_many(conn, schedules)
        return stored

    def _insert_one(
        self,
        memory: Memory,
        row: tuple[Any, ...],
        vectors: list[tuple[str, np.ndarray]],
        schedules: Sequence[RepetitionSchedule],
    ) -> None:
        """:meth:`insert_memories` of one memory: one statement writes the row, its
        vector, content key and schedule (``remember()``'s path)."""
        vector = vectors[0][1] if vectors else None
        schedule = None
        if schedules:
            s = schedules[0]
            schedule = (
                s.next_review_at, s.interval_ms, s.review_count,
                float(s.ease_factor), float(s.stability_days), s.last_reviewed_at,
            )  # fmt: skip
        key = content_key(memory.content, memory.agent_id, memory.session_id)
        with self._writing() as conn:
            if vector is not None:
                self._check_dimension(conn, len(vector))
            try:
                inserted = memory_sql.insert_one(conn, row, vector, key, schedule)
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

    def remember_new(
        self,
        memory: Memory,
        schedule: RepetitionSchedule,
        *,
        touch_at: int | None,
        dedup: bool,
    ) -> Memory | None:
        """``remember()``'s write of a new episodic or semantic memory in ONE round trip
        (:meth:`PgDatabase.write_in_one_trip`): the memory, its vector, content key and
        schedule, and its session's activity time (``touch_at``), if the session named
        is there and active and (``dedup``) no memory with the same content key is; else
        nothing is written and ``None`` returned (the caller takes the step-by-step
        path, which raises or reinforces). ``None`` too when the store's vector
        dimension is not known yet, or a vector of another size is refused. Returns the
        memory as stored; durable when it returns."""
        validate_memory(memory, max_content_bytes=self.config.max_content_bytes)
        validate_schedule(schedule)
        if memory.tier is Tier.SCRATCHPAD:
            raise InvalidInputError("remember_new() takes an episodic or semantic memory")
        if schedule.memory_id != memory.id:
            raise InvalidInputError("remember_new(): the schedule is another memory's")
        vector = _vector(memory.embedding)
        if vector is not None and self._dim != len(vector):
            return None  # the first embedding, or another size: the checked path
        normal = replace(memory, tags=tuple(dict.fromkeys(memory.tags)))
        row = memory_sql.encode_row(normal)
        key = content_key(memory.content, memory.agent_id, memory.session_id)
        s = schedule
        timing = (
            s.next_review_at, s.interval_ms, s.review_count,
            float(s.ease_factor), float(s.stability_days), s.last_reviewed_at,
        )  # fmt: skip
        statement = memory_sql.remember_statement(
            row, vector, key, timing, touch_at=touch_at, dedup=dedup
        )
        try:
            (answer,) = self.db.write_in_one_trip(
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
        return memory_sql.as_stored(normal, row, vector)

    def _check_dimension(self, conn: Connection, dim: int) -> None:
        """Check (and on the first embedding fix) the store's dimension and its vector
        index. Once the vector column is typed with it, the dimension is remembered (after
        the commit) and not read again: the column itself refuses any other size."""
        if self._dim == dim:
            return
        if fix_dimension(conn, dim, self.config.embedding_dim):
            vector_sql.ensure_vector_index(conn, dim)
        if vector_sql.column_dimension(conn) == dim:
            self.db.after_commit(lambda: setattr(self, "_dim", dim))

    def forget_dimension(self) -> None:
        """Read the dimension again at the next write (it changed, or may have)."""
        self._dim = None

    def get_memory(self, memory_id: str) -> Memory | None:
        """The memory with that id in whichever tier holds it, or ``None``."""
        require_str(memory_id, "memory_id")
        with self.db.reading() as conn:
            return memory_sql.fetch(conn, None, memory_id)

    def get_memories(self, memory_ids: Sequence[str]) -> dict[str, Memory]:
        """Several memories by id in one query per 1000 (missing ids are left out)."""
        for memory_id in memory_ids:
            require_str(memory_id, "memory_id")
        found: dict[str, Memory] = {}
        with self.db.reading() as conn:
            for start in range(0, len(memory_ids), 1000):
                for memory in memory_sql.fetch_many(conn, memory_ids[start : start + 1000]):
                    found[memory.id] = memory
        return found

    def query(self, tier: Tier, options: QueryOptions | None = None) -> list[Memory]:
        """Memories of ``tier`` matching every filter set in ``options``."""
        return self._query(parse_tier(tier, "tier"), options)

    def count(self, tier: Tier) -> int:
        """How many memories ``tier`` holds."""
        tier = parse_tier(tier, "tier")
        with self.db.reading() as conn:
            return memory_sql.count(conn, tier)

    def tag_counts(self, prefix: str) -> dict[str, int]:
        """How many memories carry each namespace tag starting with ``prefix`` (of the
        scopes this handle sees)."""
        require_str(prefix, "prefix", allow_empty=True)
        with self.db.reading() as conn:
            return tag_counts_sql.counts(conn, prefix)

    def page(self, tier: Tier, after_id: str = "", limit: int = 500) -> list[Memory]:
        """The next ``limit`` memories of ``tier`` after ``after_id`` in id order (byte-wise,
        as on SQLite)."""
        require_str(after_id, "after_id")
        require_int(limit, "limit", minimum=1)
        tier = parse_tier(tier, "tier")
        with self.db.reading() as conn:
            return memory_sql.page(conn, tier, after_id, limit)

    def forget_memory(
        self, memory_id: str, reason: str, retention: float | None = None
    ) -> Tier | None:
        """Delete a memory from whichever tier holds it and write an audit row.

        Content, tags, vector, schedule and content key go; its promotion-log rows stay
        and a forgetting-log row is added. Returns the tier it was in, or ``None`` (and
        writes nothing) if there was none.
        """
        require_str(memory_id, "memory_id")
        require_str(reason, "reason", allow_empty=False)
        with self._writing() as conn:
            gone = memory_sql.forget_rows(
                conn, [memory_id], [retention], None, reason, self.config.clock()
            )
        return gone[0][1] if gone else None

    # --- promotion --------------------------------------------------------------------------

    def promote_memory(
        self, memory_id: str, from_tier: Tier, to_tier: Tier, reason: str | None = None
    ) -> PromotionRecord:
        """Move a memory forward a tier and log it in ONE transaction (the row's tier is
        updated in place). Tags, vector and schedule stay; a scratchpad key is cleared and
        kept in the metadata as ``scratchpad_key``. Raises :class:`InvalidPromotionError`
        for a move that is not forward, :class:`MemoryNotFoundError` if ``from_tier`` does
        not hold it.
        """
        require_str(memory_id, "memory_id")
        require_str(reason, "reason", allow_none=True)
        source, target = parse_tier(from_tier, "from_tier"), parse_tier(to_tier, "to_tier")
        if target.rank <= source.rank:
            raise InvalidPromotionError(
                f"cannot promote from {source.value} to {target.value}: "
                "promotion goes scratchpad -> episodic -> semantic"
            )
        with self._writing() as conn:
            memory = memory_sql.fetch(conn, source, memory_id)
            if memory is None:
                raise MemoryNotFoundError(f"no memory {memory_id} in {source.value}")
            metadata = dict(memory.metadata)
            if memory.key is not None:
                metadata["scratchpad_key"] = memory.key
            encoded = encode_json(metadata, "metadata") if metadata else "{}"
            now = self.config.clock()
            memory_sql.move(conn, memory_id, source, target, encoded, now)
            return memory_sql.log_promotion(conn, memory_id, source, target, now, reason)

    def get_promotion_history(self, memory_id: str) -> list[PromotionRecord]:
        """Every logged promotion of a memory, oldest first."""
        require_str(memory_id, "memory_id")
        with self.db.reading() as conn:
            return memory_sql.promotion_history(conn, memory_id)

    # --- deduplication ----------------------------------------------------------------------

    def record_content_keys(self, memories: Sequence[Memory]) -> None:
        """Note what these memories say (``tm_content_keys``), for :meth:`find_same_content`."""
        with self.db.transaction(join=True) as conn:
            try:
                dedup_sql.record(conn, memories)
            except psycopg.Error as exc:
                raise call_error(exc, self.db._url) from None

    def find_same_content(
        self, content: str, tier: Tier, agent_id: str | None, session_id: str | None
    ) -> list[str]:
        """Ids of live memories of ``tier`` noted with the same normalised content, agent
        and session, oldest first (the caller compares the content itself)."""
        key = content_key(content, agent_id, session_id)
        tier = parse_tier(tier, "tier")
        with self.db.reading() as conn:
            return dedup_sql.find(conn, key, tier)

    # --- the scratchpad ---------------------------------------------------------------------

    def put_scratchpad(self, key: str, memory: Memory) -> Memory:
        """Store ``memory`` under ``key`` (replacing what the key held); return it as stored."""
        require_str(key, "key", allow_empty=False)
        return self._write(replace(memory, key=key), Tier.SCRATCHPAD)

    def get_scratchpad(self, key: str) -> Memory | None:
        """The scratchpad memory under ``key``, or ``None``."""
        require_str(key, "key")
        with self.db.reading() as conn:
            return memory_sql.fetch_by_key(conn, key)

    def delete_scratchpad(self, key: str) -> bool:
        """Delete the scratchpad entry under ``key``; True if there was one."""
        require_str(key, "key")
        with self._writing() as conn:
            memory = memory_sql.fetch_by_key(conn, key)
            if memory is None:
                return False
            return bool(memory_sql.forget_rows(conn, [memory.id], None, Tier.SCRATCHPAD,
                                               None, None))  # fmt: skip

    def get_all_scratchpad(self) -> list[Memory]:
        """Every scratchpad entry, least recently written first."""
        with self.db.reading() as conn:
            return memory_sql.fetch_all(conn, Tier.SCRATCHPAD)

    def clear_scratchpad(self) -> int:
        """Delete every scratchpad entry; return how many."""
        with self._writing() as conn:
            return memory_sql.clear(conn, Tier.SCRATCHPAD)

    # --- the lower-level API: one method per tier -------------------------------------------

    def put_episodic(self, memory: Memory) -> Memory:
        """Insert or update an episodic memory; return it as stored."""
        return self._write(memory, Tier.EPISODIC)

    def get_episodic(self, memory_id: str) -> Memory | None:
        """The episodic memory with that id, or ``None``."""
        return self._get(Tier.EPISODIC, memory_id)

    def delete_episodic(self, memory_id: str) -> bool:
        """Delete an episodic memory (audited, reason ``"deleted"``); True if it existed."""
        return self._delete(Tier.EPISODIC, memory_id)

    def query_episodic(self, options: QueryOptions | None = None) -> list[Memory]:
        """Episodic memories matching every filter set in ``options``."""
        return self._query(Tier.EPISODIC, options)

    def put_semantic(self, memory: Memory) -> Memory:
        """Insert or update a semantic memory; return it as stored."""
        return self._write(memory, Tier.SEMANTIC)

    def get_semantic(self, memory_id: str) -> Memory | None:
        """The semantic memory with that id, or ``None``."""
        return self._get(Tier.SEMANTIC, memory_id)

    def delete_semantic(self, memory_id: str) -> bool:
        """Delete a semantic memory (audited, reason ``"deleted"``); True if it existed."""
        return self._delete(Tier.SEMANTIC, memory_id)

    def query_semantic(self, options: QueryOptions | None = None) -> list[Memory]:
        """Semantic memories matching every filter set in ``options``."""
        return self._query(Tier.SEMANTIC, options)

    # --- shared steps -----------------------------------------------------------------------

    def _write(self, memory: Memory, tier: Tier) -> Memory:
        validate_memory(memory)
        if memory.tier is not tier:
            raise InvalidInputError(f"memory {memory.id} is {memory.tier.value}, not {tier.value}")
        oversized = self._oversized(memory.content)
        vector = _vector(memory.embedding)
        normal = replace(memory, tags=tuple(dict.fromkeys(memory.tags)))
        row = memory_sql.encode_row(normal)
        stored = memory_sql.as_stored(normal, row, vector)
        with self._writing() as conn:
            found = memory_sql.content_and_tier(conn, memory.id)
            if oversized is not None and (found is None or found[0] != memory.content):
                raise oversized
            if found is not None and found[1] is not tier:
                raise DuplicateMemoryError(
                    f"memory {memory.id} already lives in {found[1].value}; promote it instead"
                )
            if vector is not None:
                self._check_dimension(conn, len(vector))
            memory_sql.upsert(conn, row, vector)
        return stored

    def _oversized(self, content: str) -> InvalidInputError | None:
        """The error for content over ``max_content_bytes`` (``None`` if it fits)."""
        try:
            require_content_size(content, "memory.content", self.config.max_content_bytes)
        except InvalidInputError as exc:
            return exc
        return None

    def _get(self, tier: Tier, memory_id: str) -> Memory | None:
        require_str(memory_id, "memory_id")
        with self.db.reading() as conn:
            return memory_sql.fetch(conn, tier, memory_id)

    def _delete(self, tier: Tier, memory_id: str) -> bool:
        require_str(memory_id, "memory_id")
        with self._writing() as conn:
            gone = memory_sql.forget_rows(
                conn, [memory_id], None, tier, "deleted", self.config.clock()
            )
        return bool(gone)

    def _query(self, tier: Tier, options: QueryOptions | None) -> list[Memory]:
        options = options or QueryOptions()
        with self.db.reading() as conn:  # memory_sql.query validates the options
            return memory_sql.query(conn, tier, options)

"""MemoryStore: the memories of the three tiers, promotion and its log, and what
deduplication notes about their content.

One part of :class:`~persistence.sqlite.store.SQLiteStore`, over its
:class:`~persistence.sqlite.database.Database`. Each method validates its input, then
runs :mod:`~persistence.sqlite.sql.memory_sql` (or ``dedup_sql``) in one transaction
(durable when it returns) or on this thread's read connection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import apsw

from persistence.codecs import encode_embedding
from persistence.errors import (
    DuplicateMemoryError,
    EmbeddingDimensionError,
    InvalidInputError,
    InvalidPromotionError,
    MemoryNotFoundError,
    TieredMemoryError,
)
from persistence.records import (
    ForgettingRecord,
    Memory,
    PromotionRecord,
    QueryOptions,
    RepetitionSchedule,
    Tier,
)
from persistence.sqlite.database import Database
from persistence.sqlite.sql import (
    dedup_sql,
    forgetting_sql,
    memory_sql,
    schedule_sql,
    tag_counts_sql,
)
from persistence.sqlite.sql.meta_sql import EMBEDDING_DIM_KEY, read_meta, write_meta
from persistence.sqlite.translate import SQLITE_ERRORS, _from_sqlite
from persistence.validation import (
    parse_tier,
    require_content_size,
    require_int,
    require_str,
    validate_memory,
    validate_schedule,
)

_ANY_TIER, _ = memory_sql.fetch_any_query("")  # the statement of every uncached get
_any_tier_memory = memory_sql.any_tier_memory


def check_dimension(conn: apsw.Connection, dim: int, configured: int | None) -> None:
    """The first embedding fixes the file's dimension (``configured``, if the store was
    given one); later ones must match it."""
    stored = read_meta(conn, EMBEDDING_DIM_KEY)
    expected = int(stored) if stored is not None else configured
    if expected is not None and dim != expected:
        raise EmbeddingDimensionError(dim, expected)
    if stored is None:
        write_meta(conn, EMBEDDING_DIM_KEY, str(dim))


def forget(
    conn: apsw.Connection,
    tier: Tier,
    memory_id: str,
    retention: float | None,
    reason: str,
    clock: Callable[[], int],
) -> bool:
    """Delete a memory of ``tier`` and log why, stamped ``clock()`` (in the caller's
    transaction); False if there was none."""
    agent_id = forgetting_sql.agent_of(conn, tier, memory_id)
    if not memory_sql.delete(conn, tier, memory_id):
        return False
    record = ForgettingRecord(memory_id, tier, clock(), retention, reason)
    forgetting_sql.log_forgotten(conn, record, agent_id)
    return True


class MemoryStore:
    """Memories of the scratchpad, episodic and semantic tiers in one file.

    ``clock`` returns epoch milliseconds; ``embedding_dim`` is the size the store was
    configured with (``None``: the first embedding fixes it); ``max_content_bytes``
    refuses new content larger than that. The per-tier methods (``put_episodic`` ...
    ``clear_scratchpad``) are the lower-level API of the reference design: thin wrappers
    over the tier-generic ones.
    """

    def __init__(
        self,
        db: Database,
        clock: Callable[[], int],
        embedding_dim: int | None,
        max_content_bytes: int,
    ) -> None:
        self.db = db
        self.clock = clock
        self.embedding_dim = embedding_dim
        self.max_content_bytes = max_content_bytes
        self._reading = db.reading
        self._transaction = db.transaction

    # --- memories of any tier ---------------------------------------------------------------

    def check_content_size(self, content: str, what: str = "content") -> None:
        """Refuse new content over ``max_content_bytes`` before any work is done on it."""
        require_content_size(content, what, self.max_content_bytes)

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
        transaction, set-based: all of them or none. Returns them as stored.

        Every memory is checked before anything is written; an id already used anywhere
        (or twice in the batch) raises :class:`DuplicateMemoryError`, an embedding of
        another size :class:`EmbeddingDimensionError`. Each schedule must belong to one
        of ``memories``. The keyword index is brought up to date once, at commit; their
        content is noted for :meth:`find_same_content`.
        """
        prepared: list[tuple[Memory, tuple[Any, ...]]] = []
        sizes: set[int] = set()
        for position, memory in enumerate(memories):
            try:
                validate_memory(memory, max_content_bytes=self.max_content_bytes)
                if memory.tier is Tier.SCRATCHPAD:
                    raise InvalidInputError(
                        "insert_memories() takes episodic and semantic memories; "
                        "use put_scratchpad() for the scratchpad"
                    )
                embedding = memory.embedding
                blob = None if embedding is None else encode_embedding(embedding, None)
                row = memory_sql.encode_row(memory, blob)  # tags are not in the row
            except TieredMemoryError as exc:
                exc.add_note(f"in memory {position} of the batch; nothing was written")
                raise
            if blob is not None:
                sizes.add(len(blob) // 4)
            tags = memory.tags
            tags = tuple(tags) if len(tags) < 2 else tuple(dict.fromkeys(tags))
            prepared.append((memory_sql.as_stored(memory, row, tags), row))
        ids = [memory.id for memory, _ in prepared]
        if len(ids) > 1 and len(set(ids)) != len(ids):
            raise DuplicateMemoryError("insert_memories(): an id appears twice in the batch")
        for schedule in schedules:
            validate_schedule(schedule)
        if schedules and (len(schedules) > 1 or schedules[0].memory_id not in ids):
            unknown = {s.memory_id for s in schedules}.difference(ids)
            if unknown:
                raise MemoryNotFoundError(
                    f"schedules for memories not in the batch: {sorted(unknown)[:3]}"
                )
        with self._transaction() as conn:
            for dim in sorted(sizes) if sizes else ():
                check_dimension(conn, dim, self.embedding_dim)
            taken = memory_sql.existing_ids(conn, ids)
            if taken:
                raise DuplicateMemoryError(
                    f"memory id {sorted(taken)[0]} is already used ({len(taken)} in the batch); "
                    "nothing was written"
                )
            memory_sql.insert_many(conn, prepared)
            dedup_sql.record(conn, [memory for memory, _ in prepared])
            schedule_sql.insert_many(conn, schedules)
        return [memory for memory, _ in prepared]

    def get_memory(self, memory_id: str) -> Memory | None:
        """The memory with that id in whichever tier holds it, or ``None``."""
        if type(memory_id) is not str:
            require_str(memory_id, "memory_id")
        row = self.db.read_row(_ANY_TIER, (memory_id, memory_id, memory_id))
        try:
            return _any_tier_memory(row)
        except SQLITE_ERRORS as exc:  # a damaged value (read_row translated the read's)
            raise _from_sqlite(exc, f"reading {self.db.path}", self.db.path) from exc

    def get_memories(self, memory_ids: Sequence[str]) -> dict[str, Memory]:
        """Several memories by id in one query per tier (missing ids are left out)."""
        for memory_id in memory_ids:
            require_str(memory_id, "memory_id")
        found: dict[str, Memory] = {}
        with self._reading() as conn:
            for start in range(0, len(memory_ids), 500):
                for memory in memory_sql.fetch_many(conn, memory_ids[start : start + 500]):
                    found[memory.id] = memory
        return found

    def query(self, tier: Tier, options: QueryOptions | None = None) -> list[Memory]:
        """Memories of ``tier`` matching every filter set in ``options``."""
        return self._query(parse_tier(tier, "tier"), options)

    def count(self, tier: Tier) -> int:
        """How many memories ``tier`` holds."""
        with self._reading() as conn:
            return memory_sql.count(conn, parse_tier(tier, "tier"))

    def tag_counts(self, prefix: str, agent_id: str | None = None) -> dict[str, int]:
        """How many memories carry each namespace tag starting with ``prefix`` (with
        ``agent_id``: of that agent's memories only, from the tag index)."""
        require_str(prefix, "prefix", allow_empty=True)
        with self._reading() as conn:
            if agent_id is None:
                return tag_counts_sql.counts(conn, prefix)
            return tag_counts_sql.agent_counts(conn, prefix, agent_id)

    def page(self, tier: Tier, after_id: str = "", limit: int = 500) -> list[Memory]:
        """The next ``limit`` memories of ``tier`` after ``after_id`` in id order."""
        require_str(after_id, "after_id")
        require_int(limit, "limit", minimum=1)
        with self._reading() as conn:
            return memory_sql.page(conn, parse_tier(tier, "tier"), after_id, limit)

    def forget_memory(
        self, memory_id: str, reason: str, retention: float | None = None
    ) -> Tier | None:
        """Delete a memory from whichever tier holds it and write an audit row.

        Content, tags and schedule go; the audit stays: its promotion-log rows are kept
        and a forgetting-log row is added. Returns the tier it was in, or ``None`` (and
        writes nothing) if there was none.
        """
        require_str(memory_id, "memory_id")
        require_str(reason, "reason", allow_empty=False)
        with self._transaction() as conn:
            tier = memory_sql.tier_of(conn, memory_id)
            if tier is not None:
                forget(conn, tier, memory_id, retention, reason, self.clock)
            return tier

    # --- promotion --------------------------------------------------------------------------

    def promote_memory(
        self, memory_id: str, from_tier: Tier, to_tier: Tier, reason: str | None = None
    ) -> PromotionRecord:
        """Move a memory forward a tier: delete, insert and log in ONE transaction.

        Tags and schedule follow the memory; a scratchpad key is kept in the metadata
        as ``scratchpad_key``. Raises :class:`InvalidPromotionError` for a move that is
        not forward, :class:`MemoryNotFoundError` if ``from_tier`` does not hold it.
        """
        require_str(memory_id, "memory_id")
        require_str(reason, "reason", allow_none=True)
        source, target = parse_tier(from_tier, "from_tier"), parse_tier(to_tier, "to_tier")
        if target.rank <= source.rank:
            raise InvalidPromotionError(
                f"cannot promote from {source.value} to {target.value}: "
                "promotion goes scratchpad -> episodic -> semantic"
            )
        with self._transaction() as conn:
            memory = memory_sql.fetch(conn, source, memory_id)
            if memory is None:
                raise MemoryNotFoundError(f"no memory {memory_id} in {source.value}")
            metadata = dict(memory.metadata)
            if memory.key is not None:
                metadata["scratchpad_key"] = memory.key
            now = self.clock()
            moved = replace(
                memory,
                tier=target,
                key=None,
                metadata=metadata,
                updated_at=max(now, memory.created_at),
            )
            memory_sql.remove_row(conn, source, memory_id)
            blob = None if memory.embedding is None else encode_embedding(memory.embedding, None)
            memory_sql.upsert(conn, moved, memory_sql.encode_row(moved, blob))
            return memory_sql.log_promotion(conn, memory_id, source, target, now, reason)

    def get_promotion_history(self, memory_id: str) -> list[PromotionRecord]:
        """Every logged promotion of a memory, oldest first."""
        require_str(memory_id, "memory_id")
        with self._reading() as conn:
            return memory_sql.promotion_history(conn, memory_id)

    # --- deduplication ----------------------------------------------------------------------

    def record_content_keys(self, memories: Sequence[Memory]) -> None:
        """Note what these memories say (``content_keys``), for :meth:`find_same_content`."""
        with self._transaction(join=True) as conn:
            dedup_sql.record(conn, memories)

    def find_same_content(
        self, content: str, tier: Tier, agent_id: str | None, session_id: str | None
    ) -> list[str]:
        """Ids of live memories of ``tier`` noted with the same normalised content, agent
        and session, oldest first (the caller compares the content itself)."""
        key = dedup_sql.content_key(content, agent_id, session_id)
        if self.db.read_row(dedup_sql.ANY, (key,)) is None:  # most contents are new
            return []
        with self._reading() as conn:
            return dedup_sql.find(conn, key, tier)

    def remember_new(
        self,
        memory: Memory,
        schedule: RepetitionSchedule,
        *,
        touch_at: int | None,
        dedup: bool,
    ) -> Memory | None:
        """Always ``None``: on a file in-process, ``remember()``'s step-by-step path (a
        few statements of microseconds each) is the quick one; nothing is written."""
        return None

    # --- the scratchpad ---------------------------------------------------------------------

    def put_scratchpad(self, key: str, memory: Memory) -> Memory:
        """Store ``memory`` under ``key`` (replacing what the key held); return it as stored."""
        require_str(key, "key", allow_empty=False)
        return self._write(replace(memory, key=key), Tier.SCRATCHPAD)

    def get_scratchpad(self, key: str) -> Memory | None:
        """The scratchpad memory under ``key``, or ``None``."""
        require_str(key, "key")
        with self._reading() as conn:
            return memory_sql.fetch_by_key(conn, key)

    def delete_scratchpad(self, key: str) -> bool:
        """Delete the scratchpad entry under ``key``; True if there was one."""
        require_str(key, "key")
        with self._transaction() as conn:
            memory = memory_sql.fetch_by_key(conn, key)
            return memory is not None and memory_sql.delete(conn, Tier.SCRATCHPAD, memory.id)

    def get_all_scratchpad(self) -> list[Memory]:
        """Every scratchpad entry, least recently written first."""
        with self._reading() as conn:
            return memory_sql.fetch_all(conn, Tier.SCRATCHPAD)

    def clear_scratchpad(self) -> int:
        """Delete every scratchpad entry; return how many."""
        with self._transaction() as conn:
            return memory_sql.clear(conn, Tier.SCRATCHPAD)

    # --- the lower-level API: one method per tier -------------------------------------------

    def put_episodic(self, memory: Memory) -> Memory:
        """Insert or update an episodic memory; return it as stored."""
        return self._write(memory, Tier.EPISODIC)

    def get_episodic(self, memory_id: str) -> Memory | None:
        """The episodic memory with that id, or ``None``."""
        return self._get(Tier.EPISODIC, memory_id)

    def delete_episodic(self, memory_id: str) -> bool:
        """Delete an episodic memory with its tags and schedule; True if it existed.

        Like :meth:`forget_memory` (reason ``"deleted"``): the forgetting log records it
        and its promotion-log rows stay.
        """
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
        """Delete a semantic memory with its tags and schedule; True if it existed (audited
        like :meth:`delete_episodic`)."""
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
        blob = None if memory.embedding is None else encode_embedding(memory.embedding, None)
        normalized = replace(memory, tags=tuple(dict.fromkeys(memory.tags)))
        row = memory_sql.encode_row(normalized, blob)
        stored = memory_sql.as_stored(normalized, row)
        with self._transaction() as conn:
            if oversized is not None and memory_sql.content_of(conn, memory.id) != memory.content:
                raise oversized
            other = memory_sql.tier_of(conn, memory.id)
            if other is not None and other is not tier:
                raise DuplicateMemoryError(
                    f"memory {memory.id} already lives in {other.value}; promote it instead"
                )
            if blob is not None:
                check_dimension(conn, len(blob) // 4, self.embedding_dim)
            memory_sql.upsert(conn, stored, row)
        return stored

    def _oversized(self, content: str) -> InvalidInputError | None:
        """The error for content over ``max_content_bytes`` (``None`` if it fits)."""
        try:
            require_content_size(content, "memory.content", self.max_content_bytes)
        except InvalidInputError as exc:
            return exc
        return None

    def _get(self, tier: Tier, memory_id: str) -> Memory | None:
        require_str(memory_id, "memory_id")
        with self._reading() as conn:
            return memory_sql.fetch(conn, tier, memory_id)

    def _delete(self, tier: Tier, memory_id: str) -> bool:
        require_str(memory_id, "memory_id")
        with self._transaction() as conn:
            return forget(conn, tier, memory_id, None, "deleted", self.clock)

    def _query(self, tier: Tier, options: QueryOptions | None) -> list[Memory]:
        options = options or QueryOptions()
        with self._reading() as conn:  # memory_sql.query validates the options
            return memory_sql.query(conn, tier, options)

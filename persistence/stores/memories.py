"""MemoryStore: the memories of the three tiers, promotion and its log, and what
deduplication notes about their content, written once for both engines.

Each method validates its input, then runs the statements the engine's SQL builds
(:mod:`persistence.statements`) in one transaction (:meth:`Engine.transaction
<persistence.engine.Engine.transaction>`: durable when it returns) or on a read
connection (:meth:`Engine.reading`). The engine supplies its builders (``sql``, its
``memory_sql`` module; ``dedup`` and ``tag_counts``: see
:mod:`~persistence.stores.memory_builders`) and ``own``, a :class:`MemoryEngine`: what it
does its own way (how a row and its vector are encoded and written, how the vector size
is checked, promotion and forgetting, the one-statement reads). An engine that can write
``remember()``'s new memory in one round trip also supplies that write
(:class:`OneTripWrite`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from persistence.dedup_key import content_key
from persistence.engine import Connection, Engine
from persistence.errors import (
    DuplicateMemoryError,
    InvalidInputError,
    InvalidPromotionError,
    MemoryNotFoundError,
    TieredMemoryError,
)
from persistence.records import Memory, PromotionRecord, QueryOptions, RepetitionSchedule, Tier
from persistence.statements import Statement, column, row, rows, run_batch, value
from persistence.stores.config import StoreConfig
from persistence.stores.empty_cache import EmptyCache, NothingCached
from persistence.stores.memory_builders import DedupSql, MemorySql, TagCountsSql
from persistence.validation import (
    parse_tier,
    require_content_size,
    require_int,
    require_str,
    validate_memory,
    validate_schedule,
)


@dataclass(frozen=True, slots=True)
class Encoded:
    """A memory ready to write: ``memory`` as it reads back, ``row`` the engine's values
    for it, ``dim`` its embedding's size (``None``: no embedding)."""

    memory: Memory
    row: Any
    dim: int | None


def ids_taken(taken: set[str]) -> DuplicateMemoryError:
    """The error of a batch some of whose ids ``taken`` are already used."""
    return DuplicateMemoryError(
        f"memory id {sorted(taken)[0]} is already used ({len(taken)} in the batch); "
        "nothing was written"
    )


class MemoryEngine(Protocol):
    """What an engine does its own way for memories (see the module docstring)."""

    ids_per_query: int
    """How many ids one ``fetch_many`` statement takes."""

    def encode(self, memory: Memory) -> Encoded:
        """``memory`` (validated, tags de-duplicated) as the engine writes it."""
        ...

    def check_dimension(self, conn: Connection, dim: int) -> None:
        """Refuse an embedding of another size than the store's (the first one fixes it)."""
        ...

    def upsert(self, conn: Connection, encoded: Encoded) -> None:
        """Insert or update one memory (a scratchpad one evicts another under its key)."""
        ...

    def insert_new(
        self, conn: Connection, batch: Sequence[Encoded], schedules: Sequence[RepetitionSchedule]
    ) -> None:
        """Insert new memories, their content keys and schedules; raise
        :class:`DuplicateMemoryError` (nothing written) if an id is taken."""
        ...

    def move(
        self, conn: Connection, memory: Memory, target: Tier, metadata: dict[str, Any], at: int
    ) -> None:
        """Move ``memory`` to ``target`` (key cleared, ``metadata`` and the time set)."""
        ...

    def forget(
        self,
        conn: Connection,
        memory_id: str,
        tier: Tier | None,
        retention: float | None,
        reason: str | None,
        at: int,
    ) -> Tier | None:
        """Delete a memory (of ``tier``, if given) with its tags, vector, schedule and
        content key; with a ``reason``, log it. Returns the tier it was in, or ``None``."""
        ...

    def remove(self, conn: Connection, memory_ids: Sequence[str], tier: Tier) -> int:
        """Delete these memories of ``tier`` as :meth:`forget` does, unlogged; how many."""
        ...

    def read_any(self, memory_id: str) -> Memory | None:
        """The memory with that id in whichever tier holds it (one read, no block)."""
        ...

    def content_key_seen(self, key: bytes) -> bool:
        """A quick look before :meth:`find_same`: False if no memory has ``key``."""
        ...

    def find_same(self, conn: Connection, key: bytes, tier: Tier) -> list[str]:
        """Ids of live memories of ``tier`` noted with ``key``, oldest first."""
        ...


class OneTripWrite(Protocol):
    """``remember()``'s write of a new memory in one round trip (see
    :meth:`MemoryStore.remember_new`), on an engine that has one."""

    def __call__(
        self,
        memory: Memory,
        schedule: RepetitionSchedule,
        key: bytes,
        touch_at: int | None,
        dedup: bool,
    ) -> Memory | None:
        """The memory as stored; ``None``: nothing written, the caller takes the
        step-by-step path."""
        ...


class MemoryStore:
    """Memories of the scratchpad, episodic and semantic tiers (see the module docstring).

    ``config`` is the store's, read live (``clock``, ``max_content_bytes``, ``scope``:
    every read and removal carries it, so a scoped handle sees its agent's memories).
    The reference design's per-tier API
    (:class:`~persistence.stores.reference_api.ReferenceTierAPI`) calls the methods that
    take a tier (:meth:`write`, :meth:`get`, :meth:`delete`, :meth:`query`) and the
    scratchpad's. ``one_trip``: the engine's one-round-trip write of a new memory, if it
    has one.
    """

    def __init__(
        self,
        engine: Engine,
        sql: MemorySql,
        own: MemoryEngine,
        config: StoreConfig,
        one_trip: OneTripWrite | None = None,
        *,
        dedup: DedupSql,
        tag_counts: TagCountsSql,
        none_superseded: EmptyCache | None = None,
    ) -> None:
        self.engine = engine
        self.sql = sql
        self.own = own
        self.config = config
        self.one_trip = one_trip
        self.dedup = dedup
        self.tag_sql = tag_counts
        self._none_superseded = none_superseded or NothingCached()  # recall asks every call

    # --- memories of any tier ---------------------------------------------------------------

    def check_content_size(self, content: str, what: str = "content") -> None:
        """Refuse new content over ``max_content_bytes`` before any work is done on it."""
        require_content_size(content, what, self.config.max_content_bytes)

    def put_memory(self, memory: Memory) -> Memory:
        """Insert or update ``memory`` in the tier it names (a scratchpad one needs a key)."""
        validate_memory(memory)
        if memory.tier is Tier.SCRATCHPAD:
            require_str(memory.key, "memory.key of a scratchpad memory", allow_empty=False)
        return self.write(memory, memory.tier)

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
        batch: list[Encoded] = []
        for position, memory in enumerate(memories):
            try:
                validate_memory(memory, max_content_bytes=self.config.max_content_bytes)
                if memory.tier is Tier.SCRATCHPAD:
                    raise InvalidInputError(
                        "insert_memories() takes episodic and semantic memories; "
                        "use put_scratchpad() for the scratchpad"
                    )
                batch.append(self.own.encode(_normal(memory)))
            except TieredMemoryError as exc:
                exc.add_note(f"in memory {position} of the batch; nothing was written")
                raise
        ids = [encoded.memory.id for encoded in batch]
        if len(ids) > 1 and len(set(ids)) != len(ids):
            raise DuplicateMemoryError("insert_memories(): an id appears twice in the batch")
        for schedule in schedules:
            validate_schedule(schedule)
        unknown = {s.memory_id for s in schedules}.difference(ids)
        if unknown:
            raise MemoryNotFoundError(
                f"schedules for memories not in the batch: {sorted(unknown)[:3]}"
            )
        if not batch:
            return []
        with self.engine.transaction() as conn:
            for dim in sorted({e.dim for e in batch if e.dim is not None}):
                self.own.check_dimension(conn, dim)
            self.own.insert_new(conn, batch, schedules)
        return [encoded.memory for encoded in batch]

    def remember_new(
        self,
        memory: Memory,
        schedule: RepetitionSchedule,
        *,
        touch_at: int | None,
        dedup: bool,
    ) -> Memory | None:
        """``remember()``'s write of a new episodic or semantic memory in ONE round trip
        where the engine has one: the memory, its vector, content key and schedule, and
        its session's activity time (``touch_at``), if the session named is there and
        active and (``dedup``) no memory with the same content key is. ``None`` if
        nothing was written (the caller takes the step-by-step path, which raises or
        reinforces); else the memory as stored, durable when it returns."""
        if self.one_trip is None:  # no one-trip write: the step-by-step path costs no more
            return None  # (and checks everything itself: nothing to check twice here)
        validate_memory(memory, max_content_bytes=self.config.max_content_bytes)
        validate_schedule(schedule)
        if memory.tier is Tier.SCRATCHPAD:
            raise InvalidInputError("remember_new() takes an episodic or semantic memory")
        if schedule.memory_id != memory.id:
            raise InvalidInputError("remember_new(): the schedule is another memory's")
        key = content_key(memory.content, memory.agent_id, memory.session_id)
        return self.one_trip(_normal(memory), schedule, key, touch_at, dedup)

    def get_memory(self, memory_id: str) -> Memory | None:
        """The memory with that id in whichever tier holds it, or ``None``."""
        if type(memory_id) is not str:
            require_str(memory_id, "memory_id")
        return self.own.read_any(memory_id)

    def get_memories(self, memory_ids: Sequence[str]) -> dict[str, Memory]:
        """Several memories by id, a few statements for many (missing ids are left out)."""
        for memory_id in memory_ids:
            require_str(memory_id, "memory_id")
        found: dict[str, Memory] = {}
        step, scope, to_memory = self.own.ids_per_query, self.config.scope, self.sql.to_memory
        with self.engine.reading() as conn:
            for start in range(0, len(memory_ids), step):
                for statement in self.sql.fetch_many(memory_ids[start : start + step], scope):
                    for memory in map(to_memory, rows(conn, statement)):
                        found[memory.id] = memory
        return found

    def query(self, tier: Tier, options: QueryOptions | None = None) -> list[Memory]:
        """Memories of ``tier`` matching every filter set in ``options``."""
        tier = parse_tier(tier, "tier")
        options = options or QueryOptions()
        statement = self.sql.query(tier, options, self.config.scope)  # validates the options
        with self.engine.reading() as conn:
            return [self.sql.to_memory(r) for r in rows(conn, statement)]

    def count(self, tier: Tier) -> int:
        """How many memories ``tier`` holds."""
        tier = parse_tier(tier, "tier")
        with self.engine.reading() as conn:
            return int(value(conn, self.sql.count(tier, self.config.scope)))

    def has_superseded(self) -> bool:
        """True if any memory (of any agent) is superseded: one probe of a partial index,
        or none while an engine's cache knows nothing changed since it found none."""
        if self._none_superseded.known_empty():
            return False
        version = self._none_superseded.version()
        with self.engine.reading() as conn:
            some = bool(value(conn, self.sql.any_superseded()))
        self._none_superseded.found(not some, version)
        return some

    def mark_superseded(
        self, memory: Memory, by: str, valid_to: int, reason: str, *, earlier: bool = False
    ) -> bool:
        """Mark ``memory`` superseded by ``by`` from ``valid_to`` on, for ``reason``,
        with one targeted update that only a memory nothing superseded yet takes (in the
        caller's transaction). False: it is gone or another writer superseded it first
        (the caller decides whether that fails the write); its other columns untouched.
        ``earlier``: a memory superseded later than ``valid_to`` is marked again (a fact
        arriving late ends it sooner)."""
        require_str(by, "by", allow_empty=False)
        require_int(valid_to, "valid_to", minimum=0)
        require_str(reason, "reason", allow_empty=False)
        if memory.tier is Tier.SCRATCHPAD:
            raise InvalidInputError("a scratchpad entry is replaced by its key, not superseded")
        statement = self.sql.mark_superseded(
            memory.tier, memory.id, by, valid_to, reason, self.config.scope, earlier=earlier
        )
        with self.engine.transaction(join=True) as conn:
            return row(conn, statement) is not None

    def superseded_ids(self, memory_ids: Sequence[str]) -> dict[str, list[str]]:
        """For each of ``memory_ids`` that superseded others (in scope), their ids in id
        order: one statement per tier for all of them (recall's explanations)."""
        for memory_id in memory_ids:
            require_str(memory_id, "memory_id")
        found: dict[str, list[str]] = {}
        if not memory_ids:
            return found
        with self.engine.reading() as conn:
            for statement in self.sql.superseded_pairs(memory_ids, self.config.scope):
                for newer, older in rows(conn, statement):
                    found.setdefault(newer, []).append(older)
        return {newer: sorted(older) for newer, older in found.items()}

    def superseded_count(self) -> int:
        """How many memories (in scope) are superseded (the inspector's overview)."""
        with self.engine.reading() as conn:
            return int(value(conn, self.sql.count_superseded(self.config.scope)) or 0)

    def superseded_of(self, memory_id: str) -> list[Memory]:
        """The memories ``memory_id`` superseded (in scope), oldest first."""
        require_str(memory_id, "memory_id")
        with self.engine.reading() as conn:
            found = [
                self.sql.to_memory(r)
                for statement in self.sql.superseded_of(memory_id, self.config.scope)
                for r in rows(conn, statement)
            ]
        return sorted(found, key=lambda m: (m.created_at, m.id))

    def tag_counts(self, prefix: str, agent_id: str | None = None) -> dict[str, int]:
        """How many memories carry each namespace tag starting with ``prefix`` (with
        ``agent_id``: of that agent's memories only; a scoped handle: its agent's)."""
        require_str(prefix, "prefix", allow_empty=True)
        require_str(agent_id, "agent_id", allow_none=True)
        agent_id = self.config.scope.agent_id or agent_id
        with self.engine.reading() as conn:
            return self.tag_sql.to_counts(rows(conn, self.tag_sql.counts(prefix, agent_id)))

    def page(self, tier: Tier, after_id: str = "", limit: int = 500) -> list[Memory]:
        """The next ``limit`` memories of ``tier`` after ``after_id`` in id order (byte-wise)."""
        require_str(after_id, "after_id")
        require_int(limit, "limit", minimum=1)
        tier = parse_tier(tier, "tier")
        with self.engine.reading() as conn:
            found = rows(conn, self.sql.page(tier, after_id, limit, self.config.scope))
            return [self.sql.to_memory(r) for r in found]

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
        with self.engine.transaction() as conn:
            return self.own.forget(conn, memory_id, None, retention, reason, self.config.clock())

    # --- promotion --------------------------------------------------------------------------

    def promote_memory(
        self, memory_id: str, from_tier: Tier, to_tier: Tier, reason: str | None = None
    ) -> PromotionRecord:
        """Move a memory forward a tier and log it in ONE transaction.

        Tags, vector and schedule follow the memory; a scratchpad key is kept in the
        metadata as ``scratchpad_key``. Raises :class:`InvalidPromotionError` for a move
        that is not forward, :class:`MemoryNotFoundError` if ``from_tier`` does not hold it.
        """
        require_str(memory_id, "memory_id")
        require_str(reason, "reason", allow_none=True)
        source, target = parse_tier(from_tier, "from_tier"), parse_tier(to_tier, "to_tier")
        if target.rank <= source.rank:
            raise InvalidPromotionError(
                f"cannot promote from {source.value} to {target.value}: "
                "promotion goes scratchpad -> episodic -> semantic"
            )
        with self.engine.transaction() as conn:
            memory = self._read(conn, self.sql.fetch(source, memory_id, self.config.scope))
            if memory is None:
                raise MemoryNotFoundError(f"no memory {memory_id} in {source.value}")
            metadata = dict(memory.metadata)
            if memory.key is not None:
                metadata["scratchpad_key"] = memory.key
            now = self.config.clock()
            self.own.move(conn, memory, target, metadata, now)
            logged = value(conn, self.sql.log_promotion(memory_id, source, target, now, reason))
            return PromotionRecord(int(logged), memory_id, source, target, now, reason)

    def get_promotion_history(self, memory_id: str) -> list[PromotionRecord]:
        """Every logged promotion of a memory, oldest first."""
        require_str(memory_id, "memory_id")
        with self.engine.reading() as conn:
            found = rows(conn, self.sql.promotion_history(memory_id, self.config.scope))
            return [self.sql.to_promotion(r) for r in found]

    # --- deduplication ----------------------------------------------------------------------

    def record_content_keys(self, memories: Sequence[Memory]) -> None:
        """Note what these memories say (the content keys), for :meth:`find_same_content`."""
        with self.engine.transaction(join=True) as conn:
            run_batch(conn, self.dedup.record(memories))

    def find_same_content(
        self, content: str, tier: Tier, agent_id: str | None, session_id: str | None
    ) -> list[str]:
        """Ids of live memories of ``tier`` noted with the same normalised content, agent
        and session, oldest first (the caller compares the content itself)."""
        key = content_key(content, agent_id, session_id)
        if not self.own.content_key_seen(key):  # most contents are new
            return []
        tier = parse_tier(tier, "tier")
        with self.engine.reading() as conn:
            return self.own.find_same(conn, key, tier)

    # --- the scratchpad ---------------------------------------------------------------------

    def put_scratchpad(self, key: str, memory: Memory) -> Memory:
        """Store ``memory`` under ``key`` (replacing what the key held); return it as stored.
        A key another agent holds is refused (one namespace per file)."""
        require_str(key, "key", allow_empty=False)
        if self.config.scope.scoped:
            with self.engine.reading() as conn:
                held = self._read(conn, self.sql.fetch_by_key(key))
            self.config.scope.refuse_taken(f"scratchpad key {key!r}", held)
        return self.write(replace(memory, key=key), Tier.SCRATCHPAD)

    def get_scratchpad(self, key: str) -> Memory | None:
        """The scratchpad memory under ``key``, or ``None``."""
        require_str(key, "key")
        with self.engine.reading() as conn:
            return self._read(conn, self.sql.fetch_by_key(key, self.config.scope))

    def delete_scratchpad(self, key: str) -> bool:
        """Delete the scratchpad entry under ``key``; True if there was one."""
        require_str(key, "key")
        with self.engine.transaction() as conn:
            memory = self._read(conn, self.sql.fetch_by_key(key, self.config.scope))
            if memory is None:
                return False
            gone = self.own.forget(conn, memory.id, Tier.SCRATCHPAD, None, None, 0)
            return gone is not None

    def get_all_scratchpad(self) -> list[Memory]:
        """Every scratchpad entry, least recently written first."""
        with self.engine.reading() as conn:
            found = rows(conn, self.sql.fetch_all(Tier.SCRATCHPAD, self.config.scope))
            return [self.sql.to_memory(r) for r in found]

    def clear_scratchpad(self) -> int:
        """Delete every scratchpad entry; return how many."""
        with self.engine.transaction() as conn:
            ids = column(conn, self.sql.ids_in(Tier.SCRATCHPAD, self.config.scope))
            return self.own.remove(conn, ids, Tier.SCRATCHPAD) if ids else 0

    # --- one tier's memories (the reference design's per-tier API names the tier) -----------

    def write(self, memory: Memory, tier: Tier) -> Memory:
        """Insert or update ``memory``, which must name ``tier``; return it as stored. One
        living in another tier is refused (promote it instead)."""
        tier = parse_tier(tier, "tier")
        validate_memory(memory)
        if memory.tier is not tier:
            raise InvalidInputError(f"memory {memory.id} is {memory.tier.value}, not {tier.value}")
        oversized = self._oversized(memory.content)
        encoded = self.own.encode(_normal(memory))
        with self.engine.transaction() as conn:
            found = row(conn, self.sql.content_and_tier(memory.id))
            if oversized is not None and (found is None or found[0] != memory.content):
                raise oversized
            if found is not None and found[1] != tier.value:
                raise DuplicateMemoryError(
                    f"memory {memory.id} already lives in {found[1]}; promote it instead"
                )
            if encoded.dim is not None:
                self.own.check_dimension(conn, encoded.dim)
            self.own.upsert(conn, encoded)
        return encoded.memory

    def _oversized(self, content: str) -> InvalidInputError | None:
        """The error for content over ``max_content_bytes`` (``None`` if it fits)."""
        try:
            require_content_size(content, "memory.content", self.config.max_content_bytes)
        except InvalidInputError as exc:
            return exc
        return None

    def get(self, tier: Tier, memory_id: str) -> Memory | None:
        """The memory of ``tier`` with that id, or ``None``."""
        tier = parse_tier(tier, "tier")
        require_str(memory_id, "memory_id")
        with self.engine.reading() as conn:
            return self._read(conn, self.sql.fetch(tier, memory_id, self.config.scope))

    def _read(self, conn: Connection, statement: Statement) -> Memory | None:
        """The memory of a one-memory read's row, or ``None``."""
        found = row(conn, statement)
        return None if found is None else self.sql.to_memory(found)

    def delete(self, tier: Tier, memory_id: str) -> bool:
        """Delete a memory of ``tier`` with its tags and schedule; True if it existed.

        Like :meth:`forget_memory` (reason ``"deleted"``): the forgetting log records it
        and its promotion-log rows stay.
        """
        tier = parse_tier(tier, "tier")
        require_str(memory_id, "memory_id")
        with self.engine.transaction() as conn:
            gone = self.own.forget(conn, memory_id, tier, None, "deleted", self.config.clock())
            return gone is not None


def _normal(memory: Memory) -> Memory:
    """``memory`` with its tags de-duplicated (in order), as every engine stores them."""
    tags = memory.tags
    if type(tags) is tuple and (len(tags) < 2 or len(set(tags)) == len(tags)):
        return memory
    return replace(memory, tags=tuple(dict.fromkeys(tags)))

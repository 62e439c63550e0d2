"""Records stored by tiered-memory, shared by the store and the domain layer.

Timestamps are integers: milliseconds since the Unix epoch, UTC. Records are frozen;
use :func:`dataclasses.replace` to derive a changed copy.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from persistence.graph_records import GraphStatistics

Embedding = npt.NDArray[np.float32]


def now_ms() -> int:
    """The current time in epoch milliseconds (the default clock)."""
    return time.time_ns() // 1_000_000


def new_id() -> str:
    """A fresh memory id: 32 hex characters, the first 12 the time in milliseconds and
    the other 20 random (80 bits, as unguessable per millisecond as a UUID4 is overall).

    Time first, as in UUIDv7: ids written together sit together in every index keyed
    by id (the tier tables, the keyword and vector maps, schedules, dedup keys), so a
    write touches the last pages of those indexes instead of a random page of each;
    batches into a 100k file ran 25% faster than with random UUID4 ids.
    """
    return f"{time.time_ns() // 1_000_000:012x}{secrets.token_hex(10)}"


class Tier(StrEnum):
    """The three memory tiers, in promotion order."""

    SCRATCHPAD = "scratchpad"
    EPISODIC = "episodic"
    SEMANTIC = "semantic"

    @property
    def rank(self) -> int:
        """Position along scratchpad (0) -> episodic (1) -> semantic (2)."""
        return _TIER_ORDER.index(self)


_TIER_ORDER = (Tier.SCRATCHPAD, Tier.EPISODIC, Tier.SEMANTIC)


@dataclass(frozen=True, slots=True)
class Memory:
    """One memory in one tier.

    ``key`` is set only while the memory is in the scratchpad. ``retention`` is the
    forgetting curve's last computed retention strength (1.0 = fresh). ``embedding``
    is a read-only float32 vector or ``None``; it is left out of ``==`` and ``repr``.
    ``speaker`` names who said it in a conversation (``None``: unknown); recall boosts a
    speaker's memories when the query names them.
    """

    id: str
    content: str
    tier: Tier
    key: str | None = None
    session_id: str | None = None
    agent_id: str | None = None
    category: str | None = None
    tags: tuple[str, ...] = ()
    importance: float = 0.5
    retention: float = 1.0
    token_count: int = 0
    source: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    linked_memories: tuple[str, ...] = ()
    embedding: Embedding | None = field(default=None, compare=False, repr=False)
    access_count: int = 0
    last_accessed_at: int | None = None
    created_at: int = 0
    updated_at: int = 0
    speaker: str | None = None
    superseded_by: str | None = None
    valid_to: int | None = None
    superseded_reason: str | None = None

    @property
    def valid_from(self) -> int:
        """When the memory became true: its own time (``created_at``)."""
        return self.created_at

    @property
    def current(self) -> bool:
        """True unless a newer memory superseded this one."""
        return self.superseded_by is None

    @classmethod
    def create(
        cls,
        content: str,
        tier: Tier = Tier.EPISODIC,
        *,
        id: str | None = None,
        now: int | None = None,
        **fields: Any,
    ) -> Memory:
        """A new memory with a fresh id and ``created_at == updated_at == now``."""
        stamp = now_ms() if now is None else now
        if cls is Memory and _CHOSEN_FIELDS.issuperset(fields):
            # The dataclass's __init__ sets each field with object.__setattr__: filling
            # the slots costs 40% less (every remember() makes one). Any other field (or
            # a subclass) goes through __init__, with its errors.
            kind = tier if type(tier) is Tier else Tier(tier)
            return _new_memory(id or new_id(), content, kind, stamp, fields)
        return cls(
            id=id or new_id(),
            content=content,
            tier=Tier(tier),
            created_at=stamp,
            updated_at=stamp,
            **fields,
        )


MEMORY_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Memory))
"""Every field of :class:`Memory`, in declaration order: the one list of them (the
export format lists them in this order, the tier aside)."""

_MEMORY_SLOTS = tuple(getattr(Memory, name).__set__ for name in MEMORY_FIELDS)
SLOT_SETTERS = dict(zip(MEMORY_FIELDS, _MEMORY_SLOTS, strict=True))
"""Field name -> the setter of its slot (``setter(memory, value)``), for code that builds
memories field by field without the frozen dataclass's ``__init__`` (memory_sql's row
decoding): the values must be valid, and every field must be set."""
(_set_id, _set_content, _set_tier, _set_key, _set_session_id, _set_agent_id, _set_category,
 _set_tags, _set_importance, _set_retention, _set_token_count, _set_source, _set_metadata,
 _set_linked, _set_embedding, _set_access_count, _set_last_accessed_at, _set_created_at,
 _set_updated_at, _set_speaker, _set_superseded_by, _set_valid_to,
 _set_superseded_reason) = map(SLOT_SETTERS.__getitem__, (
    "id", "content", "tier", "key", "session_id", "agent_id", "category", "tags",
    "importance", "retention", "token_count", "source", "metadata", "linked_memories",
    "embedding", "access_count", "last_accessed_at", "created_at", "updated_at", "speaker",
    "superseded_by", "valid_to", "superseded_reason",
))  # fmt: skip
_CHOSEN_FIELDS = frozenset(MEMORY_FIELDS) - {"id", "content", "tier", "created_at", "updated_at"}
SUPERSESSION_FIELDS = ("superseded_by", "valid_to", "superseded_reason")
"""The fields a supersession sets on the older memory (all ``None`` while it is current)."""
"""What :meth:`Memory.create` takes in ``**fields`` (the rest it sets itself)."""


def _new_memory(id_: str, content: str, tier: Tier, stamp: int, chosen: dict[str, Any]) -> Memory:
    """:meth:`Memory.create`'s memory, its slots filled in straight-line code; a field
    not in ``chosen`` gets its default (the tests compare with the dataclass's own)."""
    get = chosen.get
    memory: Memory = object.__new__(Memory)
    _set_id(memory, id_)
    _set_content(memory, content)
    _set_tier(memory, tier)
    _set_key(memory, get("key"))
    _set_session_id(memory, get("session_id"))
    _set_agent_id(memory, get("agent_id"))
    _set_category(memory, get("category"))
    _set_tags(memory, get("tags", ()))
    _set_importance(memory, get("importance", 0.5))
    _set_retention(memory, get("retention", 1.0))
    _set_token_count(memory, get("token_count", 0))
    _set_source(memory, get("source"))
    _set_metadata(memory, get("metadata", {}))  # a dict of its own by default
    _set_linked(memory, get("linked_memories", ()))
    _set_embedding(memory, get("embedding"))
    _set_access_count(memory, get("access_count", 0))
    _set_last_accessed_at(memory, get("last_accessed_at"))
    _set_created_at(memory, stamp)
    _set_updated_at(memory, stamp)
    _set_speaker(memory, get("speaker"))
    _set_superseded_by(memory, get("superseded_by"))
    _set_valid_to(memory, get("valid_to"))
    _set_superseded_reason(memory, get("superseded_reason"))
    return memory


def memory_from_values(values: Iterable[Any]) -> Memory:
    """A :class:`Memory` from every field's value in :data:`MEMORY_FIELDS` order, for rows
    read back from the file (written after validation). Fills the slots directly: the
    frozen dataclass's ``__init__`` costs twice as much (one ``object.__setattr__`` per
    field). ``values`` must hold every field: the callers build them from
    :data:`MEMORY_FIELDS` (``zip(strict=True)`` cost a fifth of the copy; a field left
    unfilled raises ``AttributeError`` when read, and the tests read them all)."""
    memory: Memory = object.__new__(Memory)
    for fill, value in zip(_MEMORY_SLOTS, values):  # noqa: B905 (see above)
        fill(memory, value)
    return memory


NEW_MEMORY_FIELDS: tuple[str, ...] = (
    "session_id", "agent_id", "importance", "tags", "metadata", "source", "category",
    "embedding", "speaker",
)  # fmt: skip
"""The fields a caller chooses for a new memory (``remember()``'s keyword arguments, with
``tier`` and a scratchpad ``key``); the rest the library sets."""
assert set(NEW_MEMORY_FIELDS) <= set(MEMORY_FIELDS)


@dataclass(frozen=True, slots=True)
class SessionState:
    """A conversation session: its lifecycle, turn counter and working-set snapshot."""

    session_id: str
    started_at: int
    last_active_at: int
    turn_number: int = 0
    active_agents: tuple[str, ...] = ()
    scratchpad_state: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    is_active: bool = True
    pending_compaction: bool = False
    ended_at: int | None = None


@dataclass(frozen=True, slots=True)
class TranscriptEntry:
    """One line of a session transcript."""

    id: str
    session_id: str
    turn_number: int
    role: str
    content: str
    timestamp: int
    speaker: str | None = None


@dataclass(frozen=True, slots=True)
class RepetitionSchedule:
    """Spaced-repetition state of one memory (SM-2 plus the forgetting curve's stability)."""

    memory_id: str
    next_review_at: int
    interval_ms: int
    review_count: int = 0
    ease_factor: float = 2.5
    stability_days: float = 1.0
    last_reviewed_at: int | None = None


@dataclass(frozen=True, slots=True)
class PromotionRecord:
    """One row of the promotion audit log."""

    id: int
    memory_id: str
    from_tier: Tier
    to_tier: Tier
    promoted_at: int
    reason: str | None = None


OrderBy = Literal["created_at", "updated_at", "importance", "retention", "last_accessed_at"]


@dataclass(frozen=True, slots=True)
class QueryOptions:
    """Filters and paging for tier queries; every field that is set is applied.

    ``tags`` matches memories carrying *all* the given tags. The time range is
    ``created_after <= created_at < created_before``. ``limit=None`` returns every match.
    ``current`` and ``as_of`` are :class:`MemoryFilter`'s (superseded memories).
    """

    session_id: str | None = None
    agent_id: str | None = None
    tags: tuple[str, ...] = ()
    category: str | None = None
    created_after: int | None = None
    created_before: int | None = None
    limit: int | None = 100
    offset: int = 0
    order_by: OrderBy = "created_at"
    descending: bool = True
    current: bool = False
    as_of: int | None = None


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """Which memories a search may return; every field that is set must hold.

    ``tags`` matches memories carrying *all* of them; the time range is
    ``created_after <= created_at < created_before``. ``current`` keeps only memories
    no newer one superseded; ``as_of`` only those that existed and were not yet
    superseded at that time (``created_at <= as_of < valid_to``). Searches apply the
    filter inside the candidate search itself, so a selective filter never hides a match.
    """

    tier: Tier | None = None
    session_id: str | None = None
    agent_id: str | None = None
    tags: tuple[str, ...] = ()
    created_after: int | None = None
    created_before: int | None = None
    min_retention: float | None = None
    current: bool = False
    as_of: int | None = None

    @property
    def narrows(self) -> bool:
        """True when a field other than ``tier`` is set (the tier alone is cheap)."""
        return replace(self, tier=None) != MemoryFilter()

    def accepts(self, memory: Memory) -> bool:
        """True if ``memory`` passes every filter that is set."""
        return (
            (self.tier is None or memory.tier is self.tier)
            and (self.session_id is None or memory.session_id == self.session_id)
            and (self.agent_id is None or memory.agent_id == self.agent_id)
            and set(self.tags) <= set(memory.tags)
            and (self.created_after is None or memory.created_at >= self.created_after)
            and (self.created_before is None or memory.created_at < self.created_before)
            and (self.min_retention is None or memory.retention >= self.min_retention)
            and (not self.current or memory.superseded_by is None)
            and (
                self.as_of is None
                or (
                    memory.created_at <= self.as_of
                    and (memory.valid_to is None or memory.valid_to > self.as_of)
                )
            )
        )

    def describe(self) -> tuple[str, ...]:
        """The filters that are set, as ``name=value`` strings."""
        named = (
            ("tier", None if self.tier is None else self.tier.value),
            ("session_id", self.session_id),
            ("agent_id", self.agent_id),
            ("tags", ",".join(self.tags) or None),
            ("created_after", self.created_after),
            ("created_before", self.created_before),
            ("min_retention", self.min_retention),
            ("current", True if self.current else None),
            ("as_of", self.as_of),
        )
        return tuple(f"{name}={value}" for name, value in named if value is not None)


@dataclass(frozen=True, slots=True)
class KeywordParts:
    """Where one memory's keyword match lies in its keyword window: in its own words,
    in the (two) memories before it in its session, in the (two) after it. Recall's
    explanation says when a match came only from a neighbouring turn."""

    own: bool
    before: bool
    after: bool

    @property
    def neighbours_only(self) -> bool:
        """True when no query word is in the memory's own words."""
        return not self.own and (self.before or self.after)


class KeywordHits(list[tuple[str, float]]):
    """A keyword search's ``(memory_id, score)`` list, best first, and what the search
    left out to stay fast (``skipped``: a sentence for recall's explanation, ``None``
    when every memory holding a query word was ranked). A backend that never leaves
    anything out may return a plain list."""

    __slots__ = ("skipped",)

    def __init__(self, hits: Iterable[tuple[str, float]] = (), skipped: str | None = None) -> None:
        super().__init__(hits)
        self.skipped = skipped


class FrozenDict(dict[str, int]):
    """A dict that cannot be changed after it is made, and hashes by its items: a
    record's mapping field (:attr:`PersistenceStatistics.backend_details`). Equal to a
    plain dict with the same items; JSON encoders (orjson) write it as an object."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> Any:
        raise TypeError(f"{type(self).__name__} cannot be changed")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[str, int]]]:
        return type(self), (dict(self),)

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: object) -> FrozenDict:
        return self


@dataclass(frozen=True, slots=True)
class PersistenceStatistics:
    """Row counts and sizes of a store.

    ``size_bytes`` is everything the store occupies (SQLite: the file plus its WAL);
    ``backend`` names the engine (``"sqlite"``) and ``backend_details`` holds its own
    figures (SQLite: ``file_size_bytes``, ``wal_size_bytes``, ``page_size``,
    ``page_count``), read-only. ``path`` is where the data lives (as
    ``StoreControl.location``)."""

    scratchpad_count: int
    episodic_count: int
    semantic_count: int
    session_count: int
    active_session_count: int
    transcript_count: int
    schedule_count: int
    promotion_count: int
    forgotten_count: int
    unembedded_count: int
    embedding_cache_count: int
    schema_version: int
    size_bytes: int
    backend: str
    backend_details: Mapping[str, int]
    path: str
    embedding_errors: int = 0
    last_embedding_error: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.backend_details, FrozenDict):
            object.__setattr__(self, "backend_details", FrozenDict(self.backend_details))


@dataclass(frozen=True, slots=True)
class RetentionInput:
    """What the forgetting curve needs to know about one memory."""

    memory_id: str
    importance: float
    retention: float
    created_at: int
    stability_days: float | None
    last_reviewed_at: int | None
    review_count: int


@dataclass(frozen=True, slots=True)
class ForgettingRecord:
    """One row of the forgetting audit log."""

    memory_id: str
    tier: Tier
    forgotten_at: int
    retention: float | None
    reason: str


@dataclass(frozen=True, slots=True)
class CacheStatistics:
    """Counters of a :class:`~persistence.cache_layer.CacheLayer`."""

    hits: int
    misses: int
    evictions: int
    size: int
    maxsize: int

    @property
    def hit_rate(self) -> float:
        """Hits over lookups (0.0 before the first lookup)."""
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else 0.0


@dataclass(frozen=True, slots=True)
class DecayReport:
    """What one forgetting pass did."""

    checked: int
    weakened: int
    forgotten: int
    forgotten_ids: tuple[str, ...]
    tiers: tuple[Tier, ...]
    threshold: float


@dataclass(frozen=True, slots=True)
class ConsolidationReport:
    """What one consolidation pass promoted from episodic to semantic, and which
    near-duplicates it merged (``(merged id, kept id)``)."""

    checked: int
    promoted_ids: tuple[str, ...]
    merged: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class MemoryStatistics:
    """Everything ``AgentMemoryManager.statistics()`` reports."""

    storage: PersistenceStatistics
    cache: CacheStatistics
    scratchpad_tokens: int
    scratchpad_token_budget: int
    redactions: int = 0
    """Secrets replaced by ``[REDACTED:kind]`` on the way into the file, ever."""
    graph: GraphStatistics = field(default_factory=GraphStatistics)
    """Entities, relations, provenance and extraction progress of the knowledge graph."""
    recall_writes_deferred: int = 0
    """This handle's recalls that put off their writes (reviews, embedding pending
    memories) because other writers kept the file busy: they are tried again later."""
    recall_reviews_dropped: int = 0
    """Recall reviews this handle gave up (too many waiting, or still busy at close)."""

    @property
    def size_bytes(self) -> int:
        """Bytes the store occupies (SQLite: the database file plus its WAL)."""
        return self.storage.size_bytes

    @property
    def file_size_bytes(self) -> int:
        """SQLite: bytes of the database file itself (recent commits may still be in the
        WAL); 0 on a backend without one."""
        return self.storage.backend_details.get("file_size_bytes", 0)

    @property
    def wal_size_bytes(self) -> int:
        """SQLite: bytes of the write-ahead log beside it (``maintain()`` checkpoints it);
        0 on a backend without one."""
        return self.storage.backend_details.get("wal_size_bytes", 0)

    @property
    def embedding_errors(self) -> int:
        """How many times background embedding failed (recorded in the file)."""
        return self.storage.embedding_errors

    @property
    def vector_pending(self) -> int:
        """Memories waiting for an embedding: vector search cannot see them yet
        (keywords can); ``flush()`` or ``tiered-memory embed`` embeds them."""
        return self.storage.unembedded_count

    @property
    def last_embedding_error(self) -> str | None:
        """When and why background embedding last failed, or ``None``."""
        return self.storage.last_embedding_error

    @property
    def tier_counts(self) -> dict[Tier, int]:
        """Memories per tier."""
        s = self.storage
        return {
            Tier.SCRATCHPAD: s.scratchpad_count,
            Tier.EPISODIC: s.episodic_count,
            Tier.SEMANTIC: s.semantic_count,
        }


@dataclass(frozen=True, slots=True)
class RestoreResult:
    """What ``restore_backup`` put in place."""

    source: str
    source_schema_version: int
    schema_version: int
    memories: int


@dataclass(frozen=True, slots=True)
class IntegrityProblem:
    """One problem ``check_integrity`` found: which check, and what it saw."""

    check: str
    detail: str


@dataclass(frozen=True, slots=True)
class IntegrityResult:
    """Every check ``check_integrity`` ran, and the problems found (none when ``ok``)."""

    ok: bool
    checks: tuple[str, ...]
    problems: tuple[IntegrityProblem, ...]


@dataclass(frozen=True, slots=True)
class TableSalvage:
    """One table of a damaged file: the rows read and kept, and what was lost."""

    table: str
    copied: int
    """Rows read and kept (in a salvage: written to the new file)."""
    rejected: int = 0
    """Rows read but holding values damage left impossible (a NULL where one cannot be)."""
    dropped: int = 0
    """Rows kept out because what they point at was lost (the tags of a lost memory)."""
    unreadable: tuple[str, ...] = ()
    """What could not be read: rowid ranges, or the rest of a table after a damaged page."""

    @property
    def complete(self) -> bool:
        """True when every row of the table was read and kept."""
        return not (self.rejected or self.dropped or self.unreadable)


@dataclass(frozen=True, slots=True)
class SalvageResult:
    """What ``salvage`` read from a damaged file and, unless a dry run, wrote to a new one."""

    source: str
    target: str | None
    memories: int
    """Memories (all tiers) saved."""
    tables: tuple[TableSalvage, ...]
    damage: tuple[str, ...]
    """What SQLite's ``integrity_check`` reports about the source."""
    lost_memories: tuple[str, ...] = ()
    """Ids of memories the file's keyword index lists but that could not be saved (when
    that index is still readable)."""

    @property
    def complete(self) -> bool:
        """True when nothing was lost: every row of every table was kept."""
        return all(t.complete for t in self.tables)

    @property
    def lost(self) -> tuple[TableSalvage, ...]:
        """The tables that lost something."""
        return tuple(t for t in self.tables if not t.complete)


@dataclass(frozen=True, slots=True)
class MaintenanceResult:
    """What ``run_maintenance`` did, with the file and WAL sizes before and after."""

    bytes_before: int
    bytes_after: int
    wal_bytes_before: int
    wal_bytes_after: int
    checkpointed_frames: int
    vacuumed: bool
    optimized: bool


@dataclass(frozen=True, slots=True)
class TableCounts:
    """Rows inserted, updated and skipped in one table by an import."""

    inserted: int = 0
    updated: int = 0
    skipped: int = 0


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What ``import_json`` wrote, per table, in one transaction."""

    mode: Literal["replace", "merge"]
    source: str
    tables: Mapping[str, TableCounts]

    @property
    def inserted(self) -> int:
        """Rows inserted in all tables."""
        return sum(c.inserted for c in self.tables.values())

    @property
    def updated(self) -> int:
        """Rows updated in all tables."""
        return sum(c.updated for c in self.tables.values())

    @property
    def skipped(self) -> int:
        """Rows left as they were in all tables."""
        return sum(c.skipped for c in self.tables.values())


def content_hash(text: str) -> bytes:
    """The cache key of a text: its SHA-256 (32 bytes)."""
    return hashlib.sha256(text.encode("utf-8")).digest()


Progress = Callable[[int, int], None]
"""A progress callback: ``(done, total)``, called as long work (backup, export, import)
advances."""


Key = str | bytes
"""An encryption key as given by the caller: text (UTF-8 encoded) or raw bytes."""

Synchronous = Literal["NORMAL", "FULL"]
"""Durability of a commit: ``"NORMAL"`` survives a crash of the process, ``"FULL"`` also a
power cut."""


@dataclass(frozen=True, slots=True)
class TracedStatement:
    """One statement a store ran, as a SQL tracer reports it (``trace=`` of
    ``AgentMemoryManager.open``): its text, how many parameters it was given, and how
    long it took (statements SQLite ran inside it included)."""

    sql: str
    parameters: int
    nanoseconds: int

    @property
    def milliseconds(self) -> float:
        """The time it took, in milliseconds."""
        return self.nanoseconds / 1e6


@dataclass(frozen=True, slots=True)
class PoolSettings:
    """How many connections a server store keeps and how long it waits (PostgreSQL;
    a file store has no pool).

    ``min_size``/``max_size``: the pool's bounds. ``connect_timeout_s``: how long one
    connection attempt may take. ``wait_timeout_s``: how long a call waits for a free
    connection (then :class:`~persistence.errors.DatabaseBusyError`). ``lock_timeout_s``:
    how long a write waits for another writer of the same agent. ``ping_after_s``: a
    connection idle longer than this is checked before use (a restarted server).
    ``pooler``: a transaction-mode pooler (PgBouncer, Supavisor, pgcat) sits between the
    store and the server, which may give each transaction another server session: no
    statement is prepared server-side, every setting is made inside each transaction
    (``set_config(..., true)``), reads run in transactions of their own, and other
    processes' changes are found by polling the version row instead of ``LISTEN`` (the
    URL's ``tm_pooler=transaction`` says the same; see the PostgreSQL guide).
    """

    min_size: int = 1
    max_size: int = 8
    connect_timeout_s: float = 5.0
    wait_timeout_s: float = 30.0
    lock_timeout_s: float = 30.0
    ping_after_s: float = 2.0
    pooler: bool = False


Turn = tuple[str | None, bool, str | None, str | None]
"""A memory's conversation turn: (speaker, holds a question mark, id before it in its
session, id after it), as both engines' conversation SQL returns it."""

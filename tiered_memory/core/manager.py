"""AgentMemoryManager: the facade every user starts from.

It ties the three tiers, sessions, promotion and the forgetting curve to one store
(:func:`persistence.build_backend`: a :class:`~persistence.SQLiteStore` and its parts).
The scratchpad is held whole in RAM; episodic and semantic memories are read lazily
through an LRU :class:`~persistence.CacheLayer`, so memory use stays flat however large
the file grows. Every mutating call is one
transaction and is durable when it returns; ``with manager.transaction():`` groups calls.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Self

from persistence import (
    MAX_COUNT,
    NEW_MEMORY_FIELDS,
    CacheLayer,
    ConsolidationReport,
    DecayReport,
    ForgettingRecord,
    ImportResult,
    IntegrityResult,
    InvalidInputError,
    InvalidTypeError,
    MaintenanceResult,
    Memory,
    MemoryFilter,
    MemoryNotFoundError,
    MemoryStatistics,
    MemoryStorage,
    Progress,
    PromotionRecord,
    QueryOptions,
    RepetitionSchedule,
    RestoreResult,
    SessionState,
    StoreClosedError,
    Tier,
    TieredMemoryError,
    TranscriptEntry,
    build_backend,
    graph_records,
    new_id,
    now_ms,
    parse_tier,
    require_bool,
    require_int,
    require_mapping,
    require_number,
    require_str,
)
from tiered_memory.core import dedup as duplicates
from tiered_memory.core.config import MemoryConfig
from tiered_memory.core.forgetting import ForgettingCurve
from tiered_memory.core.redaction import (
    DEFAULT_REDACTOR,
    count_in_file,
    document_scrubber,
    redact_fields,
    total_in_file,
    with_count,
)
from tiered_memory.core.scratchpad import Scratchpad
from tiered_memory.core.sessions import SessionManager
from tiered_memory.core.tiers import TierView
from tiered_memory.embedding.embedders import Embedder
from tiered_memory.embedding.queue import EmbeddingQueue
from tiered_memory.graph.extraction import DefaultExtractor, ExtractionQueue
from tiered_memory.graph.facade import KnowledgeGraph, entity_facts, relation_facts
from tiered_memory.recall.graph_signal import graph_candidates
from tiered_memory.recall.recaller import Recaller
from tiered_memory.recall.types import RecallHit

_QUERY_FILTERS = frozenset(f.name for f in fields(QueryOptions))


class AgentMemoryManager:
    """Three-tier agent memory in one SQLite file (or in memory).

    Build one with :meth:`open` (a durable file, created or migrated) or
    :meth:`in_memory` (nothing on disk); both take a :class:`MemoryConfig` and/or its
    fields as keyword arguments. Use it as a context manager, or call
    :meth:`initialize` and :meth:`shutdown` yourself.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        config: MemoryConfig | None = None,
        *,
        read_only: bool = False,
        key: str | bytes | None = None,
        **overrides: Any,
    ) -> None:
        if not isinstance(path, str | os.PathLike):
            raise InvalidTypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        base = config if config is not None else MemoryConfig()
        if not isinstance(base, MemoryConfig):
            raise InvalidInputError(f"config must be a MemoryConfig, got {type(base).__name__}")
        unknown = set(overrides) - {f.name for f in fields(MemoryConfig)}
        if unknown:
            raise InvalidInputError(f"unknown config option(s): {', '.join(sorted(unknown))}")
        self.config = replace(base, **overrides) if overrides else base
        self.clock = self.config.clock or now_ms
        backend = build_backend(
            path,
            synchronous=self.config.synchronous,
            clock=self.clock,
            change_check_interval_ms=self.config.external_change_check_ms,
            max_content_bytes=self.config.max_content_bytes,
            read_only=read_only,
            key=key,
            backup_dir=self.config.backup_dir,
        )
        self.store: MemoryStorage = backend.store  # used only through the Protocol
        self.store.on_external_change(self._reload)
        self.curve = ForgettingCurve(
            self.config.initial_stability_days,
            self.config.importance_stability_boost,
            self.config.target_retention,
        )
        self._cache: CacheLayer[str, Memory] = CacheLayer(
            self.config.cache_size,
            transactions=backend.hooks,
        )
        self._redactor = self.config.active_redactor
        self.scratchpad = Scratchpad(
            self.store, self.config.scratchpad_token_budget, self.config.token_counter, self.clock,
            redactor=self._redactor,
        )  # fmt: skip
        self.sessions = SessionManager(self.store, self.clock, redactor=self._redactor)
        self.embeddings = EmbeddingQueue(
            self.store,
            self.config.embedder,
            cache_size=self.config.embedding_cache_size,
            reembed=self.config.reembed,
            on_embedded=self._embedded,
            on_replaced=self._replaced,
        )
        self._recall = Recaller(
            self.store,
            self.embeddings,
            self.config.recall,
            self.clock,
            get_many=self._get_many,
            get=self.get,
            review=self.review,
            review_quality=self.config.recall_review_quality,
            review_batch=self.config.recall_review_batch,
        )
        self.backups = backend.backups
        self.episodic = TierView(self, Tier.EPISODIC)
        self.semantic = TierView(self, Tier.SEMANTIC)
        self.graph = KnowledgeGraph(backend.graph, self.clock, self._get_many, self._require_open)
        self._recall.graph_search = self._graph_search
        chosen = self.config.extractor
        extractor = DefaultExtractor() if isinstance(chosen, str) else chosen  # "default"
        self.extraction = ExtractionQueue(self.store, self.graph.records, extractor, self.clock)

    # --- lifecycle ----------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        config: MemoryConfig | None = None,
        *,
        read_only: bool = False,
        key: str | bytes | None = None,
        **overrides: Any,
    ) -> AgentMemoryManager:
        """A manager on a durable file (created, or migrated to the current schema).

        ``read_only=True`` opens an existing file with SQLite's read-only flag, also on
        read-only storage, and changes none of its bytes: nothing is created, migrated,
        embedded or reviewed; recall embeds only the query (memories still without a
        vector are ranked by keywords, and their explanation says so); every mutating
        call raises :class:`~persistence.ReadOnlyError`.

        ``key`` (str or bytes) opens an encrypted file, or creates a new file encrypted
        (SQLite3 Multiple Ciphers): the file, its WAL and its backups hold no plaintext.
        A wrong or missing key raises :class:`~persistence.EncryptionKeyError`.
        """
        if isinstance(path, str | os.PathLike) and os.fspath(path) == ":memory:":
            raise InvalidInputError("use AgentMemoryManager.in_memory() for a store in memory")
        return cls(path, config, read_only=read_only, key=key, **overrides).initialize()

    @classmethod
    def in_memory(cls, config: MemoryConfig | None = None, **overrides: Any) -> AgentMemoryManager:
        """A manager with the same API and nothing on disk."""
        return cls(":memory:", config, **overrides).initialize()

    def initialize(self) -> Self:
        """Open the store and load the scratchpad; a second call does nothing.

        Also deletes files that interrupted backups and restores left behind (never one
        that a backup or restore under way in another process holds).
        """
        if not self.store.is_open:
            self.store.open()
            self.backups.remove_leftovers()
            self.scratchpad.load()
            if self.config.embed_in_background and not self.read_only:
                self.embeddings.start()
                self.embeddings.notify()  # work left over from an earlier run
            if self._extract_in_background and not self.read_only:
                self.extraction.start()
                self.extraction.notify()  # an old file's memories, or an earlier run's
        return self

    @property
    def _extract_in_background(self) -> bool:
        chosen = self.config.extract_in_background
        if chosen is None:  # where a background thread embeds, one extracts too
            return self.config.embed_in_background and self.config.embedder is not None
        return chosen

    def shutdown(self) -> None:
        """Stop background embedding, write pending recall reviews, then close the store;
        closing twice is harmless. Memories not yet embedded stay queued in the file."""
        if self.store.in_transaction:
            raise InvalidInputError("shutdown() inside a transaction: finish the transaction first")
        self.embeddings.stop()
        self._recall.stop()
        self.extraction.stop()
        try:
            if self.store.is_open:
                self._recall.apply_reviews()
        finally:  # a full disk, say, must not leave the file open
            self.store.close()
            self._cache.clear()

    close = shutdown

    def __enter__(self) -> Self:
        return self.initialize()

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    @property
    def read_only(self) -> bool:
        """True when opened with ``read_only=True``: nothing this manager does writes."""
        return self.store.read_only

    @property
    def path(self) -> Path | None:
        """The database file, or ``None`` in memory."""
        return None if self.store.is_memory else Path(self.store.path)

    def _require_open(self) -> None:
        if not self.store.is_open:
            raise StoreClosedError("memory manager is closed (or was never initialized)")

    @contextmanager
    def transaction(self) -> Iterator[Self]:
        """Group calls into one transaction: all of them land, or none (and RAM agrees)."""
        self._require_open()
        with self.store.transaction():
            yield self

    # --- memories -------------------------------------------------------------------------

    def remember(
        self,
        content: str,
        tier: Tier | str = Tier.EPISODIC,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        importance: float = 0.5,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        source: str | None = None,
        category: str | None = None,
        key: str | None = None,
        embedding: Sequence[float] | None = None,
        speaker: str | None = None,
        entities: Sequence[Any] | None = None,
        relations: Sequence[Any] | None = None,
        dedup: bool | None = None,
    ) -> Memory:
        """Store a new memory and its review schedule; return it as stored.

        ``tier=Tier.SCRATCHPAD`` files it in the scratchpad under ``key`` (default: its id).
        A ``session_id`` must name a started session, whose activity time is refreshed.
        ``speaker`` names who said it (recall boosts it when the query names them).
        ``entities`` and ``relations`` are facts the caller already extracted (see
        :func:`tiered_memory.graph.entity_facts`); they join the knowledge graph in the
        same transaction, supported by this memory. ``dedup`` overrides
        ``MemoryConfig.dedup`` for this call (``False``: always a new memory, for callers
        whose records differ by more than their text, like the LangGraph store's items).
        """
        self._require_open()
        if type(tier) is not Tier:
            tier = parse_tier(tier)
        if dedup is not None:
            require_bool(dedup, "dedup")
        require_str(content, "content")
        content, tags, metadata, redacted = redact_fields(self._redactor, content, tags, metadata)
        self.store.check_content_size(content)
        require_str(session_id, "session_id", allow_none=True, allow_empty=False)
        require_mapping(metadata, "metadata", allow_none=True)
        if key is not None and tier is not Tier.SCRATCHPAD:
            raise InvalidInputError("key= names a scratchpad entry: pass tier=Tier.SCRATCHPAD")
        no_facts = entities is None and relations is None
        facts = ([], []) if no_facts else (entity_facts(entities), relation_facts(relations))
        now = self.clock()
        chosen: dict[str, Any] = {  # NEW_MEMORY_FIELDS (tests/test_memory_fields.py)
            "session_id": session_id, "agent_id": agent_id, "importance": importance,
            "tags": tags, "metadata": metadata, "source": source, "category": category,
            "embedding": embedding, "speaker": speaker,
        }  # fmt: skip
        # Joined: no savepoints (see SQLiteStore.transaction); checks before writes.
        with self.store.transaction(join=True):
            if session_id is not None:
                self.sessions.check_active(session_id)
            count_in_file(self.store, redacted)
            deduplicate = self.config.dedup if dedup is None else dedup
            if deduplicate and tier is not Tier.SCRATCHPAD:
                twin = duplicates.find_twin(
                    self.store, content, tier, agent_id, session_id, self._get_many
                )
                if twin is not None:  # the same fact again: reinforce it instead
                    return self._reinforce(twin, importance, facts, now)
            if tier is Tier.SCRATCHPAD:
                stored = self.scratchpad.put(key or new_id(), content, **chosen)
            else:
                chosen["metadata"] = dict(metadata) if metadata is not None else {}
                memory = Memory.create(
                    content,
                    tier,
                    now=now,
                    token_count=self.config.token_counter.count(content),
                    **chosen,
                )
                schedule = self.curve.schedule_for(memory.id, memory.importance, now)
                (stored,) = self.store.insert_memories([memory], [schedule])
                self._cache.set(stored.id, stored)
            if (
                stored.tier is Tier.SCRATCHPAD
                and self.store.get_repetition_schedule(stored.id) is None
            ):
                self.store.put_repetition_schedule(
                    self.curve.schedule_for(stored.id, stored.importance, now)
                )
            if session_id is not None:
                self.store.touch_session(session_id, self.clock())
            if facts[0] or facts[1]:
                self.graph.records.assert_facts(stored.id, *facts, graph_records.CALLER, now)
            self.store.after_commit(self.extraction.notify)
            if stored.embedding is None:
                self.store.after_commit(self.embeddings.notify)
        return stored

    def _reinforce(
        self,
        memory: Memory,
        importance: float,
        facts: tuple[list[Any], list[Any]],
        now: int,
    ) -> Memory:
        """``remember()`` of a memory already there: a review, importance the larger,
        the new facts added; counted in ``statistics().graph.deduplicated``."""
        require_number(importance, "importance", minimum=0, maximum=1)
        self.review(memory.id, 4)
        current = self._require(memory.id)
        if importance > current.importance:
            current = self._rewrite(replace(current, importance=importance,
                                            updated_at=_touched(current, now)))  # fmt: skip
        if facts[0] or facts[1]:
            self.graph.records.assert_facts(memory.id, *facts, graph_records.CALLER, now)
        if memory.session_id is not None:
            self.store.touch_session(memory.session_id, self.clock())
        duplicates.count_duplicate(self.store)
        return current

    def _graph_search(
        self, query: str, where: MemoryFilter
    ) -> tuple[list[tuple[str, float]], dict[str, str]]:
        """The graph signal's candidates for recall (see :mod:`tiered_memory.graph_recall`)."""
        found = graph_candidates(
            self.graph.records, query, where, self._recall.settings, self._get_many, self.clock()
        )
        return found.ranked, found.paths

    def get(self, memory_id: str) -> Memory | None:
        """The memory with that id in any tier, or ``None``."""
        if not self.store.is_open:
            self._require_open()
        if not isinstance(memory_id, str):
            require_str(memory_id, "memory_id")
        if not self.store.check_external_changes():
            return self.store.get_memory(memory_id)  # RAM may be stale: read the file
        in_scratchpad = self.scratchpad.by_id(memory_id)
        if in_scratchpad is not None:
            return in_scratchpad
        return self._cache.get_or_load(memory_id, self.store.get_memory, _not_scratchpad)

    def _get_many(self, memory_ids: list[str]) -> dict[str, Memory]:
        """Several memories: scratchpad RAM, then the cache, then one query per tier."""
        if not self.store.check_external_changes():
            return self.store.get_memories(memory_ids)  # RAM may be stale: read the file
        found = {i: m for i in memory_ids if (m := self.scratchpad.by_id(i)) is not None}
        rest = [i for i in memory_ids if i not in found]
        found.update(self._cache.get_many_or_load(rest, self.store.get_memories, _not_scratchpad))
        return found

    def _require(self, memory_id: str) -> Memory:
        memory = self.get(memory_id)
        if memory is None:
            raise MemoryNotFoundError(f"no memory {memory_id}")
        return memory

    def _rewrite(self, memory: Memory) -> Memory:
        """Store a changed memory in its tier and keep RAM and cache in step."""
        if memory.tier is Tier.SCRATCHPAD:
            return self.scratchpad.rewrite(memory)
        stored = self.store.put_memory(memory)
        self._cache.set(stored.id, stored)
        return stored

    def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        tags: Sequence[str] | None = None,
        importance: float | None = None,
    ) -> Memory:
        """Change a memory's content, metadata, tags or importance; bumps ``updated_at``."""
        self._require_open()
        content, tags, metadata, redacted = redact_fields(
            self._redactor, content, tags, metadata, record=False
        )
        changes: dict[str, Any] = {}
        if content is not None:
            require_str(content, "content")
            self.store.check_content_size(content)
            changes |= {"content": content, "token_count": self.config.token_counter.count(content)}
            changes["embedding"] = None  # queued: embedded again in the background or on flush()
        if metadata is not None:
            require_mapping(metadata, "metadata")
            changes["metadata"] = dict(metadata)
        if tags is not None:
            changes["tags"] = tags
        if importance is not None:
            changes["importance"] = importance
        with self.store.transaction():
            memory = self._require(memory_id)
            if redacted:
                changes["metadata"] = with_count(changes.get("metadata", memory.metadata), redacted)
                count_in_file(self.store, redacted)
            if content is not None:
                self.store.after_commit(self.embeddings.notify)
                if content != memory.content:  # re-extracted: the old findings go now
                    self.graph.records.drop_extracted(memory_id)
                    self.store.after_commit(self.extraction.notify)
            updated = self._rewrite(
                replace(memory, updated_at=_touched(memory, self.clock()), **changes)
            )
            if content is not None and updated.tier is not Tier.SCRATCHPAD:
                self.store.record_content_keys([updated])  # found by its new content now
            return updated

    def forget(self, memory_id: str, reason: str = "forgotten on request") -> bool:
        """Delete a memory (with its schedule and tags) and write an audit row; its
        promotion history stays (forgetting removes content, never the audit)."""
        self._require_open()
        require_str(memory_id, "memory_id")
        with self.store.transaction():
            if self.scratchpad.by_id(memory_id) is not None:
                return self.scratchpad.forget(memory_id, reason)
            self._cache.invalidate(memory_id)
            return self.store.forget_memory(memory_id, reason) is not None

    def query(self, tier: Tier | str | None = None, **filters: Any) -> list[Memory]:
        """Memories matching every filter (the fields of :class:`QueryOptions`).

        With no ``tier`` the three tiers are searched and merged in the requested order.
        """
        self._require_open()
        self.store.check_external_changes()
        unknown = set(filters) - _QUERY_FILTERS
        if unknown:
            raise InvalidInputError(
                f"unknown filter(s) {sorted(unknown)}; use {sorted(_QUERY_FILTERS)}"
            )
        if isinstance(filters.get("tags"), list):
            filters["tags"] = tuple(filters["tags"])
        options = QueryOptions(**filters)
        if tier is not None:
            return self.store.query(parse_tier(tier), options)
        window = None if options.limit is None else options.limit + options.offset
        merged = [
            memory
            for each in Tier
            for memory in self.store.query(each, replace(options, limit=window, offset=0))
        ]
        merged.sort(key=lambda m: _order_key(m, options.order_by), reverse=options.descending)
        end = None if options.limit is None else options.offset + options.limit
        return merged[options.offset : end]

    def link(self, memory_id: str, other_id: str) -> None:
        """Link two memories both ways (linking again changes nothing)."""
        self._require_open()
        if memory_id == other_id:
            raise InvalidInputError("a memory cannot be linked to itself")
        with self.store.transaction():
            for this, that in ((memory_id, other_id), (other_id, memory_id)):
                memory = self._require(this)
                if that not in memory.linked_memories:
                    linked = (*memory.linked_memories, that)
                    now = _touched(memory, self.clock())
                    self._rewrite(replace(memory, linked_memories=linked, updated_at=now))

    def unlink(self, memory_id: str, other_id: str) -> bool:
        """Remove the link between two memories; True if there was one."""
        self._require_open()
        found = False
        with self.store.transaction():
            for this, that in ((memory_id, other_id), (other_id, memory_id)):
                memory = self._require(this)
                if that in memory.linked_memories:
                    found = True
                    linked = tuple(i for i in memory.linked_memories if i != that)
                    now = _touched(memory, self.clock())
                    self._rewrite(replace(memory, linked_memories=linked, updated_at=now))
        return found

    def linked(self, memory_id: str) -> list[Memory]:
        """The memories linked to this one that still exist."""
        memory = self._require(memory_id)
        return [m for i in memory.linked_memories if (m := self.get(i)) is not None]

    # --- sessions -------------------------------------------------------------------------

    def start_session(
        self, session_id: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> SessionState:
        """Start a session; see :meth:`SessionManager.start`."""
        self._require_open()
        return self.sessions.start(session_id, metadata)

    def end_session(self, session_id: str) -> SessionState:
        """End a session."""
        self._require_open()
        return self.sessions.end(session_id)

    def get_session(self, session_id: str) -> SessionState | None:
        """The session, or ``None``."""
        self._require_open()
        return self.sessions.get(session_id)

    def active_sessions(self) -> list[SessionState]:
        """Sessions not yet ended, most recently active first."""
        self._require_open()
        return self.sessions.active()

    def append_transcript(
        self, session_id: str, role: str, content: str, *, speaker: str | None = None
    ) -> TranscriptEntry:
        """Add a line to a session's transcript as its next turn (``speaker``: who said
        it, when ``role`` alone does not tell, as in a chat of several people)."""
        self._require_open()
        return self.sessions.append(session_id, role, content, speaker=speaker)

    def get_transcript(self, session_id: str) -> list[TranscriptEntry]:
        """A session's transcript, in order."""
        self._require_open()
        return self.sessions.transcript(session_id)

    # --- promotion --------------------------------------------------------------------------

    def promote(
        self, memory_id: str, to_tier: Tier | str, reason: str | None = None
    ) -> PromotionRecord:
        """Move a memory forward (scratchpad -> episodic -> semantic), logged, one transaction."""
        self._require_open()
        target = parse_tier(to_tier)
        with self.store.transaction():
            if self.scratchpad.by_id(memory_id) is not None:
                return self.scratchpad.promote(memory_id, target, reason)
            memory = self._require(memory_id)
            self._cache.invalidate(memory_id)
            return self.store.promote_memory(memory_id, memory.tier, target, reason)

    def promotion_history(self, memory_id: str) -> list[PromotionRecord]:
        """Every logged promotion of a memory, oldest first."""
        self._require_open()
        return self.store.get_promotion_history(memory_id)

    def consolidate(self) -> ConsolidationReport:
        """Promote well-learned episodic memories to semantic.

        A memory qualifies with at least ``consolidation_min_reviews`` successful reviews
        in a row and a current retention of at least ``consolidation_min_retention``.
        First, near-duplicate episodic memories are merged (see :mod:`tiered_memory.dedup`).
        """
        self._require_open()
        cfg = self.config
        merged = []
        if cfg.near_duplicate_threshold is not None:  # the same fact twice, near enough
            merged = duplicates.merge_near_duplicates(self, cfg.near_duplicate_threshold)
        promoted: list[str] = []
        checked = 0
        after = ""
        while True:
            with self.store.transaction():
                batch = self.store.retention_batch(
                    Tier.EPISODIC,
                    after,
                    cfg.decay_batch_size,
                    min_reviews=cfg.consolidation_min_reviews,
                )
                now = self.clock()
                for row in batch:
                    strength = self.curve.retention_of(row, now)
                    if strength >= cfg.consolidation_min_retention:
                        reason = (
                            f"consolidated: {row.review_count} reviews, retention {strength:.2f}"
                        )
                        self.promote(row.memory_id, Tier.SEMANTIC, reason)
                        promoted.append(row.memory_id)
            if not batch:
                break
            checked += len(batch)
            after = batch[-1].memory_id
        return ConsolidationReport(checked, tuple(promoted), tuple(merged))

    # --- forgetting curve -------------------------------------------------------------------

    def review(self, memory_id: str, quality: int) -> RepetitionSchedule:
        """Record an SM-2 review of ``quality`` 0-5; retention is restored to 1.0."""
        self._require_open()
        with self.store.transaction():
            memory = self._require(memory_id)
            now = self.clock()
            schedule = self.store.get_repetition_schedule(memory_id) or self.curve.schedule_for(
                memory_id, memory.importance, now
            )
            reviewed = self.curve.review(schedule, quality, memory.importance, now)
            self.store.put_repetition_schedule(reviewed)
            self._rewrite(
                replace(
                    memory,
                    retention=1.0,
                    access_count=min(memory.access_count + 1, MAX_COUNT),
                    last_accessed_at=now,
                )
            )
        return reviewed

    def schedule(self, memory_id: str) -> RepetitionSchedule | None:
        """A memory's spaced-repetition schedule, or ``None``."""
        self._require_open()
        return self.store.get_repetition_schedule(memory_id)

    def due_for_review(self, before: int | None = None, limit: int | None = None) -> list[Memory]:
        """Memories whose next review is due at or before ``before`` (default: now)."""
        self._require_open()
        require_int(before, "before", allow_none=True)
        due = self.store.get_schedules_due_for_review(
            self.clock() if before is None else before, limit
        )
        return [m for s in due if (m := self.get(s.memory_id)) is not None]

    def decay(self) -> DecayReport:
        """Walk the file in batches, update retention, forget what fell under the threshold.

        The episodic tier is always walked, the semantic one only with
        ``decay_semantic=True``. Each batch is one transaction; every forgotten memory
        gets a row in the forgetting log.
        """
        self._require_open()
        cfg = self.config
        tiers = (Tier.EPISODIC, Tier.SEMANTIC) if cfg.decay_semantic else (Tier.EPISODIC,)
        checked = weakened = 0
        forgotten_ids: list[str] = []
        reason = f"decay: retention fell below {cfg.forgetting_threshold}"
        for tier in tiers:
            after = ""
            while True:
                with self.store.transaction():
                    batch = self.store.retention_batch(tier, after, cfg.decay_batch_size)
                    now = self.clock()
                    updates: list[tuple[str, float]] = []
                    forgotten: list[tuple[str, float]] = []
                    for row in batch:
                        strength = self.curve.retention_of(row, now)
                        if strength < cfg.forgetting_threshold:
                            forgotten.append((row.memory_id, strength))
                        elif abs(strength - row.retention) > 1e-9:
                            updates.append((row.memory_id, strength))
                            if strength < row.retention:
                                weakened += 1
                    self.store.apply_decay(tier, updates, forgotten, reason)
                    for memory_id, _ in (*updates, *forgotten):
                        self._cache.invalidate(memory_id)
                if not batch:
                    break
                checked += len(batch)
                forgotten_ids += [memory_id for memory_id, _ in forgotten]
                after = batch[-1].memory_id
        return DecayReport(
            checked,
            weakened,
            len(forgotten_ids),
            tuple(forgotten_ids),
            tiers,
            cfg.forgetting_threshold,
        )

    def forgetting_log(self, memory_id: str | None = None) -> list[ForgettingRecord]:
        """Audit rows of forgotten memories (for one memory, or all), oldest first."""
        self._require_open()
        return self.store.get_forgetting_log(memory_id)

    # --- statistics -------------------------------------------------------------------------

    def statistics(self) -> MemoryStatistics:
        """Counts per tier, sessions, transcripts, cache counters, file and WAL size, and
        the knowledge graph's (entities, relations, extraction progress)."""
        self._require_open()
        return MemoryStatistics(
            storage=self.store.get_statistics(),
            cache=self._cache.get_statistics(),
            scratchpad_tokens=self.scratchpad.tokens,
            scratchpad_token_budget=self.scratchpad.budget,
            redactions=total_in_file(self.store),
            graph=self.graph.records.statistics(),
        )

    # --- backup, restore, export, import -----------------------------------------------

    def backup(self, target: str | os.PathLike[str] | None = None, *, keep: int | None = None,
               progress: Progress | None = None) -> Path:  # fmt: skip
        """A verified ``VACUUM INTO`` snapshot (timestamped in the backup directory by default)."""
        self._require_open()
        return self.backups.create_backup(target, keep=keep, progress=progress)

    def restore(self, source: str | os.PathLike[str]) -> RestoreResult:
        """Replace everything with a snapshot's content, all or nothing."""
        self._require_open()
        result = self.backups.restore_backup(source)
        self._reload()
        return result

    def export_json(self, target: str | os.PathLike[str] | None = None, *, overwrite: bool = False,
                    progress: Progress | None = None,
                    allow_plaintext: bool = False) -> Path:  # fmt: skip
        """Write everything to one versioned JSON document; return its path (an encrypted
        file needs ``allow_plaintext=True``: the JSON is plain text)."""
        self._require_open()
        return self.backups.export_json(
            target, overwrite=overwrite, progress=progress, allow_plaintext=allow_plaintext
        )

    @property
    def encrypted(self) -> bool:
        """True when the file was opened with a key."""
        return self.backups.encrypted

    def rekey(self, new_key: str | bytes) -> None:
        """Re-encrypt the file with ``new_key`` in one operation; a crash leaves it under
        exactly one of the two keys. Other processes must not have the file open."""
        self._require_open()
        self.backups.rekey(new_key)

    def import_json(self, source: str | os.PathLike[str], mode: str = "replace", *,
                    progress: Progress | None = None,
                    refuse_secrets: bool = False) -> ImportResult:  # fmt: skip
        """Load an export, all or nothing (``mode`` is ``"replace"`` or ``"merge"``).

        The redactor runs over it first, as over any write; ``refuse_secrets=True`` raises
        :class:`~persistence.SecretsFoundError` at the first secret instead (nothing written).
        """
        self._require_open()
        require_bool(refuse_secrets, "refuse_secrets")
        redactor = (self.config.redactor or DEFAULT_REDACTOR) if refuse_secrets else self._redactor
        scrub = None if redactor is None else document_scrubber(redactor, refuse=refuse_secrets)
        result = self.backups.import_json(source, mode, progress=progress, scrub=scrub)
        self._reload()
        return result

    def check_integrity(self) -> IntegrityResult:
        """SQLite's checks plus the library's invariants, with every problem found."""
        self._require_open()
        return self.backups.check_integrity()

    def maintain(self, *, vacuum: bool = False) -> MaintenanceResult:
        """Checkpoint the WAL, refresh statistics, optionally VACUUM; delete stale leftovers
        of interrupted backups and restores."""
        self._require_open()
        return self.backups.run_maintenance(vacuum=vacuum)

    def _reload(self) -> None:
        """Drop RAM state after the file's content was replaced underneath it."""
        self._cache.clear()
        self.scratchpad.load()
        self.embeddings.recheck()

    # --- recall -------------------------------------------------------------------------------

    def embedder(self) -> Embedder | None:
        """The embedder in use (loaded on first need), or ``None`` for keyword-only recall.

        A file remembers which model embedded it; opening it with another one raises
        :class:`EmbeddingModelMismatchError` instead of mixing vectors, unless
        ``reembed=True``: then every memory is re-embedded here (new vectors are built
        beside the old ones, resumably, then swapped in with one transaction).
        """
        return self.embeddings.embedder()

    def flush(self, batch_size: int = 64) -> int:
        """Embed every memory still waiting for a vector, extract the entities of every
        memory waiting for extraction, and write pending recall reviews.

        ``remember()`` returns before its memory is embedded (keyword search finds it at
        once; a background thread embeds it soon after unless ``embed_in_background`` is
        off); ``recall()`` flushes first, so results are always complete. Returns how
        many memories this call embedded.
        """
        self._require_open()
        require_int(batch_size, "batch_size", minimum=1)
        self.store.require_writable()
        self._recall.apply_reviews()
        embedded = self.embeddings.flush(batch_size)
        self.extraction.flush()  # and the knowledge graph catches up
        return embedded

    def _embedded(self, rows: list[tuple[str, Tier]]) -> None:
        """Inside the transaction that stored new embeddings: RAM copies follow it."""
        self.scratchpad.refresh([memory_id for memory_id, tier in rows if tier is Tier.SCRATCHPAD])
        for memory_id, _ in rows:
            self._cache.invalidate(memory_id)

    def _replaced(self) -> None:
        """Inside the transaction that swapped in another model's embeddings."""
        self._cache.clear()
        self.scratchpad.refresh(None)

    def remember_many(
        self,
        records: Sequence[str | Mapping[str, Any]],
        tier: Tier | str = Tier.EPISODIC,
        **fields: Any,
    ) -> list[Memory]:
        """Remember many memories in one transaction, all or none; return them as stored.

        Each record is a text, or a mapping with ``content`` and any of ``remember()``'s
        keyword fields (``tier``, ``session_id``, ``agent_id``, ``importance``, ``tags``,
        ``metadata``, ``source``, ``category``, ``key``, ``embedding``, ``speaker``); ``tier`` and
        ``fields`` are the defaults a record's own values override. Every record is
        checked before anything is written (a bad one raises the error ``remember()``
        would, noting its position). Episodic and semantic memories are written
        set-based and indexed once at commit; then memories without a vector are embedded
        in batches (as :meth:`flush` does).
        """
        self._require_open()
        if isinstance(records, str | bytes) or not isinstance(records, Sequence):
            raise InvalidTypeError(
                "remember_many() takes a sequence of texts or mappings, "
                f"not {type(records).__name__}"
            )
        _check_record_fields(fields, "remember_many()")
        now = self.clock()
        redacted: list[int] = []
        drafts = [
            self._draft(record, tier, fields, now, n, redacted) for n, record in enumerate(records)
        ]
        sessions = {d.session_id for d in drafts if isinstance(d, Memory) and d.session_id}
        with self.store.transaction(join=True):
            for session_id in sorted(sessions):
                self.sessions.check_active(session_id)
            count_in_file(self.store, sum(redacted))
            stored = {}
            for n, draft in enumerate(drafts):
                if isinstance(draft, _ScratchpadDraft):
                    stored[n] = self.remember(draft.content, Tier.SCRATCHPAD, **draft.fields)
            rest = [(n, d) for n, d in enumerate(drafts) if isinstance(d, Memory)]
            if rest:
                memories = [memory for _, memory in rest]
                schedules = [self.curve.schedule_for(m.id, m.importance, now) for m in memories]
                written = self.store.insert_memories(memories, schedules)
                for (n, _), memory in zip(rest, written, strict=True):
                    stored[n] = memory
                    self._cache.set(memory.id, memory)
            touched = self.clock()
            for session_id in sorted(sessions):
                self.store.touch_session(session_id, touched)
            self.store.after_commit(self.extraction.notify)
            if any(m.embedding is None for m in stored.values()):
                self.store.after_commit(self.embeddings.notify)
        ordered = [stored[n] for n in range(len(drafts))]
        if any(m.embedding is None for m in ordered) and self.embeddings.embedder() is not None:
            self.flush()
            return [self.get(m.id) or m for m in ordered]
        return ordered

    def _draft(
        self,
        record: object,
        tier: Tier | str,
        defaults: Mapping[str, Any],
        now: int,
        n: int,
        redacted: list[int],
    ) -> Memory | _ScratchpadDraft:
        """One record of :meth:`remember_many` checked and turned into a new memory (or
        the arguments of a scratchpad ``remember``, which redacts); errors name the record;
        the number of secrets redacted from it is appended to ``redacted``."""
        try:
            if isinstance(record, str):
                values: dict[str, Any] = {**defaults, "content": record}
            elif isinstance(record, Mapping):
                _check_record_fields(record, "a record", content=True)
                values = {**defaults, **record}
            else:
                raise InvalidTypeError(
                    f"a record is a str or a mapping with 'content', not {type(record).__name__}"
                )
            content = values.pop("content", None)
            chosen = parse_tier(values.pop("tier", tier))
            require_str(content, "content")
            assert isinstance(content, str)
            self.store.check_content_size(content)
            require_str(values.get("session_id"), "session_id", allow_none=True, allow_empty=False)
            require_mapping(values.get("metadata"), "metadata", allow_none=True)
            if chosen is Tier.SCRATCHPAD:
                return _ScratchpadDraft(content, values)
            if values.get("key") is not None:
                raise InvalidInputError("key= names a scratchpad entry: pass tier=Tier.SCRATCHPAD")
            values.pop("key", None)
            metadata = values.pop("metadata", None)
            tags = values.pop("tags", ())
            content, tags, metadata, found = redact_fields(self._redactor, content, tags, metadata)
            redacted.append(found)
            memory = Memory.create(
                content,
                chosen,
                now=now,
                metadata=dict(metadata) if metadata is not None else {},
                tags=tuple(tags) if isinstance(tags, list) else tags,
                token_count=self.config.token_counter.count(content),
                **values,
            )
            return memory  # the store checks every field before writing any
        except TieredMemoryError as exc:
            exc.add_note(f"in record {n} of remember_many(); nothing was written")
            raise

    def recall(
        self,
        query: str,
        k: int = 5,
        *,
        tier: Tier | str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        tags: Sequence[str] = (),
        created_after: int | None = None,
        created_before: int | None = None,
        min_retention: float | None = None,
    ) -> list[RecallHit]:
        """The ``k`` memories that best answer ``query``, each with its score and why.

        Keyword (FTS5 bm25) and vector (MiniLM cosine) candidates are fused by their raw
        values (or by weighted reciprocal-rank fusion with ``RecallSettings(fusion=
        "rrf")``), then weighed by importance, retention and recency; see
        :mod:`tiered_memory.recall`. Recalled memories count as reviews (in batches).
        """
        self._require_open()
        return self._recall.recall(
            query, k, tier=tier, session_id=session_id, agent_id=agent_id, tags=tags,
            created_after=created_after, created_before=created_before,
            min_retention=min_retention,
        )  # fmt: skip


_RECORD_FIELDS = frozenset({*NEW_MEMORY_FIELDS, "tier", "key"})


@dataclass(frozen=True, slots=True)
class _ScratchpadDraft:
    """A :meth:`AgentMemoryManager.remember_many` record for the scratchpad."""

    content: str
    fields: dict[str, Any]


def _check_record_fields(values: Mapping[str, Any], what: str, content: bool = False) -> None:
    """Refuse keys ``remember()`` does not take (``content`` only in a record)."""
    allowed = _RECORD_FIELDS | {"content"} if content else _RECORD_FIELDS
    unknown = [str(k) for k in values if k not in allowed]
    if unknown:
        raise InvalidInputError(
            f"{what} has unknown field(s) {sorted(unknown)}; use {sorted(allowed)}"
        )
    if content and "content" not in values:
        raise InvalidInputError("a record needs 'content'")


def _touched(memory: Memory, now: int) -> int:
    """``updated_at`` for a change at ``now``: never before ``created_at`` (the clock may
    have gone back since the memory was made, and validation refuses that order)."""
    return max(now, memory.created_at)


def _not_scratchpad(memory: Memory) -> bool:
    """Scratchpad entries live in RAM, not in the cache."""
    return memory.tier is not Tier.SCRATCHPAD


def _order_key(memory: Memory, order_by: str) -> tuple[bool, Any, str]:
    value = getattr(memory, order_by)
    return (value is not None, value if value is not None else 0, memory.id)

"""AgentMemoryManager: the facade every user starts from.

It ties the three tiers, sessions, promotion and the forgetting curve to one store
(:func:`persistence.build_backend`: a :class:`~persistence.sqlite.SQLiteStore` and its parts).
The scratchpad is held whole in RAM; episodic and semantic memories are read lazily
through an LRU :class:`~persistence.CacheLayer`, so memory use stays flat however large
the file grows. Every mutating call is one
transaction and is durable when it returns; ``with manager.transaction():`` groups calls.

The work is done by collaborators with one job each, wired here to one store:
:class:`~tiered_memory.memories.Memories` (reads and writes through RAM),
:class:`~tiered_memory.writer.MemoryWriter` (remember, update),
:class:`~tiered_memory.links.Links`, :class:`~tiered_memory.retention.Retention`
(the forgetting curve), :class:`~tiered_memory.files.FileOperations`,
:class:`~tiered_memory.lifecycle.Lifecycle`, the sessions, the recaller and the graph.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, Self

from persistence import (
    CacheLayer,
    GraphStorage,
    InvalidInputError,
    InvalidTypeError,
    Memory,
    MemoryFilter,
    MemoryStatistics,
    MemoryStorage,
    Progress,
    PromotionRecord,
    Tier,
    build_backend,
    is_server_url,
    now_ms,
    require_str,
)
from tiered_memory.agent_scope import require_agent, stamped, stamped_records
from tiered_memory.arguments import typed_arguments
from tiered_memory.config import MemoryConfig, configured
from tiered_memory.context.calls import ContextCalls
from tiered_memory.embedding.embedders import Embedder
from tiered_memory.embedding.queue import EmbeddingQueue
from tiered_memory.erasure import ForgetCalls
from tiered_memory.files import FileCalls, FileOperations
from tiered_memory.forgetting import ForgettingCurve
from tiered_memory.graph.extraction import DefaultExtractor, ExtractionQueue
from tiered_memory.graph.facade import KnowledgeGraph
from tiered_memory.lifecycle import Lifecycle
from tiered_memory.links import Links
from tiered_memory.memories import Memories, not_scratchpad
from tiered_memory.notes import Notes
from tiered_memory.recall.fact_signal import terms, vocabulary
from tiered_memory.recall.graph_signal import GraphCandidates, graph_candidates
from tiered_memory.recall.recaller import Recaller
from tiered_memory.recall.settings import STOPWORDS
from tiered_memory.recalling import RecallCalls
from tiered_memory.redaction import total_in_file
from tiered_memory.retention import Retention, RetentionCalls
from tiered_memory.scratchpad import Scratchpad
from tiered_memory.sessions import SessionCalls, SessionManager
from tiered_memory.supersession import HistoryCalls
from tiered_memory.tag_counts import TagCounts
from tiered_memory.telemetry import (
    AGENT_ID,
    CONVERSATION_ID,
    RECORD_COUNT,
    RECORD_ID,
    SEARCH_MEMORY,
    TIER,
    UPDATE_MEMORY,
    Telemetry,
    writing,
)
from tiered_memory.tiers import TierView
from tiered_memory.writer import MemoryWriter


@typed_arguments
class AgentMemoryManager(
    ForgetCalls, RecallCalls, ContextCalls, TagCounts, HistoryCalls, SessionCalls,
    RetentionCalls, FileCalls,
):  # fmt: skip
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
        agent_id: str | None = None,
        **overrides: Any,
    ) -> None:
        if not isinstance(path, str | os.PathLike):
            raise InvalidTypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        self.agent_id = require_agent(agent_id)
        self.config = cfg = configured(config, overrides)
        self.clock = clock = cfg.clock or now_ms
        backend = build_backend(
            path, synchronous=cfg.synchronous, clock=clock, read_only=read_only, key=key,
            change_check_interval_ms=cfg.external_change_check_ms,
            max_content_bytes=cfg.max_content_bytes, backup_dir=cfg.backup_dir,
            trace=cfg.trace, pool=cfg.pool, scope=self.agent_id or "",
            vector_index=cfg.vector_index,
        )  # fmt: skip
        self.store: MemoryStorage = backend.store  # used only through the Protocol
        self.curve = ForgettingCurve(cfg.initial_stability_days, cfg.importance_stability_boost,
                                     cfg.target_retention)  # fmt: skip
        self._cache: CacheLayer[str, Memory] = CacheLayer(
            cfg.cache_size, transactions=self.store.engine
        )
        redactor = cfg.active_redactor
        self.scratchpad = Scratchpad(
            self.store, cfg.scratchpad_token_budget, cfg.token_counter, clock, redactor=redactor
        )
        self.sessions = SessionManager(self.store, clock, redactor=redactor)
        self._memories = memories = Memories(self.store, self.scratchpad, self._cache)
        self.embeddings = EmbeddingQueue(
            self.store, cfg.embedder, cache_size=cfg.embedding_cache_size, reembed=cfg.reembed,
            on_embedded=memories.embedded, on_replaced=memories.replaced,
        )  # fmt: skip
        self.backups = backend.backups
        self.episodic = TierView(memories, Tier.EPISODIC)
        self.semantic = TierView(memories, Tier.SEMANTIC)
        self.graph = KnowledgeGraph(backend.graph, clock, memories.get_many, memories.require_open)
        self._retention = Retention(memories, self.graph.records, self.curve, cfg, clock)
        self._recall = Recaller(
            self.store, self.embeddings, cfg.recall, clock, get_many=memories.get_many,
            get=memories.current, review=self._retention.review,
            review_quality=cfg.recall_review_quality, review_batch=cfg.recall_review_batch,
        )  # fmt: skip
        words = vocabulary(cfg.single_valued, cfg.predicate_words, STOPWORDS)
        self._recall.predicate_words = words
        self._recall.predicate_terms = terms(cfg.single_valued, cfg.predicate_words, STOPWORDS)
        self._recall.graph_search = partial(
            _graph_search, self.graph.records, self._recall, memories.get_many, clock, words,
        )  # fmt: skip
        extractor = DefaultExtractor() if isinstance(cfg.extractor, str) else cfg.extractor
        self.extraction = ExtractionQueue(self.store, self.graph.records, extractor, clock)
        self._writer = MemoryWriter(
            memories, self.sessions, self.graph.records, self.curve, cfg, clock,
            redactor=redactor, review=self._retention.review, embeddings=self.embeddings,
            extraction=self.extraction,
        )  # fmt: skip
        self._writer.notebook = self._notebook = backend.notes
        self.extraction.single_valued = frozenset(cfg.single_valued)
        self.extraction.settle = self._writer.settle
        self.notes = Notes(
            backend.notes, self.store, clock, require_open=memories.require_open,
            memory_exists=lambda memory_id: self.get(memory_id) is not None,
            entity=self.graph.entity, agent_id=self.agent_id, redactor=redactor,
        )  # fmt: skip
        self._recall.notebook = self.notes.notebook
        self._links = Links(memories, clock)
        self._files = FileOperations(backend, memories, self.embeddings, cfg)
        self.store.engine.on_external_change(self._files.reload)
        self._lifecycle = Lifecycle(
            backend, memories, cfg, self.embeddings, self.extraction, self._recall
        )
        self._telemetry = Telemetry(self.store.location, tracer_provider=cfg.tracer_provider,
                                    capture_content=cfg.capture_content)  # fmt: skip

    # --- lifecycle ----------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        config: MemoryConfig | None = None,
        *,
        read_only: bool = False,
        key: str | bytes | None = None,
        agent_id: str | None = None,
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

        ``agent_id`` opens a handle scoped to one agent: it reads and writes only that
        agent's memories (new ones carry ``agent_id``; another agent's id is refused).
        On PostgreSQL row-level security enforces it for every table (sessions,
        schedules, graph and exports too); on a file the handle filters by ``agent_id``
        (see the README for what that covers).
        """
        if isinstance(path, str | os.PathLike) and os.fspath(path) == ":memory:":
            raise InvalidInputError("use AgentMemoryManager.in_memory() for a store in memory")
        return cls(
            path, config, read_only=read_only, key=key, agent_id=agent_id, **overrides
        ).initialize()

    @classmethod
    def in_memory(cls, config: MemoryConfig | None = None, **overrides: Any) -> AgentMemoryManager:
        """A manager with the same API and nothing on disk."""
        return cls(":memory:", config, **overrides).initialize()

    def initialize(self) -> Self:
        """Open the store and load the scratchpad; a second call does nothing.

        Also deletes files that interrupted backups and restores left behind (never one
        that a backup or restore under way in another process holds).
        """
        self._lifecycle.open(self._telemetry)
        return self

    def shutdown(self) -> None:
        """Stop background embedding, write pending recall reviews, then close the store;
        closing twice is harmless. Memories not yet embedded stay queued in the file."""
        self._lifecycle.close()

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
        """The database file, or ``None`` in memory or on a server (see :attr:`location`)."""
        if self.store.is_memory or is_server_url(self.store.location):
            return None
        return Path(self.store.path)

    @property
    def location(self) -> str:
        """Where the memory lives, safe to print or log: the database file's path,
        ``":memory:"``, or (another backend) a URL without its password."""
        return self.store.location

    def _require_open(self) -> None:
        self._memories.require_open()

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
        supersedes: str | Sequence[str] | None = None,
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
        ``supersedes`` (an id or ids of this agent's episodic or semantic memories) marks
        them superseded by the new memory in the same transaction (see
        :mod:`tiered_memory.supersession`; such a write is never deduplicated).
        """
        agent_id = stamped(self.agent_id, agent_id)
        attributes = {AGENT_ID: agent_id, CONVERSATION_ID: session_id, RECORD_COUNT: 1}
        with self._telemetry.span(writing(dedup, self.config.dedup), attributes) as span:
            memory = self._writer.remember(
                content, tier, session_id=session_id, agent_id=agent_id, importance=importance,
                tags=tags, metadata=metadata, source=source, category=category, key=key,
                embedding=embedding, speaker=speaker, entities=entities, relations=relations,
                dedup=dedup, supersedes=supersedes,
            )  # fmt: skip
            span.stored((memory,))
            return memory

    def get(self, memory_id: str) -> Memory | None:
        """The memory with that id in any tier, or ``None``."""
        # Memories.get's lines inline: the hot path (a cached get is about a microsecond).
        if not self.store.is_open:
            self._require_open()
        if not isinstance(memory_id, str):
            require_str(memory_id, "memory_id")
        if not self.store.engine.check_external_changes():
            return self.store.memories.get_memory(memory_id)  # RAM may be stale: read the file
        in_scratchpad = self.scratchpad.by_id(memory_id)
        if in_scratchpad is not None:
            return in_scratchpad
        return self._cache.get_or_load(memory_id, self.store.memories.get_memory, not_scratchpad)

    def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        tags: Sequence[str] | None = None,
        importance: float | None = None,
        author: str | None = None,
        keep_history: bool = True,
    ) -> Memory:
        """Change a memory's content, metadata, tags or importance; bumps ``updated_at``.
        A changed content is kept in the memory's history (:meth:`history`), as written
        by ``author``; ``keep_history=False`` keeps no version (the replaced content is
        erased at close; versions kept earlier stay until the memory is forgotten)."""
        with self._telemetry.span(UPDATE_MEMORY, {RECORD_ID: memory_id, RECORD_COUNT: 1}) as span:
            memory = self._writer.update(
                memory_id, content=content, metadata=metadata, tags=tags, importance=importance,
                author=author, keep_history=keep_history,
            )  # fmt: skip
            span.stored((memory,))
            return memory

    def query(self, tier: Tier | str | None = None, **filters: Any) -> list[Memory]:
        """Memories matching every filter (the fields of :class:`QueryOptions`).

        With no ``tier`` the three tiers are searched and merged in the requested order.
        Superseded memories are left out unless ``include_superseded=True``; ``as_of``
        (epoch ms) lists the memories true at that time.
        """
        if self.agent_id is not None:
            filters["agent_id"] = stamped(self.agent_id, filters.get("agent_id"))
        with self._telemetry.span(SEARCH_MEMORY, {TIER: tier}) as span:
            found = self._memories.query(tier, **filters)
            span.found(found)
            return found

    def link(self, memory_id: str, other_id: str) -> None:
        """Link two memories both ways (linking again changes nothing)."""
        self._links.link(memory_id, other_id)

    def unlink(self, memory_id: str, other_id: str) -> bool:
        """Remove the link between two memories; True if there was one."""
        return self._links.unlink(memory_id, other_id)

    def linked(self, memory_id: str) -> list[Memory]:
        """The memories linked to this one that still exist."""
        return self._links.linked(memory_id)

    # --- promotion --------------------------------------------------------------------------

    def promote(
        self, memory_id: str, to_tier: Tier | str, reason: str | None = None
    ) -> PromotionRecord:
        """Move a memory forward (scratchpad -> episodic -> semantic), logged, one transaction."""
        with self._telemetry.span(UPDATE_MEMORY, {RECORD_ID: memory_id, TIER: to_tier}):
            return self._memories.promote(memory_id, to_tier, reason)

    def promotion_history(self, memory_id: str) -> list[PromotionRecord]:
        """Every logged promotion of a memory, oldest first."""
        self._require_open()
        return self.store.memories.get_promotion_history(memory_id)

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
            recall_writes_deferred=self._recall.reviews.deferred,
            recall_reviews_dropped=self._recall.reviews.dropped,
        )

    # --- recall -------------------------------------------------------------------------------

    def embedder(self) -> Embedder | None:
        """The embedder in use (loaded on first need), or ``None`` for keyword-only recall.

        A file remembers which model embedded it; opening it with another one raises
        :class:`EmbeddingModelMismatchError` instead of mixing vectors, unless
        ``reembed=True``: then every memory is re-embedded here (new vectors are built
        beside the old ones, resumably, then swapped in with one transaction).
        """
        return self.embeddings.embedder()

    def flush(self, batch_size: int = 256, *, progress: Progress | None = None) -> int:
        """Embed every memory still waiting for a vector, extract the entities of every
        memory waiting for extraction, and write pending recall reviews.

        ``remember()`` returns before its memory is embedded (keyword search finds it at
        once; a background thread embeds it soon after unless ``embed_in_background`` is
        off). ``recall()`` embeds what is pending for at most about 250 ms, then searches
        without the rest (keywords still find it; each hit's
        ``explanation.vector_pending`` says how many the vector search could not see):
        call this to wait for all of it. ``progress(done, total)`` follows the
        embedding. Returns how many memories this call embedded.
        """
        return self._lifecycle.flush(batch_size, progress)

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
        count = len(records) if isinstance(records, Sequence) else None
        operation = writing(fields.get("dedup"), self.config.dedup)
        with self._telemetry.span(operation, {RECORD_COUNT: count}) as span:
            if self.agent_id is not None:
                records = stamped_records(self.agent_id, records)
                fields["agent_id"] = stamped(self.agent_id, fields.get("agent_id"))
            ordered = self._writer.remember_many(records, tier, fields)
            if any(m.embedding is None for m in ordered) and self.embeddings.embedder() is not None:
                self.flush()
                ordered = [self.get(m.id) or m for m in ordered]
            span.stored(ordered)
            return ordered


def _graph_search(
    records: GraphStorage,
    recaller: Recaller,
    get_many: Callable[[list[str]], dict[str, Memory]],
    clock: Callable[[], int],
    single_valued: Mapping[str, frozenset[str]],
    query: str,
    where: MemoryFilter,
) -> GraphCandidates:
    """The graph and fact signals' candidates for recall (see
    :mod:`tiered_memory.recall.graph_signal`)."""
    return graph_candidates(
        records, query, where, recaller.settings, get_many, clock(), single_valued
    )

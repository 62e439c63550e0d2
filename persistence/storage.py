"""MemoryStorage and its families: the record operations the domain codes against.

:class:`~persistence.sqlite.SQLiteStore` is the first implementation; a second backend
(PostgreSQL + pgvector, say) implements this Protocol and the domain does not change.
Every signature is in domain terms: records of :mod:`persistence.records`, ids,
:class:`~persistence.records.MemoryFilter`, vectors as numpy arrays or float sequences;
no driver types, no SQL. Transactions are a context manager whose value the domain never
uses. Errors are :class:`~persistence.errors.TieredMemoryError` subclasses, the same for
every backend (not found, duplicate, wrong embedding size, read-only, closed, busy).

What a second backend must provide, beyond storing the records:

- :meth:`transaction`: all-or-nothing grouping; nested use rolls back alone (a
  savepoint), ``join=True`` joins the enclosing one.
- :attr:`StoreControl.engine`: the database under the store
  (:class:`~persistence.engine.Engine`), whose ``after_commit`` / ``after_rollback``
  hooks run exactly once when the outermost transaction ends (the domain keeps its RAM
  copies in step with them) and whose ``on_external_change`` /
  ``check_external_changes`` tell the domain when another process changed the data
  (PostgreSQL: ``LISTEN``/``NOTIFY``), so it drops its caches.
- :meth:`RecallIndex.keyword_search`: takes the query's words (normalised by the domain, see
  ``tiered_memory.recall.settings.keywords``), never a query expression; each backend
  builds its own full-text query from them (SQLite: an FTS5 ``"dark" OR "mode"``;
  PostgreSQL: a ``tsquery``). Scores are ``<= 0`` and lower is better, like FTS5's
  bm25, and recall uses only each score's ratio to the query's best (a positive score
  would drop the keyword signal).
  :meth:`RecallIndex.vector_search`: cosine distance, nearest first.
- The embedding queue (:meth:`RecallIndex.unembedded`, :meth:`RecallIndex.set_embeddings`),
  the embedding cache and the staged re-embedding (:meth:`RecallIndex.begin_rebuild` ...
  :meth:`RecallIndex.finish_rebuild`).

The operator's operations on the store as a whole -- snapshots and restore, JSON export
and import, rekeying, integrity checks, maintenance -- are :class:`StoreFiles`
(``Backend.backups``; SQLite's is :class:`~persistence.sqlite.BackupManager`). One a
backend cannot do raises :class:`~persistence.errors.UnsupportedOperationError` saying
what to use instead. Not part of any Protocol (engine-specific, reached through the
engine's store itself): connections and migrations.

:attr:`StoreControl.location` says where the data lives as text safe to print (a file
path, ``":memory:"``, a URL without its password). Statistics are a size plus the
backend's own figures (:class:`~persistence.records.PersistenceStatistics`).

:class:`MemoryStorage` is the composition of the stores, no facade: the store itself is
:class:`StoreControl` (lifecycle, transactions, its engine, meta, statistics), and it
holds one part per record family, each implementing that family's Protocol, so a part of the
domain can ask for only what it uses: ``storage.memories`` (:class:`MemoryRecords`: the
tiers, promotion, deduplication notes), ``storage.sessions`` (:class:`SessionRecords`:
sessions, transcripts), ``storage.schedules`` (:class:`ScheduleRecords`: review
schedules, retention batches, the forgetting log) and ``storage.indexes``
(:class:`RecallIndex`: keyword and vector search, conversation turns, embeddings and
re-embedding). The domain calls the part that owns a record
(``storage.memories.get_memory(...)``). The reference design's per-tier methods
(``put_episodic``, ...) stay on the engines' stores as a thin lower-level API
(:class:`~persistence.stores.reference_api.ReferenceTierAPI`), not part of this contract.

:class:`GraphStorage` is the knowledge graph's half, over the same data and the same
transactions (:class:`~persistence.sqlite.GraphStore` on a ``SQLiteStore``): a graph write in
a :meth:`MemoryStorage.transaction` commits or rolls back with it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from persistence.engine import Engine
from persistence.graph_records import (
    Entity,
    EntityFact,
    GraphPath,
    GraphStatistics,
    Neighbor,
    Reach,
    Relation,
    RelationFact,
)
from persistence.note_records import MemoryVersion, Note, NoteVersion
from persistence.records import (
    ForgettingRecord,
    ImportResult,
    IntegrityResult,
    Key,
    KeywordParts,
    MaintenanceResult,
    Memory,
    MemoryFilter,
    PersistenceStatistics,
    Progress,
    PromotionRecord,
    QueryOptions,
    RepetitionSchedule,
    RestoreResult,
    RetentionInput,
    SessionState,
    Tier,
    TranscriptEntry,
)

if TYPE_CHECKING:  # named in signatures only: the contract loads no file format
    from persistence.transfer.json_export import ExportSource
    from persistence.transfer.json_import import ImportSink
    from persistence.transfer.json_read import ImportDocument


@runtime_checkable
class StoreControl(Protocol):
    """The store as a whole: where it lives, opening and closing, transactions, the engine
    under it (their hooks, other processes' commits), facts kept with the data, and
    statistics."""

    @property
    def path(self) -> str:
        """Where the data lives, as the engine names it (SQLite: the file's absolute
        path or ``":memory:"``)."""

    @property
    def location(self) -> str:
        """Where the data lives as text safe to print or log: a file path,
        ``":memory:"``, or a URL without its password."""

    @property
    def is_memory(self) -> bool:
        """True when nothing outlives the process."""

    @property
    def is_open(self) -> bool:
        """True between :meth:`open` and :meth:`close`."""

    @property
    def read_only(self) -> bool:
        """True when every write raises :class:`~persistence.errors.ReadOnlyError`."""

    @property
    def in_transaction(self) -> bool:
        """True when the calling thread is inside :meth:`transaction`."""

    @property
    def engine(self) -> Engine:
        """The database under the store: the transactions' hooks (``after_commit``,
        ``after_rollback``), other processes' commits (``on_external_change``,
        ``check_external_changes``), ``require_writable`` and the read connections and
        snapshots (:class:`~persistence.engine.Engine`)."""

    @property
    def rows_per_trip(self) -> int:
        """How many rows one read by id is worth asking for at least: a few where a read
        costs microseconds (a file in-process), more where each round trip costs more
        than its rows (a server). Recall fetches its candidates in batches sized by it."""

    @property
    def migrations_applied(self) -> tuple[int, ...]:
        """The schema versions the last :meth:`open` applied, oldest first: ``()`` when
        the schema was current (or the store read-only); version 1 among them when that
        open created the store."""

    def open(self) -> MemoryStorage:
        """Open (creating or migrating the schema); a second call does nothing."""

    def close(self) -> None:
        """Close; twice is harmless."""

    def transaction(self, *, join: bool = False) -> AbstractContextManager[object]:
        """All or nothing; nested use rolls back alone, ``join=True`` joins the outer one."""

    # --- facts about the store and statistics --------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """One fact about the store (the embedding model, say), or ``None``."""

    def set_meta(self, key: str, value: str | None) -> None:
        """Record (or with ``None`` forget) one fact about the store."""

    def increment_meta(self, key: str, by: int = 1) -> int:
        """Add ``by`` to a counter kept with the data, atomically (no lost update when
        another process counts too); returns the new value."""

    def get_statistics(self) -> PersistenceStatistics:
        """Row counts and sizes."""


@runtime_checkable
class MemoryRecords(Protocol):
    """Memories of the three tiers, promotion, and the notes deduplication keeps."""

    def check_content_size(self, content: str, what: str = "content") -> None:
        """Refuse content over the store's size limit before any work is done on it."""

    def put_memory(self, memory: Memory) -> Memory:
        """Insert or update ``memory`` in the tier it names; return it as stored."""

    def insert_memories(
        self, memories: Sequence[Memory], schedules: Sequence[RepetitionSchedule] = ()
    ) -> list[Memory]:
        """Insert new episodic/semantic memories and their schedules, all or none; their
        content is noted for :meth:`find_same_content`."""

    def get_memory(self, memory_id: str) -> Memory | None:
        """The memory with that id in any tier, or ``None``."""

    def get_memories(self, memory_ids: Sequence[str]) -> dict[str, Memory]:
        """Several memories by id (missing ids are left out)."""

    def query(self, tier: Tier, options: QueryOptions | None = None) -> list[Memory]:
        """Memories of ``tier`` matching every filter set in ``options``."""

    def count(self, tier: Tier) -> int:
        """How many memories ``tier`` holds."""

    def has_superseded(self) -> bool:
        """True if any memory is superseded (recall needs no condition while none is)."""

    def superseded_of(self, memory_id: str) -> list[Memory]:
        """The memories ``memory_id`` superseded, oldest first."""

    def mark_superseded(
        self, memory: Memory, by: str, valid_to: int, reason: str, *, earlier: bool = False
    ) -> bool:
        """Mark ``memory`` superseded by ``by`` (one targeted update, in the caller's
        transaction); False if it is gone or was superseded meanwhile (``earlier``: or
        superseded no later than ``valid_to``)."""

    def superseded_ids(self, memory_ids: Sequence[str]) -> dict[str, list[str]]:
        """For each of ``memory_ids`` that superseded others, their ids (in id order)."""

    def superseded_count(self) -> int:
        """How many memories (in scope) are superseded."""

    def tag_counts(self, prefix: str) -> dict[str, int]:
        """How many memories carry each namespace tag (``family:ns:a.b``, see
        :mod:`persistence.tag_counts`) that starts with ``prefix``: read from counts kept
        in the transaction of every write, not from the memories."""

    def page(self, tier: Tier, after_id: str = "", limit: int = 500) -> list[Memory]:
        """The next ``limit`` memories of ``tier`` after ``after_id`` in id order."""

    def forget_memory(
        self, memory_id: str, reason: str, retention: float | None = None
    ) -> Tier | None:
        """Delete a memory with an audit row; the tier it was in, or ``None``."""

    def promote_memory(
        self, memory_id: str, from_tier: Tier, to_tier: Tier, reason: str | None = None
    ) -> PromotionRecord:
        """Move a memory forward a tier and log it, in one transaction."""

    def get_promotion_history(self, memory_id: str) -> list[PromotionRecord]:
        """Every logged promotion of a memory, oldest first."""

    # --- deduplication -------------------------------------------------------------------

    def record_content_keys(self, memories: Sequence[Memory]) -> None:
        """Note what these episodic/semantic memories say (normalised content, agent and
        session), so :meth:`find_same_content` finds them; replaces an older note."""

    def find_same_content(
        self, content: str, tier: Tier, agent_id: str | None, session_id: str | None
    ) -> list[str]:
        """Ids of live memories of ``tier`` noted with the same normalised content, agent
        and session (oldest first, at most 8); a note may be stale after an edit, so the
        caller compares the content itself."""

    def remember_new(
        self,
        memory: Memory,
        schedule: RepetitionSchedule,
        *,
        touch_at: int | None,
        dedup: bool,
    ) -> Memory | None:
        """``remember()``'s quick write of a new episodic or semantic ``memory`` (its
        vector, schedule and content key) moving its session's activity time to
        ``touch_at``, in one transaction, if the session it names (if any) exists and is
        active and, with ``dedup``, no memory with the same normalised content, agent and
        session is stored; return it as stored (durable). Else write nothing and return
        ``None``: the caller takes the step-by-step path, which raises or reinforces.
        Outside a transaction only. A store where a round trip costs (a server) does it in
        one; one in-process (SQLite) may always answer ``None``, its step-by-step path
        costing microseconds."""

    # --- scratchpad ----------------------------------------------------------------------

    def put_scratchpad(self, key: str, memory: Memory) -> Memory:
        """Store ``memory`` under ``key``; return it as stored."""

    def get_scratchpad(self, key: str) -> Memory | None:
        """The scratchpad memory under ``key``, or ``None``."""

    def delete_scratchpad(self, key: str) -> bool:
        """Delete the entry under ``key``; True if there was one."""

    def get_all_scratchpad(self) -> list[Memory]:
        """Every scratchpad entry, least recently written first."""

    def clear_scratchpad(self) -> int:
        """Delete every scratchpad entry; return how many."""


@runtime_checkable
class SessionRecords(Protocol):
    """Conversation sessions and their transcripts."""

    def put_session(self, session: SessionState) -> None:
        """Insert or update a session."""

    def get_session(self, session_id: str) -> SessionState | None:
        """The session, or ``None``."""

    def session_is_active(self, session_id: str) -> bool | None:
        """Whether the session is active (not ended); ``None`` if there is none."""

    def delete_session(self, session_id: str) -> bool:
        """Delete a session and its transcript (its memories stay). True if it existed."""

    def get_sessions(self, limit: int | None = None) -> list[SessionState]:
        """All sessions, most recently active first."""

    def get_active_sessions(self) -> list[SessionState]:
        """Sessions not yet ended, most recently active first."""

    def get_sessions_pending_compaction(self) -> list[SessionState]:
        """Sessions flagged for compaction, least recently active first."""

    def touch_session(self, session_id: str, at: int) -> None:
        """Move a session's ``last_active_at`` forward to ``at``."""

    def append_transcript(
        self, session_id: str, turn: int, role: str, content: str, *, speaker: str | None = None
    ) -> TranscriptEntry:
        """Add a transcript line (said by ``speaker``, if known) to a started session."""

    def get_transcripts(self, session_id: str) -> list[TranscriptEntry]:
        """A session's transcript in turn order."""


@runtime_checkable
class ScheduleRecords(Protocol):
    """Review schedules and the forgetting curve's batch work, with its audit log."""

    def put_repetition_schedule(self, schedule: RepetitionSchedule) -> None:
        """Insert or replace a memory's schedule."""

    def get_repetition_schedule(self, memory_id: str) -> RepetitionSchedule | None:
        """A memory's schedule, or ``None``."""

    def get_schedules_due_for_review(
        self, before: int, limit: int | None = None
    ) -> list[RepetitionSchedule]:
        """Schedules due at or before ``before`` (epoch ms), most overdue first."""

    def retention_batch(
        self, tier: Tier, after_id: str = "", limit: int = 500, min_reviews: int = 0
    ) -> list[RetentionInput]:
        """The next ``limit`` memories of ``tier`` after ``after_id``, in id order."""

    def apply_decay(
        self,
        tier: Tier,
        updates: Sequence[tuple[str, float]],
        forgotten: Sequence[tuple[str, float]],
        reason: str,
    ) -> None:
        """Store new retentions and forget ``forgotten`` with audit rows, in one go."""

    def get_forgetting_log(self, memory_id: str | None = None) -> list[ForgettingRecord]:
        """Audit rows of forgotten memories, oldest first."""


@runtime_checkable
class RecallIndex(Protocol):
    """What recall searches, and the embeddings that feed the vector search."""

    def keyword_search(
        self,
        words: Sequence[str],
        limit: int,
        tier: Tier | None = None,
        context_weight: float = 0.5,
        after_weight: float = 0.5,
        *,
        where: MemoryFilter | None = None,
    ) -> list[tuple[str, float]]:
        """``(memory_id, score)`` of the best ``limit`` memories holding any of ``words``
        that ``tier`` and ``where`` accept, best first.

        ``words`` are the query's words, already normalised by the domain (lower-cased,
        each once, stopwords dropped: ``tiered_memory.recall.settings.keywords``); they are
        plain words, never query syntax, and each backend builds its own full-text query
        from them (SQLite: the FTS5 expression ``"dark" OR "mode"``; PostgreSQL: a
        ``tsquery``, say). No words: ``[]``. A ``str`` is refused
        (:class:`~persistence.errors.InvalidTypeError`), not read as letters.

        Scores: every score is ``<= 0`` and lower is better (FTS5's bm25 is the model);
        ties keep a stable order. Recall uses only each score's ratio to the query's best
        score, so a backend may scale its scores freely, but a positive score would drop
        the keyword signal. Words found only in the two memories before a memory in its
        session count ``context_weight`` as much as its own words, in the two after it
        ``after_weight`` (a backend without session context may ignore both)."""

    def vector_search(
        self,
        vector: object,
        limit: int,
        tier: Tier | None = None,
        *,
        where: MemoryFilter | None = None,
    ) -> list[tuple[str, float]]:
        """``(memory_id, cosine distance)`` nearest first."""

    def keyword_parts(
        self, words: Sequence[str], memory_ids: Sequence[str]
    ) -> dict[str, KeywordParts]:
        """For each of ``memory_ids`` that holds any of ``words`` (normalised as for
        :meth:`keyword_search`) in its keyword window: which parts hold one (its own
        words, the memories before it, after it). Memories matching none are left out.
        Recall asks this of its top hits only, to explain them."""

    def vector_distances(self, vector: object, memory_ids: Sequence[str]) -> dict[str, float]:
        """Exact cosine distance to each of ``memory_ids`` that has an embedding."""

    def conversation_turns(
        self, memory_ids: Sequence[str], *, before: bool = False
    ) -> dict[str, tuple[str | None, bool, str | None, str | None]]:
        """Memory id -> (speaker, asks something, id before it (with ``before``) and after
        it in its session), for those of ``memory_ids`` that exist."""

    # --- embeddings ----------------------------------------------------------------------

    def unembedded(self, limit: int = 256) -> list[tuple[str, Tier, str]]:
        """Memories waiting for an embedding: ``(id, tier, content)``."""

    def unembedded_count(self) -> int:
        """How many memories wait for an embedding (what vector search cannot see yet)."""

    def set_embeddings(
        self,
        rows: Sequence[tuple[Tier, str, object]],
        contents: Sequence[str] | None = None,
        *,
        model_id: str | None = None,
    ) -> None:
        """Store computed embeddings (a memory whose content changed meanwhile is skipped)."""

    def cached_embeddings(self, model_id: str, hashes: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """Cached embeddings of ``model_id`` by content hash."""

    def cache_embeddings(
        self, model_id: str, entries: Sequence[tuple[bytes, object]], keep: int
    ) -> None:
        """Cache ``(content hash, vector)`` entries, keeping at most ``keep``."""

    def begin_rebuild(self, model_id: str, dim: int) -> bool:
        """Start (or resume) staging vectors of another model; True if work is kept."""

    def unstaged_for_rebuild(self, limit: int = 256) -> list[tuple[str, str]]:
        """Memories the re-embedding has no vector for yet: ``(id, content)``."""

    def stage_rebuild(self, rows: Sequence[tuple[str, str, object]]) -> None:
        """Stage ``(memory id, embedded content, vector)`` rows."""

    def finish_rebuild(self, embed: Callable[[list[str]], object]) -> int:
        """Swap the staged vectors in, all at once; how many memories changed."""

    def record_embedding_error(self, message: str) -> int:
        """Count a failure of background embedding; how many there have been."""


@runtime_checkable
class StoreFiles(Protocol):
    """The operator's operations on the store as a whole (``Backend.backups``): snapshots
    and restore, JSON export and import, the encryption key, integrity and maintenance.

    A backend that cannot do one of them (PostgreSQL has no file key to change, say)
    raises :class:`~persistence.errors.UnsupportedOperationError` naming what to use
    instead. :class:`~persistence.sqlite.BackupManager` is SQLite's."""

    @property
    def encrypted(self) -> bool:
        """True when the store's data is opened with a key."""

    def create_backup(
        self,
        target: str | os.PathLike[str] | None = None,
        *,
        keep: int | None = None,
        progress: Progress | None = None,
    ) -> Path:
        """Snapshot the data (verified before it is given its name); return its path.
        ``keep=N`` then deletes all but the newest N snapshots in the backup directory."""

    def restore_backup(self, source: str | os.PathLike[str]) -> RestoreResult:
        """Replace the data with a snapshot's, all or nothing (the source checked first)."""

    def export_json(
        self,
        target: str | os.PathLike[str] | None = None,
        *,
        overwrite: bool = False,
        progress: Progress | None = None,
        allow_plaintext: bool = False,
    ) -> Path:
        """Write everything to one versioned JSON document; return its path."""

    def import_json(
        self,
        source: str | os.PathLike[str],
        mode: str = "replace",
        *,
        progress: Progress | None = None,
        scrub: Callable[[ImportDocument], int] | None = None,
    ) -> ImportResult:
        """Load an export (``replace`` or ``merge``): validate all of it, then write it in
        one transaction."""

    def rekey(self, new_key: Key) -> None:
        """Re-encrypt the data with ``new_key``, in one transaction."""

    def check_integrity(self) -> IntegrityResult:
        """Run the engine's checks and the library's invariants; every problem found."""

    def run_maintenance(self, *, vacuum: bool = False) -> MaintenanceResult:
        """Tidy the store (SQLite: checkpoint the WAL, refresh planner statistics,
        optionally VACUUM) and delete leftovers of interrupted work."""

    def remove_leftovers(self, *more: Path) -> list[Path]:
        """Delete what interrupted backups and restores left (and ``more``); the paths
        deleted."""

    def export_source(self) -> AbstractContextManager[ExportSource]:
        """Every table from one read snapshot, for the block (what a copy reads)."""

    def import_sink(self) -> AbstractContextManager[ImportSink]:
        """One write transaction and the sink that writes in it: leaving the block
        commits, an exception rolls everything back (what a copy writes to)."""


@runtime_checkable
class MemoryStorage(StoreControl, Protocol):
    """The storage a manager runs on: the store as a whole (:class:`StoreControl`) and
    one part per record family over its data and transactions (see the module
    documentation)."""

    @property
    def memories(self) -> MemoryRecords:
        """The tiers' memories, promotion and deduplication notes."""

    @property
    def sessions(self) -> SessionRecords:
        """Sessions and their transcripts."""

    @property
    def schedules(self) -> ScheduleRecords:
        """Review schedules, retention batches and the forgetting log."""

    @property
    def indexes(self) -> RecallIndex:
        """Keyword and vector search, conversation turns, embeddings."""


@runtime_checkable
class GraphStorage(Protocol):
    """The knowledge graph's records (see the module documentation).

    ``ref`` is an entity id or one of its names (of ``type_``, if given); a missing one
    raises :class:`~persistence.EntityNotFoundError`. Writes join the caller's
    transaction when there is one. Arguments arrive checked by the domain
    (``tiered_memory.graph``).
    """

    # --- writing ----------------------------------------------------------------------------

    def add_entity(
        self, name: str, type_: str, description: str | None, now: int, *,
        source: str | None = None,
    ) -> Entity:  # fmt: skip
        """Add (or find) an entity; without ``source`` it is kept until removed directly."""

    def relate(
        self,
        subject: str,
        predicate: str,
        obj: str,
        now: int,
        *,
        subject_type: str = "entity",
        object_type: str = "entity",
        confidence: float = 1.0,
        valid_from: int | None = None,
        valid_to: int | None = None,
        source: str | None = None,
    ) -> Relation:
        """Assert a relation (creating named entities); with ``source`` it is derived from
        that memory, else kept until removed directly."""

    def assert_facts(
        self,
        memory_id: str,
        entities: Sequence[EntityFact],
        relations: Sequence[RelationFact],
        origin: str,
        now: int,
    ) -> None:
        """The memory asserts these facts (``origin``: who found them)."""

    def apply_extractions(
        self,
        results: Sequence[tuple[str, str | None, Sequence[EntityFact], Sequence[RelationFact]]],
        failures: Sequence[tuple[str, int, str]],
        now: int,
    ) -> int:
        """Write a batch of the extractor's findings, each replacing its earlier ones;
        postpone ``failures``. Returns how many memories were extracted."""

    def current_relations(
        self, subject_id: str, predicate: str, at: int | None = None
    ) -> list[tuple[Relation, list[str]]]:
        """The relations ``subject_id -predicate-> *`` valid now (``at``: then), each with
        the ids of
        every memory asserting it (whatever the scope)."""

    def held_relations(
        self, subject_id: str, predicate: str, at: int | None = None
    ) -> list[tuple[Relation, list[str]]]:
        """The relations ``subject_id -predicate-> *`` valid now (``at``: then), each with
        the ids of the memories in scope asserting it; a read (recall's fact signal)."""

    def set_validity(self, rid: str, valid_from: int | None, valid_to: int | None) -> None:
        """Bound when a relation holds (a memory's single-valued fact), in the caller's
        transaction."""

    def drop_extracted(self, memory_id: str) -> None:
        """The memory's text changed: what the extractor found in it goes."""

    def move_provenance(self, drop: str, keep: str) -> None:
        """What memory ``drop`` asserted, memory ``keep`` asserts too."""

    def merge(self, keep: str, drop: str, now: int) -> Entity:
        """Fold entity ``drop`` into ``keep``."""

    def invalidate(self, rid: str, at: int) -> Relation:
        """Mark a relation as no longer true from ``at`` on (its row stays)."""

    def remove_entity(self, ref: str) -> bool:
        """Delete an entity, its relations and provenance; False if missing."""

    def remove_relation(self, rid: str) -> bool:
        """Delete a relation; False if missing."""

    def enqueue(self, memory_ids: Sequence[str]) -> None:
        """Queue memories for extraction again."""

    # --- reading ----------------------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        """The database under the graph (the store's): reads inside its ``snapshot()``
        block see one snapshot (nested blocks share it)."""

    def entity(self, ref: str, type_: str | None = None) -> Entity | None:
        """An entity by id or name, or ``None``."""

    def relations(self, ref: str) -> list[Relation]:
        """Every relation of an entity, invalidated ones too."""

    def neighbors(
        self,
        ref: str,
        depth: int,
        predicates: Sequence[str] | None,
        limit: int,
        fanout: int,
        at: int,
    ) -> list[Neighbor]:
        """Entities within ``depth`` hops, nearest and most supported first."""

    def path(self, a: str, b: str, max_depth: int, at: int) -> GraphPath | None:
        """The best-supported shortest path from ``a`` to ``b``, or ``None``."""

    def memory_ids_about(self, ref: str, limit: int) -> list[str]:
        """Ids of memories that name the entity."""

    def list_entities(self, type_: str | None, limit: int) -> list[Entity]:
        """Entities (of one type, or all), in id order."""

    def asserting_memories(self, relation_ids: Sequence[str]) -> dict[str, list[str]]:
        """Ids of the memories that assert each relation, by id (unasserted ones left out)."""

    def facts_of(self, memory_id: str) -> tuple[list[Entity], list[Relation]]:
        """The entities and relations one memory asserts (its graph provenance)."""

    def pending(self, now: int, limit: int) -> list[tuple[str, str, int]]:
        """Memories waiting for extraction now: ``(id, content, attempts)``."""

    def statistics(self) -> GraphStatistics:
        """The graph's counts."""

    # --- the graph signal of recall (entity ids, no name resolving) ------------------------

    def has_graph(self) -> bool:
        """True if the store has the graph (an old file opened read-only may not)."""

    def may_name_entities(self) -> bool:
        """False when no entity alias is stored (the graph signal then finds nothing and
        opens no snapshot); True otherwise, or when unsure (a store whose look-ups cost
        microseconds may always answer True)."""

    def entities_named_in(self, words: Sequence[str], limit: int) -> list[tuple[str, str]]:
        """``(entity id, alias)`` of aliases holding any of ``words`` (normalised)."""

    def memory_count(self, entity_id: str, cap: int) -> int:
        """How many memories name the entity, counting no further than ``cap``."""

    def memories_naming(self, entity_id: str, limit: int) -> list[str]:
        """Ids of memories that name the entity, most recently asserted first."""

    def memories_naming_each(
        self, entity_ids: Sequence[str], most: int, limit: int
    ) -> dict[str, tuple[int, list[str]]]:
        """For each of ``entity_ids`` that 1 to ``most`` memories name: how many (as
        :meth:`memory_count` counts them) and the first ``limit`` of them (as
        :meth:`memories_naming` lists them); hubs and entities no memory names left out.
        In as few round trips as the engine can (recall's graph signal asks per hop)."""

    def walk(self, entity_id: str, depth: int, at: int, fanout: int, cap: int) -> list[Reach]:
        """Entities within ``depth`` hops, each with its best-supported shallowest path."""

    def entities(self, entity_ids: Sequence[str]) -> dict[str, Entity]:
        """The entities with these ids (missing ones left out)."""


@runtime_checkable
class NoteStorage(Protocol):
    """Notes, their versions and links, and memories' content history, over the same
    data and transactions as the :class:`MemoryStorage` they are built on (a write in a
    :meth:`MemoryStorage.transaction` commits or rolls back with it).

    A scoped store (an agent's handle) reads and writes only its agent's notes; the
    arguments arrive checked by the domain (``tiered_memory.notes``).
    """

    def save_note(self, note: Note, version: NoteVersion) -> None:
        """Write ``note`` as it is now (inserted or replaced) with its new ``version``,
        and refresh its keywords."""

    def get_note(self, note_id: str) -> Note | None:
        """The note with its links, or ``None``."""

    def note_versions(self, note_id: str) -> list[NoteVersion]:
        """Every version of the note, oldest first (``[]`` for no such note)."""

    def list_notes(self, tag: str | None = None, limit: int | None = None) -> list[Note]:
        """Notes, most recently updated first; with ``tag``, those carrying it."""

    def delete_note(self, note_id: str) -> bool:
        """Delete the note with every version, link and keyword; True if it existed.
        Nothing of its content stays readable in the store."""

    def link_note(self, note_id: str, kind: str, target: str, at: int) -> bool:
        """Link a note to a memory or entity id; False if already linked."""

    def unlink_note(self, note_id: str, kind: str, target: str) -> bool:
        """Remove a link; True if there was one."""

    def notes_linked_to(self, kind: str, target: str) -> list[str]:
        """Ids of the notes linked to a memory or entity id."""

    def search_notes(self, words: Sequence[str], limit: int) -> list[tuple[str, float]]:
        """``(note id, score)`` of the best ``limit`` notes holding any of ``words``
        (normalised, as for :meth:`RecallIndex.keyword_search`); scores ``<= 0``, lower
        is better."""

    def note_count(self) -> int:
        """How many notes the store (or the agent) has."""

    def memory_versions(self, memory_id: str) -> list[MemoryVersion]:
        """The contents a memory had, oldest first (``[]``: never edited)."""

    def add_memory_version(self, version: MemoryVersion) -> None:
        """Keep one content of a memory (removed with the memory)."""

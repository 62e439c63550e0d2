"""SQLiteStore: the durable source of truth, one WAL-mode SQLite file driven by APSW.

The composition root of the record families: it opens, migrates, rekeys and closes the
file (the engine, :class:`~persistence.sqlite.database.Database`, is :attr:`db`), owns
the facts about the file (``store_meta``), statistics, transactions and the commit hook,
and holds one part per record family over the same engine: :attr:`memories`
(:class:`MemoryStore`), :attr:`sessions` (:class:`SessionStore`), :attr:`schedules`
(:class:`ScheduleStore`) and :attr:`indexes` (:class:`IndexStore`). Every record method
of a part is offered on the store too (one call; the docstring is the part's).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Generic, TypeVar, overload

import apsw
import numpy as np

from migrations import (
    LATEST_VERSION,
    Migration,
    MigrationFailed,
    SchemaTooNew,
    apply_migrations,
    read_schema_version,
)
from persistence.errors import (
    EmbeddingDimensionError,
    EncryptionKeyError,
    ForeignDatabaseError,
    InvalidInputError,
    InvalidTypeError,
    MigrationError,
    MigrationRequiredError,
    NotADatabaseError,
    SchemaTooNewError,
    StorageFullError,
)
from persistence.index_searches import IndexSearches
from persistence.records import (
    ForgettingRecord,
    Key,
    Memory,
    PersistenceStatistics,
    PromotionRecord,
    QueryOptions,
    RepetitionSchedule,
    RetentionInput,
    SessionState,
    Synchronous,
    Tier,
    TranscriptEntry,
    now_ms,
)
from persistence.sqlite.connection import (
    MEMORY_PATH,
    ConnectionOptions,
    connect_read_only,
    connection_optimize,
    connection_wal,
)
from persistence.sqlite.database import RESET_AFTER_CHANGES, Database
from persistence.sqlite.encryption import key_bytes, require_cipher
from persistence.sqlite.erasure import (
    cache_erasure_triggers,
    erase_pending,
    fts_secure_delete,
    pending_triggers,
)
from persistence.sqlite.index_store import (
    IndexStore,
    MirrorVectors,
    VectorCandidates,
    build_index_store,
)
from persistence.sqlite.keyword_index import KeywordIndex
from persistence.sqlite.log import route_sqlite_log
from persistence.sqlite.memory_store import MemoryStore
from persistence.sqlite.schedule_store import ScheduleStore
from persistence.sqlite.session_store import SessionStore
from persistence.sqlite.sql import memory_sql, stats_sql
from persistence.sqlite.sql.meta_sql import (
    EMBEDDING_DIM_KEY,
    add_to_counter,
    embedding_errors,
    read_meta,
    write_meta,
)
from persistence.sqlite.tracing import TraceCallback
from persistence.sqlite.translate import storage_errors
from persistence.sqlite.vector_mirror import RESORT_AFTER, VectorMirror
from persistence.validation import DEFAULT_MAX_CONTENT_BYTES, require_bool, require_int, require_str

T = TypeVar("T")

logger = logging.getLogger("tiered_memory")


class _Shared(Generic[T]):
    """A setting of the store that its parts read too: set on the store (also after it
    is built, as a test sets ``clock``), it is set on each part that has it."""

    def __set_name__(self, owner: type[object], name: str) -> None:
        self.name, self.slot = name, f"_{name}"

    @overload
    def __get__(self, store: None, owner: type[object]) -> _Shared[T]: ...
    @overload
    def __get__(self, store: object, owner: type[object]) -> T: ...
    def __get__(self, store: object | None, owner: type[object]) -> T | _Shared[T]:
        if store is None:
            return self
        value: T = getattr(store, self.slot)
        return value

    def __set__(self, store: object, value: T) -> None:
        setattr(store, self.slot, value)
        for part in getattr(store, "_parts", ()):
            if hasattr(part, self.name):
                setattr(part, self.name, value)


class SQLiteStore(IndexSearches):
    """Durable storage of tiers, sessions, transcripts, schedules and the promotion log.

    ``path`` is a file (created with mode 0600 if missing; its directory must exist) or
    ``":memory:"``. ``embedding_dim`` fixes the embedding size up front; otherwise the
    first embedding written fixes it for the file. ``clock`` returns epoch milliseconds.
    ``migrations`` overrides the shipped migration list (for tests of the runner).
    ``max_content_bytes`` refuses new memory content larger than that many UTF-8 bytes
    (content already stored may be written back unchanged).

    ``read_only=True`` opens an existing file with SQLite's read-only flag (also on
    read-only storage): it never creates, migrates or optimizes the file, and every
    write raises :class:`ReadOnlyError`. The file's bytes do not change.

    Tunables (tests change them): ``idle_merge_s``, how long the writer rests before the
    keyword index is merged in the background (``None``: ``$TIERED_MEMORY_IDLE_MERGE_S``,
    else 0.05; see keyword_index.py); ``reset_after_changes`` (see
    :data:`~persistence.sqlite.database.RESET_AFTER_CHANGES`); ``vector_resort_after``,
    how many new ids the vector copy takes before it re-sorts. ``trace`` is told of each
    statement run (:mod:`~persistence.sqlite.tracing`). The engine is :attr:`db`;
    :meth:`transaction`, the hooks and the connections are its, offered here too.
    """

    indexes: IndexStore[MirrorVectors]

    clock = _Shared[Callable[[], int]]()
    max_content_bytes = _Shared[int]()
    embedding_dim = _Shared[int | None]()

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Synchronous = "NORMAL",
        busy_timeout_ms: int = 5000,
        wal_autocheckpoint: int = 1000,
        embedding_dim: int | None = None,
        clock: Callable[[], int] | None = None,
        migrations: Sequence[Migration] | None = None,
        change_check_interval_ms: int = 50,
        max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
        read_only: bool = False,
        key: Key | None = None,
        idle_merge_s: float | None = None,
        reset_after_changes: int = RESET_AFTER_CHANGES,
        vector_resort_after: int = RESORT_AFTER,
        trace: TraceCallback | None = None,
    ) -> None:
        if not isinstance(path, str | os.PathLike):
            raise InvalidTypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        require_int(embedding_dim, "embedding_dim", allow_none=True, minimum=1)
        require_int(max_content_bytes, "max_content_bytes", minimum=1)
        self.max_content_bytes = max_content_bytes
        raw = os.fspath(path)
        self.path = raw if raw == MEMORY_PATH else str(_expanded(Path(raw)).absolute())
        require_bool(read_only, "read_only")
        self.read_only = read_only
        self.options = ConnectionOptions(
            synchronous, busy_timeout_ms, wal_autocheckpoint, key_bytes(key)
        )
        if key is not None and self.path == MEMORY_PATH:
            raise InvalidInputError("an in-memory store has no file to encrypt: omit key")
        if key is not None:
            require_cipher()  # before anything is created
        self.db = Database(self.path, self.options, read_only=read_only, trace=trace,
                           change_check_interval_ms=change_check_interval_ms,
                           reset_after_changes=reset_after_changes)  # fmt: skip
        self.embedding_dim = embedding_dim
        self.clock = clock or now_ms
        self._migrations = list(migrations) if migrations is not None else None
        self.memories = MemoryStore(self.db, self.clock, embedding_dim, max_content_bytes)
        self.sessions = SessionStore(self.db, self.clock)
        self.schedules = ScheduleStore(self.db, self.clock)
        self.keywords = KeywordIndex(self.db, idle_merge_s)  # commit work, idle merges
        require_int(vector_resort_after, "vector_resort_after", minimum=1)
        self.indexes = build_index_store(self.db, self.path, self.clock, embedding_dim,
                                         self.keywords, vector_resort_after)  # fmt: skip
        self._parts = (self.memories, self.sessions, self.schedules, self.indexes)
        self.db.after_exclusive(self.indexes.vectors.reset)
        self._reading = self.db.reading  # this thread's read connection

    # --- lifecycle ----------------------------------------------------------------------

    @property
    def location(self) -> str:  # where the data lives, safe to print: the path (no key)
        return self.path

    @property
    def is_memory(self) -> bool:
        """True for an in-memory store (nothing on disk)."""
        return self.path == MEMORY_PATH

    @property
    def is_open(self) -> bool:
        """True between :meth:`open` and :meth:`close`."""
        return self.db.is_open

    @property
    def in_transaction(self) -> bool:
        """True when the calling thread is inside :meth:`transaction`."""
        return self.db.in_transaction

    @property
    def _writer(self) -> apsw.Connection | None:
        return self.db.writer

    @property
    def _readers(self) -> list[apsw.Connection]:
        return self.db.readers

    def open(self) -> SQLiteStore:
        """Open (creating or migrating) the file; a second call does nothing.

        With ``read_only`` the file must exist at the current schema version: one written
        by an older version raises :class:`MigrationRequiredError`, as nothing migrates it.
        """
        route_sqlite_log()
        with self.db.lock, storage_errors(f"opening {self.path}", self.db.place, opening=True):
            try:
                opened = self.db.open(self._prepare)
            except SchemaTooNew as exc:
                raise SchemaTooNewError(exc.found, exc.supported, self.path) from exc
            except MigrationFailed as exc:
                if isinstance(exc.__cause__, apsw.FullError):
                    raise StorageFullError(
                        f"{self.path}: {exc}: the disk is full; free some space and open it "
                        "again (the file stays at the last version that committed)"
                    ) from exc
                raise MigrationError(f"{self.path}: {exc}") from exc
            if not opened or self.read_only:
                return self
            conn = self.db.require_open()
            try:
                if self.keywords.opened(conn):
                    with self.transaction():  # written without the store: caught up on commit
                        pass
            except BaseException:
                self._close_after_failed_open()
                raise
            return self

    def _close_after_failed_open(self) -> None:
        """Close the connections an open made before it failed (a damaged table, say): the
        caller gets no store to close, and an open connection to the path would fail every
        later open of it in this process."""
        try:
            self.db.close()
        except Exception as exc:  # the open's error is the one to report
            logger.debug("closing %s after a failed open: %s", self.path, exc)

    def _prepare(self, conn: apsw.Connection) -> None:
        """Check (and, read-write, migrate) a new connection's file before it is used."""
        latest = self._migrations[-1].VERSION if self._migrations else LATEST_VERSION
        _check_schema(conn, self.path, latest, self.read_only)
        if not self.read_only:
            connection_wal(conn)
            apply_migrations(conn, self._migrations, self.clock)
        if self.embedding_dim is not None:
            _check_configured_dim(conn, self.embedding_dim)
        if not self.read_only:
            fts_secure_delete(conn)
            cache_erasure_triggers(conn)
            pending_triggers(conn)
            erase_pending(conn)  # what a crash before the last close left
            connection_optimize(conn, self.options, at_open=True)

    @property
    def encrypted(self) -> bool:
        """True when the file is opened with a key (encrypted at rest)."""
        return self.options.key is not None

    def rekey(self, new_key: Key) -> None:
        """Re-encrypt the file with ``new_key`` in one operation (see :meth:`Database.rekey`)."""
        new = key_bytes(new_key)
        assert new is not None
        if not self.encrypted:
            raise EncryptionKeyError(
                f"{self.path} is not encrypted: rekey changes the key of an encrypted file "
                "(nothing was changed)"
            )
        with storage_errors(f"changing the key of {self.path}", self.db.place):
            self.db.rekey(new)
        self.options = self.db.options

    @classmethod
    def migrate(cls, path: str | os.PathLike[str], key: Key | None = None) -> tuple[int, int]:
        """Bring an existing database to the current schema: ``(version before, after)``.

        Nothing is created: a missing or empty file, or one that is not a tiered-memory
        database, is refused and left as it was.
        """
        store = cls(path, key=key)
        if store.is_memory:
            raise InvalidInputError("an in-memory store has nothing to migrate")
        with storage_errors(f"migrating {store.path}", store.path):
            before = _existing_version(store.path, store.options)
            with store:
                return before, store.schema_version

    def close(self) -> None:
        """Refresh planner statistics, then close every connection; twice is harmless.
        Waits for writes and reads under way in other threads; refused inside this
        thread's own :meth:`transaction` (finish it first). A read-only store changes
        nothing (it removes the empty -wal and -shm files its open created, if it can)."""
        self.db.close()

    def __enter__(self) -> SQLiteStore:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- the engine's API, offered on the store ------------------------------------------

    def transaction(self, *, join: bool = False) -> AbstractContextManager[apsw.Connection]:
        """Group writes in one transaction (see :meth:`Database.transaction`): nested use
        is a savepoint, ``join=True`` joins the enclosing transaction."""
        return self.db.transaction(join=join)

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once the current transaction commits (now, outside one)."""
        self.db.after_commit(callback)

    def after_rollback(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` if the current transaction (or savepoint) rolls back."""
        self.db.after_rollback(callback)

    def on_external_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when another connection (another process, say) has committed."""
        self.db.on_external_change(callback)

    def check_external_changes(self, wait_s: float = 0.05) -> bool:
        """Look for other connections' commits (see :meth:`Database.check_external_changes`)."""
        return self.db.watch(wait_s)

    def require_writable(self) -> None:
        """Raise :class:`ReadOnlyError` if this store was opened with ``read_only=True``."""
        self.db.require_writable()

    def exclusive_connection(self) -> AbstractContextManager[apsw.Connection]:
        """The write connection with no transaction open (backup, ``VACUUM``)."""
        return self.db.exclusive_connection()

    def read_connection(self) -> AbstractContextManager[apsw.Connection]:
        """A connection to read from (this thread's own; readers never wait for writers)."""
        return self.db.reading()

    def fresh_read_connection(self) -> AbstractContextManager[apsw.Connection]:
        """A connection of its own for one read snapshot (for integrity checks)."""
        return self.db.fresh_read_connection()

    # --- facts about the file -------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """One fact about the file (``store_meta``), or ``None``."""
        with self._reading() as conn:
            return read_meta(conn, key)

    def set_meta(self, key: str, value: str | None) -> None:
        """Record (or with ``None`` forget) one fact about the file."""
        with self.transaction() as conn:
            write_meta(conn, key, value)

    def increment_meta(self, key: str, by: int = 1) -> int:
        """Add ``by`` to a counter kept in the file, atomically (in the caller's
        transaction, if any); returns the new value."""
        require_str(key, "key", allow_empty=False)
        require_int(by, "by")
        with self.transaction(join=True) as conn:
            return add_to_counter(conn, key, by)

    # --- the parts' methods, offered on the store (docstrings: the part's) -------------------
    # memories (MemoryStore; the per-tier methods are its lower-level API)

    def check_content_size(self, content: str, what: str = "content") -> None:
        return self.memories.check_content_size(content, what)

    def put_memory(self, memory: Memory) -> Memory:
        return self.memories.put_memory(memory)

    def insert_memories(
        self, memories: Sequence[Memory], schedules: Sequence[RepetitionSchedule] = ()
    ) -> list[Memory]:
        return self.memories.insert_memories(memories, schedules)

    def get_memory(self, memory_id: str) -> Memory | None:
        return self.memories.get_memory(memory_id)

    def get_memories(self, memory_ids: Sequence[str]) -> dict[str, Memory]:
        return self.memories.get_memories(memory_ids)

    def query(self, tier: Tier, options: QueryOptions | None = None) -> list[Memory]:
        return self.memories.query(tier, options)

    def count(self, tier: Tier) -> int:
        return self.memories.count(tier)

    def tag_counts(self, prefix: str, agent_id: str | None = None) -> dict[str, int]:
        return self.memories.tag_counts(prefix, agent_id)

    def page(self, tier: Tier, after_id: str = "", limit: int = 500) -> list[Memory]:
        return self.memories.page(tier, after_id, limit)

    def forget_memory(
        self, memory_id: str, reason: str, retention: float | None = None
    ) -> Tier | None:
        return self.memories.forget_memory(memory_id, reason, retention)

    def promote_memory(
        self, memory_id: str, from_tier: Tier, to_tier: Tier, reason: str | None = None
    ) -> PromotionRecord:
        return self.memories.promote_memory(memory_id, from_tier, to_tier, reason)

    def get_promotion_history(self, memory_id: str) -> list[PromotionRecord]:
        return self.memories.get_promotion_history(memory_id)

    def record_content_keys(self, memories: Sequence[Memory]) -> None:
        return self.memories.record_content_keys(memories)

    def find_same_content(
        self, content: str, tier: Tier, agent_id: str | None, session_id: str | None
    ) -> list[str]:
        return self.memories.find_same_content(content, tier, agent_id, session_id)

    def put_scratchpad(self, key: str, memory: Memory) -> Memory:
        return self.memories.put_scratchpad(key, memory)

    def get_scratchpad(self, key: str) -> Memory | None:
        return self.memories.get_scratchpad(key)

    def delete_scratchpad(self, key: str) -> bool:
        return self.memories.delete_scratchpad(key)

    def get_all_scratchpad(self) -> list[Memory]:
        return self.memories.get_all_scratchpad()

    def clear_scratchpad(self) -> int:
        return self.memories.clear_scratchpad()

    def put_episodic(self, memory: Memory) -> Memory:
        return self.memories.put_episodic(memory)

    def get_episodic(self, memory_id: str) -> Memory | None:
        return self.memories.get_episodic(memory_id)

    def delete_episodic(self, memory_id: str) -> bool:
        return self.memories.delete_episodic(memory_id)

    def query_episodic(self, options: QueryOptions | None = None) -> list[Memory]:
        return self.memories.query_episodic(options)

    def put_semantic(self, memory: Memory) -> Memory:
        return self.memories.put_semantic(memory)

    def get_semantic(self, memory_id: str) -> Memory | None:
        return self.memories.get_semantic(memory_id)

    def delete_semantic(self, memory_id: str) -> bool:
        return self.memories.delete_semantic(memory_id)

    def query_semantic(self, options: QueryOptions | None = None) -> list[Memory]:
        return self.memories.query_semantic(options)

    # sessions and transcripts (SessionStore)

    def put_session(self, session: SessionState) -> None:
        return self.sessions.put_session(session)

    def get_session(self, session_id: str) -> SessionState | None:
        return self.sessions.get_session(session_id)

    def session_is_active(self, session_id: str) -> bool | None:
        return self.sessions.session_is_active(session_id)

    def delete_session(self, session_id: str) -> bool:
        return self.sessions.delete_session(session_id)

    def get_sessions(self, limit: int | None = None) -> list[SessionState]:
        return self.sessions.get_sessions(limit)

    def get_sessions_pending_compaction(self) -> list[SessionState]:
        return self.sessions.get_sessions_pending_compaction()

    def touch_session(self, session_id: str, at: int) -> None:
        return self.sessions.touch_session(session_id, at)

    def get_active_sessions(self) -> list[SessionState]:
        return self.sessions.get_active_sessions()

    def append_transcript(
        self, session_id: str, turn: int, role: str, content: str, *, speaker: str | None = None
    ) -> TranscriptEntry:
        return self.sessions.append_transcript(session_id, turn, role, content, speaker=speaker)

    def get_transcripts(self, session_id: str) -> list[TranscriptEntry]:
        return self.sessions.get_transcripts(session_id)

    # repetition schedules and forgetting (ScheduleStore)

    def put_repetition_schedule(self, schedule: RepetitionSchedule) -> None:
        return self.schedules.put_repetition_schedule(schedule)

    def get_repetition_schedule(self, memory_id: str) -> RepetitionSchedule | None:
        return self.schedules.get_repetition_schedule(memory_id)

    def get_schedules_due_for_review(
        self, before: int, limit: int | None = None
    ) -> list[RepetitionSchedule]:
        return self.schedules.get_schedules_due_for_review(before, limit)

    def retention_batch(
        self, tier: Tier, after_id: str = "", limit: int = 500, min_reviews: int = 0
    ) -> list[RetentionInput]:
        return self.schedules.retention_batch(tier, after_id, limit, min_reviews)

    def apply_decay(
        self, tier: Tier, updates: Sequence[tuple[str, float]],
        forgotten: Sequence[tuple[str, float]], reason: str,
    ) -> None:  # fmt: skip
        return self.schedules.apply_decay(tier, updates, forgotten, reason)

    def get_forgetting_log(self, memory_id: str | None = None) -> list[ForgettingRecord]:
        return self.schedules.get_forgetting_log(memory_id)

    # recall indexes and embeddings (IndexStore)

    @property
    def exact_scan_max(self) -> int:
        """See :class:`IndexStore` (settable: tests lower it to force the deeper search)."""
        return self.indexes.exact_scan_max

    @exact_scan_max.setter
    def exact_scan_max(self, value: int) -> None:
        self.indexes.exact_scan_max = value

    @property
    def _vectors(self) -> VectorMirror:
        return self.indexes.vectors

    @property
    def _vector_candidates(self) -> VectorCandidates:
        """The index store's first vector stage (settable: a test spies on it)."""
        return self.indexes.vectors.first_stage

    @_vector_candidates.setter
    def _vector_candidates(self, stage: VectorCandidates) -> None:
        self.indexes.vectors.first_stage = stage

    def unembedded(self, limit: int = 256) -> list[tuple[str, Tier, str]]:
        return self.indexes.unembedded(limit)

    def unembedded_count(self) -> int:
        return self.indexes.unembedded_count()

    def set_embeddings(
        self, rows: Sequence[tuple[Tier, str, object]], contents: Sequence[str] | None = None,
        *, model_id: str | None = None,
    ) -> None:  # fmt: skip
        return self.indexes.set_embeddings(rows, contents, model_id=model_id)

    def cached_embeddings(self, model_id: str, hashes: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        return self.indexes.cached_embeddings(model_id, hashes)

    def cache_embeddings(
        self, model_id: str, entries: Sequence[tuple[bytes, object]], keep: int
    ) -> None:
        return self.indexes.cache_embeddings(model_id, entries, keep)

    def record_embedding_error(self, message: str) -> int:
        return self.indexes.record_embedding_error(message)

    def begin_rebuild(self, model_id: str, dim: int) -> bool:
        return self.indexes.begin_rebuild(model_id, dim)

    def rebuild_state(self) -> tuple[str, int] | None:
        return self.indexes.rebuild_state()

    def unstaged_for_rebuild(self, limit: int = 256) -> list[tuple[str, str]]:
        return self.indexes.unstaged_for_rebuild(limit)

    def stage_rebuild(self, rows: Sequence[tuple[str, str, object]]) -> None:
        return self.indexes.stage_rebuild(rows)

    def finish_rebuild(self, embed: Callable[[list[str]], object]) -> int:
        return self.indexes.finish_rebuild(embed)

    # --- statistics ---------------------------------------------------------------------

    @property
    def schema_version(self) -> int:
        """The schema version of the open file."""
        with self._reading() as conn:
            return read_schema_version(conn)

    def get_statistics(self) -> PersistenceStatistics:
        """Row counts (one consistent snapshot) and file sizes."""
        with self._reading() as conn:
            return _statistics(conn, self.path)


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _check_schema(conn: apsw.Connection, path: str, latest: int, read_only: bool) -> None:
    """Refuse a foreign or too-new file before anything writes to it (and, read-only,
    an empty or older one)."""
    version = read_schema_version(conn)
    if version > latest:
        raise SchemaTooNew(version, latest)
    if read_only and 0 < version < latest:
        raise MigrationRequiredError(version, latest, path)
    if version == 0:
        _refuse_unversioned(conn, path, empty_ok=not read_only)


def _check_configured_dim(conn: apsw.Connection, dim: int) -> None:
    """Refuse a file whose embeddings have another size than the store was given."""
    stored = read_meta(conn, EMBEDDING_DIM_KEY)
    if stored is not None and int(stored) != dim:
        raise EmbeddingDimensionError(dim, int(stored))


def _existing_version(path: str, options: ConnectionOptions) -> int:
    """The schema version of the database at ``path`` (read-only: a missing, empty or
    foreign file is refused and left as it was)."""
    probe = connect_read_only(path, options)
    try:
        version = read_schema_version(probe)
        if version == 0:
            _refuse_unversioned(probe, path, empty_ok=False)
        return version
    finally:
        probe.close()


def _refuse_unversioned(conn: apsw.Connection, path: str, *, empty_ok: bool) -> None:
    """A file without a schema version is another application's, or new and empty
    (which only a read-write open may turn into a database)."""
    tables = stats_sql.user_tables(conn)
    if tables:
        names = ", ".join(tables[:5])
        raise ForeignDatabaseError(
            f"{path} is a SQLite database of another application (tables: {names}); "
            "it was left untouched: use a new file"
        )
    if not empty_ok:
        raise NotADatabaseError(
            f"{path} is an empty SQLite file, not a tiered-memory database "
            "(left untouched; nothing is created here)"
        )


def _statistics(conn: apsw.Connection, path: str) -> PersistenceStatistics:
    """Row counts (one consistent snapshot on ``conn``) and the sizes of ``path``."""
    nested = conn.in_transaction
    if not nested:
        conn.execute("BEGIN")
    try:
        counts = [memory_sql.count(conn, tier) for tier in Tier]
        scalar = stats_sql.counts(conn)
        version = read_schema_version(conn)
        page_size = int(conn.pragma("page_size"))
        page_count = int(conn.pragma("page_count"))
        errors, last_error = embedding_errors(conn)
    finally:
        if not nested:
            conn.execute("COMMIT")
    file_size, wal_size = _file_size(path), _file_size(path + "-wal")
    return PersistenceStatistics(
        scratchpad_count=counts[0],
        episodic_count=counts[1],
        semantic_count=counts[2],
        schema_version=version,
        size_bytes=file_size + wal_size,
        backend="sqlite",
        backend_details={
            "file_size_bytes": file_size,
            "wal_size_bytes": wal_size,
            "page_size": page_size,
            "page_count": page_count,
        },
        path=path,
        embedding_errors=errors,
        last_embedding_error=last_error,
        **scalar,
    )


def _share_docstrings(store: type, parts: Sequence[type]) -> None:
    """Give each method the store offers for a part that part's docstring (for help())."""
    for name, member in vars(store).items():
        if callable(member) and member.__doc__ is None:
            for part in parts:
                if callable(found := getattr(part, name.lstrip("_"), None)):
                    member.__doc__ = found.__doc__
                    break


_share_docstrings(SQLiteStore, (MemoryStore, SessionStore, ScheduleStore, IndexStore))


def _expanded(path: Path) -> Path:
    """``~`` and ``~user`` expanded; a ``~name`` of no known user stays as written (as a
    shell leaves it), so opening it says which folder is missing."""
    try:
        return path.expanduser()
    except RuntimeError:  # Python: "Could not determine home directory"
        return path

"""PostgresStore: the memory records on a PostgreSQL server with pgvector.

The composition root of the PostgreSQL backend, the twin of
:class:`persistence.sqlite.SQLiteStore`: it opens the server (migrating the schema in
transactions), owns the facts about the store (``tm_meta``), statistics, transactions and
the change listener (the engine, :class:`PgDatabase`, is :attr:`db`), and holds one part
per record family over the same engine: :attr:`memories`, :attr:`sessions`,
:attr:`schedules` and :attr:`indexes`. Every record method of a part is offered on the
store too. ``scope`` makes an agent-scoped handle (``''``: the whole store).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager

import numpy as np
import psycopg

from migrations import MigrationFailed, SchemaTooNew
from migrations.postgres import LATEST_VERSION, apply_migrations, read_schema_version
from persistence.errors import (
    EmbeddingDimensionError,
    MigrationError,
    MigrationRequiredError,
    NotADatabaseError,
    SchemaTooNewError,
    UnsupportedOperationError,
)
from persistence.index_searches import IndexSearches
from persistence.meta_keys import (
    EMBEDDING_DIM_KEY,
    EMBEDDING_ERRORS_KEY,
    LAST_EMBEDDING_ERROR_KEY,
)
from persistence.postgres.config import StoreConfig
from persistence.postgres.database import Connection, PgDatabase
from persistence.postgres.index_store import HnswVectors, PgIndexStore, build_index_store
from persistence.postgres.memory_store import PgMemoryStore
from persistence.postgres.schedule_store import PgScheduleStore
from persistence.postgres.session_store import PgSessionStore
from persistence.postgres.sql import meta_sql, scope_sql, stats_sql
from persistence.postgres.translate import call_error
from persistence.records import (
    ForgettingRecord,
    Memory,
    PersistenceStatistics,
    PoolSettings,
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
from persistence.validation import (
    DEFAULT_MAX_CONTENT_BYTES,
    require_bool,
    require_choice,
    require_int,
    require_str,
)

log = logging.getLogger("tiered_memory.postgres")

NO_SCOPE_FOR_SUPERUSER = (
    "an agent-scoped handle needs a role that row-level security applies to; this URL's "
    "user is a superuser or has BYPASSRLS and would see every agent: connect as an "
    "ordinary role (see the README, 'Agents on one memory: scoped handles')"
)

KEYWORD_INDEX_BLOCKED = (
    "%s: keyword search reads every keyword row: row-level security binds this role and "
    "PostgreSQL may use the keyword index only with a LEAKPROOF match operator; as a "
    "superuser, run once in this database: "
    + scope_sql.MAKE_MATCH_LEAKPROOF
    + " (see the README, 'Agents on one memory: scoped handles')"
)


class PostgresStore(IndexSearches):
    """Durable storage of every record family on a PostgreSQL server (see the module
    docstring). ``url`` is a libpq URL (``postgresql://user:password@host/db``); it is
    never printed with its password (:attr:`location`). ``read_only=True`` refuses every
    write (and the server enforces it: ``default_transaction_read_only``) and never
    migrates: the schema must be current. ``pool`` sets connection counts and timeouts.
    ``change_check_interval_ms``: how often a read through RAM confirms other processes'
    commits against the version row (announcements usually arrive sooner).
    ``synchronous="NORMAL"`` commits without waiting for the WAL flush
    (``synchronous_commit = off``: a server crash may lose the last fraction of a second of
    acknowledged commits), ``"FULL"`` waits for it.
    """

    indexes: PgIndexStore[HnswVectors]

    def __init__(
        self,
        url: str,
        *,
        scope: str = "",
        read_only: bool = False,
        clock: Callable[[], int] | None = None,
        embedding_dim: int | None = None,
        max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
        pool: PoolSettings | None = None,
        change_check_interval_ms: int = 50,
        synchronous: Synchronous = "NORMAL",
    ) -> None:
        require_str(url, "url")
        require_str(scope, "scope")
        require_bool(read_only, "read_only")
        require_int(embedding_dim, "embedding_dim", allow_none=True, minimum=1)
        require_int(max_content_bytes, "max_content_bytes", minimum=1)
        require_int(change_check_interval_ms, "change_check_interval_ms", minimum=0)
        require_choice(synchronous, "synchronous", ("NORMAL", "FULL"))
        self.db = PgDatabase(url, scope=scope, read_only=read_only, settings=pool,
                             change_check_interval_s=change_check_interval_ms / 1000,
                             synchronous=synchronous)  # fmt: skip
        self.config = StoreConfig(clock or now_ms, max_content_bytes, embedding_dim)
        self.memories = PgMemoryStore(self.db, self.config)
        self.sessions = PgSessionStore(self.db, self.config)
        self.schedules = PgScheduleStore(self.db, self.config)
        self.indexes = build_index_store(self.db, self.config)
        self._reading = self.db.reading

    # --- where and what -------------------------------------------------------------------

    @property
    def location(self) -> str:
        """The server URL without its password."""
        return self.db.location

    @property
    def path(self) -> str:
        """The same as :attr:`location` (a server has no file)."""
        return self.db.location

    @property
    def scope(self) -> str:
        """The agent this handle is scoped to (``''``: the whole store)."""
        return self.db.scope

    @property
    def is_memory(self) -> bool:
        """Always False: the data outlives the process."""
        return False

    @property
    def read_only(self) -> bool:
        return self.db.read_only

    @property
    def clock(self) -> Callable[[], int]:
        return self.config.clock

    @clock.setter
    def clock(self, value: Callable[[], int]) -> None:
        self.config.clock = value

    @property
    def max_content_bytes(self) -> int:
        return self.config.max_content_bytes

    @max_content_bytes.setter
    def max_content_bytes(self, value: int) -> None:
        self.config.max_content_bytes = value

    @property
    def is_open(self) -> bool:
        return self.db.is_open

    @property
    def in_transaction(self) -> bool:
        return self.db.in_transaction

    def __repr__(self) -> str:
        scope = f", scope={self.scope!r}" if self.scope else ""
        return f"PostgresStore({self.location!r}{scope}{', read_only' if self.read_only else ''})"

    # --- lifecycle ------------------------------------------------------------------------

    def open(self) -> PostgresStore:
        """Connect, migrate the schema (read-write) and start the pool and the change
        listener; a second call does nothing."""
        with self.db.lock:
            if self.db.is_open:
                return self
            conn = self.db.connect()
            try:
                self._prepare(conn)
            finally:
                conn.close()
            self.db.start()
            return self

    def _prepare(self, conn: Connection) -> None:
        try:
            version = read_schema_version(conn)
            if version > LATEST_VERSION:
                raise SchemaTooNewError(version, LATEST_VERSION, self.location)
            if self.read_only:
                if version == 0:
                    raise NotADatabaseError(
                        f"{self.location} holds no tiered-memory data (nothing is created "
                        "read-only): open it read-write once"
                    )
                if version < LATEST_VERSION:
                    raise MigrationRequiredError(version, LATEST_VERSION, self.location)
            else:
                apply_migrations(conn, clock=self.config.clock)
            if self.scope and scope_sql.bypasses_row_security(conn):
                raise UnsupportedOperationError(NO_SCOPE_FOR_SUPERUSER)
            if scope_sql.keyword_index_blocked(conn):
                log.info(KEYWORD_INDEX_BLOCKED, self.location)
            dim = self.config.embedding_dim
            stored = meta_sql.read(conn, EMBEDDING_DIM_KEY)
            if dim is not None and stored is not None and int(stored) != dim:
                raise EmbeddingDimensionError(dim, int(stored))
        except SchemaTooNew as exc:
            raise SchemaTooNewError(exc.found, exc.supported, self.location) from None
        except MigrationFailed as exc:
            cause = exc.__cause__
            if isinstance(cause, psycopg.Error):
                raise MigrationError(
                    f"{self.location}: migration {exc.version} failed and was rolled back "
                    f"({call_error(cause, self.db._url)})"
                ) from None
            raise MigrationError(f"{self.location}: {exc}") from None
        except psycopg.Error as exc:
            raise call_error(exc, self.db._url) from None

    @classmethod
    def migrate(cls, url: str) -> tuple[int, int]:
        """Bring an existing tiered-memory database to the current schema: ``(version
        before, after)``. A database without the library's tables is refused as it was."""
        store = cls(url)
        conn = store.db.connect()
        try:
            before = read_schema_version(conn)
        except psycopg.Error as exc:
            raise call_error(exc, store.db._url) from None
        finally:
            conn.close()
        if before == 0:
            raise NotADatabaseError(
                f"{store.location} holds no tiered-memory data: nothing to migrate (open it "
                "with the library to create it)"
            )
        with store:
            return before, store.schema_version

    def close(self) -> None:
        """Close every connection; twice is harmless."""
        self.db.close()

    def __enter__(self) -> PostgresStore:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        """The schema version of the database."""
        with self._reading() as conn:
            return read_schema_version(conn)

    # --- the engine's API, offered on the store ---------------------------------------------

    def transaction(self, *, join: bool = False) -> AbstractContextManager[Connection]:
        """Group writes in one transaction (see :meth:`PgDatabase.transaction`)."""
        return self.db.transaction(join=join)

    def after_commit(self, callback: Callable[[], None]) -> None:
        self.db.after_commit(callback)

    def after_rollback(self, callback: Callable[[], None]) -> None:
        self.db.after_rollback(callback)

    def on_external_change(self, callback: Callable[[], None]) -> None:
        self.db.on_external_change(callback)

    def check_external_changes(self, wait_s: float = 0.05) -> bool:
        return self.db.check_external_changes(wait_s)

    def require_writable(self) -> None:
        self.db.require_writable()

    def read_connection(self) -> AbstractContextManager[Connection]:
        """A connection for reads (the transaction's inside one)."""
        return self.db.reading()

    def snapshot(self) -> AbstractContextManager[Connection]:
        """Reads inside the block see one consistent snapshot (``REPEATABLE READ READ
        ONLY`` on a connection of its own; inside this thread's transaction, that
        transaction's view): :meth:`PgDatabase.snapshot`."""
        return self.db.snapshot()

    # --- facts about the store ----------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """One fact about the store (``tm_meta``), or ``None``."""
        with self._reading() as conn:
            return meta_sql.read(conn, key)

    def set_meta(self, key: str, value: str | None) -> None:
        """Record (or with ``None`` forget) one fact about the store."""
        require_str(key, "key", allow_empty=False)
        with self.transaction(join=True) as conn:
            meta_sql.write(conn, key, value)

    def increment_meta(self, key: str, by: int = 1) -> int:
        """Add ``by`` to a counter, atomically (one ``UPSERT``); returns the new value."""
        require_str(key, "key", allow_empty=False)
        require_int(by, "by")
        with self.transaction(join=True) as conn:
            return meta_sql.add(conn, key, by)

    def get_statistics(self) -> PersistenceStatistics:
        """Row counts (one snapshot) and sizes: ``size_bytes`` is what the library's
        tables and their indexes take; ``backend_details`` adds the whole database's
        size (``database_size_bytes``)."""
        with self.snapshot() as conn:
            counts = stats_sql.counts(conn)
            sizes = stats_sql.sizes(conn)
            version = read_schema_version(conn)
            errors = meta_sql.read(conn, EMBEDDING_ERRORS_KEY)
            last_error = meta_sql.read(conn, LAST_EMBEDDING_ERROR_KEY)
        return PersistenceStatistics(
            **counts,
            schema_version=version,
            size_bytes=sizes["tables_size_bytes"],
            backend="postgresql",
            backend_details=sizes,
            path=self.location,
            embedding_errors=int(errors or 0),
            last_embedding_error=last_error,
        )

    # --- the parts' methods, offered on the store (docstrings: the part's) -------------------

    def check_content_size(self, content: str, what: str = "content") -> None:
        return self.memories.check_content_size(content, what)

    def put_memory(self, memory: Memory) -> Memory:
        return self.memories.put_memory(memory)

    def insert_memories(
        self, memories: Sequence[Memory], schedules: Sequence[RepetitionSchedule] = ()
    ) -> list[Memory]:
        return self.memories.insert_memories(memories, schedules)

    def remember_new(
        self,
        memory: Memory,
        schedule: RepetitionSchedule,
        *,
        touch_at: int | None,
        dedup: bool,
    ) -> Memory | None:
        return self.memories.remember_new(memory, schedule, touch_at=touch_at, dedup=dedup)

    def get_memory(self, memory_id: str) -> Memory | None:
        return self.memories.get_memory(memory_id)

    def get_memories(self, memory_ids: Sequence[str]) -> dict[str, Memory]:
        return self.memories.get_memories(memory_ids)

    def query(self, tier: Tier, options: QueryOptions | None = None) -> list[Memory]:
        return self.memories.query(tier, options)

    def count(self, tier: Tier) -> int:
        return self.memories.count(tier)

    def tag_counts(self, prefix: str) -> dict[str, int]:
        return self.memories.tag_counts(prefix)

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

    # the reference design's per-tier API (PgMemoryStore)

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

    # sessions (PgSessionStore)

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

    # schedules (PgScheduleStore)

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
        self,
        tier: Tier,
        updates: Sequence[tuple[str, float]],
        forgotten: Sequence[tuple[str, float]],
        reason: str,
    ) -> None:
        return self.schedules.apply_decay(tier, updates, forgotten, reason)

    def get_forgetting_log(self, memory_id: str | None = None) -> list[ForgettingRecord]:
        return self.schedules.get_forgetting_log(memory_id)

    # recall's embeddings (PgIndexStore; its searches: IndexSearches)

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

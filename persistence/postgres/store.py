"""PostgresStore: the memory records on a PostgreSQL server with pgvector.

The composition root of the PostgreSQL backend, the twin of
:class:`persistence.sqlite.SQLiteStore`: it opens the server (migrating the schema in
transactions), owns the facts about the store (``tm_meta``) and statistics (the engine,
:class:`PgDatabase`, is :attr:`engine`: the transactions, their hooks and the change
listener are its), and holds one part per record family over the same engine:
:attr:`memories`, :attr:`sessions`, :attr:`schedules` and :attr:`indexes`; callers use the
parts (``store.memories.get_memory``), and the reference design's per-tier methods are
:class:`~persistence.stores.reference_api.ReferenceTierAPI`. ``scope`` makes an
agent-scoped handle (``''``: the whole store).
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg
from psycopg.errors import InsufficientPrivilege

from migrations import MigrationFailed, SchemaTooNew
from migrations.postgres import LATEST_VERSION, apply_migrations, read_schema_version
from persistence.errors import (
    EmbeddingDimensionError,
    ExtensionMissingError,
    MigrationError,
    MigrationRequiredError,
    NotADatabaseError,
    SchemaTooNewError,
    UnsupportedOperationError,
)
from persistence.meta_keys import (
    EMBEDDING_DIM_KEY,
    EMBEDDING_ERRORS_KEY,
    LAST_EMBEDDING_ERROR_KEY,
)
from persistence.postgres.database import Connection, PgDatabase
from persistence.postgres.index_store import HnswVectors, build_index_store
from persistence.postgres.memory_store import server_memory_store
from persistence.postgres.schedule_store import server_schedule_store
from persistence.postgres.session_store import server_session_store
from persistence.postgres.sql import meta_sql, scope_sql, stats_sql
from persistence.records import (
    PersistenceStatistics,
    PoolSettings,
    Synchronous,
    now_ms,
)
from persistence.statements import row, run, value
from persistence.stores.config import ConfiguredStore, StoreConfig
from persistence.stores.facts import MetaSql, StoreFacts
from persistence.stores.indexes import IndexStore
from persistence.stores.memories import MemoryStore
from persistence.stores.reference_api import ReferenceTierAPI
from persistence.stores.schedules import ScheduleStore
from persistence.stores.scope import Scope
from persistence.stores.sessions import SessionStore
from persistence.trace_report import TraceCallback
from persistence.validation import (
    DEFAULT_MAX_CONTENT_BYTES,
    require_bool,
    require_choice,
    require_int,
    require_str,
)

NO_SCOPE_FOR_SUPERUSER = (
    "an agent-scoped handle needs a role that row-level security applies to; this URL's "
    "user is a superuser or has BYPASSRLS and would see every agent: connect as an "
    "ordinary role (see the README, 'Agents on one memory: scoped handles')"
)

VECTOR_NEEDS_SUPERUSER = (
    "%s: the database has no pgvector extension and this role may not create it (only a "
    "superuser may): a superuser (your DBA) runs once, connected to this database: "
    + scope_sql.CREATE_VECTOR
    + "; then this role opens it and creates the library's tables itself (see the "
    "README, 'A file or a PostgreSQL server')"
)


def _lacks_vector(conn: Connection) -> bool:
    """True if the database is known to have no pgvector extension (False when that
    cannot be read: the migration's own error is reported then)."""
    try:
        return not value(conn, scope_sql.HAS_VECTOR)
    except psycopg.Error:
        return False


class PostgresStore(ConfiguredStore, StoreFacts, ReferenceTierAPI):
    """Durable storage of every record family on a PostgreSQL server (see the module
    docstring). ``url`` is a libpq URL (``postgresql://user:password@host/db``); it is
    never printed with its password (:attr:`location`). ``read_only=True`` refuses every
    write (and the server enforces it: ``default_transaction_read_only``) and never
    migrates: the schema must be current. ``pool`` sets connection counts and timeouts.
    ``change_check_interval_ms``: how often a read through RAM confirms other processes'
    commits against the version row (announcements usually arrive sooner).
    ``synchronous="NORMAL"`` commits without waiting for the WAL flush
    (``synchronous_commit = off``: a server crash may lose the last fraction of a second of
    acknowledged commits), ``"FULL"`` waits for it. ``trace`` is told of every statement
    run (:mod:`~persistence.postgres.tracing`).
    """

    engine: PgDatabase
    memories: MemoryStore
    sessions: SessionStore
    schedules: ScheduleStore
    indexes: IndexStore[HnswVectors]
    meta_sql: MetaSql = meta_sql

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
        trace: TraceCallback | None = None,
    ) -> None:
        require_str(url, "url")
        require_str(scope, "scope")
        require_bool(read_only, "read_only")
        require_int(embedding_dim, "embedding_dim", allow_none=True, minimum=1)
        require_int(max_content_bytes, "max_content_bytes", minimum=1)
        require_int(change_check_interval_ms, "change_check_interval_ms", minimum=0)
        require_choice(synchronous, "synchronous", ("NORMAL", "FULL"))
        self.engine = PgDatabase(url, scope=scope, read_only=read_only, settings=pool,
                                 change_check_interval_s=change_check_interval_ms / 1000,
                                 synchronous=synchronous, trace=trace)  # fmt: skip
        self.config = StoreConfig(clock or now_ms, max_content_bytes, embedding_dim,
                                  Scope.of(scope))  # fmt: skip
        self.memories = server_memory_store(self.engine, self.config)
        self.sessions = server_session_store(self.engine, self.config)
        self.schedules = server_schedule_store(self.engine, self.config)
        self.indexes = build_index_store(self.engine, self.config)
        self.migrations_applied: tuple[int, ...] = ()  # by the last open (telemetry tells)

    # --- where and what -------------------------------------------------------------------

    @property
    def location(self) -> str:
        """The server URL without its password."""
        return self.engine.location

    @property
    def path(self) -> str:
        """The same as :attr:`location` (a server has no file)."""
        return self.engine.location

    @property
    def scope(self) -> str:
        """The agent this handle is scoped to (``''``: the whole store)."""
        return self.engine.scope

    @property
    def is_memory(self) -> bool:
        """Always False: the data outlives the process."""
        return False

    @property
    def read_only(self) -> bool:
        return self.engine.read_only

    rows_per_trip = 60
    """A round trip to the server costs more than the rows it brings: recall's early
    stop needed about three batches of 20 at 100k memories (k=10), so it fetches its
    candidates in batches of at least this many."""

    def __repr__(self) -> str:
        scope = f", scope={self.scope!r}" if self.scope else ""
        return f"PostgresStore({self.location!r}{scope}{', read_only' if self.read_only else ''})"

    # --- lifecycle ------------------------------------------------------------------------

    def open(self) -> PostgresStore:
        """Connect, migrate the schema (read-write) and start the pool and the change
        listener; a second call does nothing."""
        with self.engine.lock:
            if self.engine.is_open:
                return self
            conn = self.engine.connect()
            try:
                self._prepare(conn)
            finally:
                conn.close()
            self.engine.start()
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
                self.migrations_applied = tuple(apply_migrations(conn, clock=self.config.clock))
            if self.scope and value(conn, scope_sql.BYPASSES_RLS):
                raise UnsupportedOperationError(NO_SCOPE_FOR_SUPERUSER)
            dim = self.config.embedding_dim
            stored = value(conn, meta_sql.read(EMBEDDING_DIM_KEY))
            if dim is not None and stored is not None and int(stored) != dim:
                raise EmbeddingDimensionError(dim, int(stored))
        except SchemaTooNew as exc:
            raise SchemaTooNewError(exc.found, exc.supported, self.location) from None
        except MigrationFailed as exc:
            cause = exc.__cause__
            if isinstance(cause, InsufficientPrivilege) and _lacks_vector(conn):
                raise ExtensionMissingError(VECTOR_NEEDS_SUPERUSER % self.location) from None
            if isinstance(cause, psycopg.Error):
                raise MigrationError(
                    f"{self.location}: migration {exc.version} failed and was rolled back "
                    f"({self.engine.error(cause)})"
                ) from None
            raise MigrationError(f"{self.location}: {exc}") from None
        except psycopg.Error as exc:
            raise self.engine.error(exc) from None

    @classmethod
    def migrate(cls, url: str) -> tuple[int, int]:
        """Bring an existing tiered-memory database to the current schema: ``(version
        before, after)``. A database without the library's tables is refused as it was."""
        store = cls(url)
        conn = store.engine.connect()
        try:
            before = read_schema_version(conn)
        except psycopg.Error as exc:
            raise store.engine.error(exc) from None
        finally:
            conn.close()
        if before == 0:
            raise NotADatabaseError(
                f"{store.location} holds no tiered-memory data: nothing to migrate (open it "
                "with the library to create it)"
            )
        with store:
            return before, store.schema_version

    def __enter__(self) -> PostgresStore:
        return self.open()

    @property
    def schema_version(self) -> int:
        """The schema version of the database."""
        with self.engine.reading() as conn:
            return read_schema_version(conn)

    # --- facts about the store ----------------------------------------------------------------

    def set_meta(self, key: str, value: str | None) -> None:
        """Record (or with ``None`` forget) one fact about the store."""
        require_str(key, "key", allow_empty=False)
        with self.transaction(join=True) as conn:
            run(conn, meta_sql.write(key, value))

    def get_statistics(self) -> PersistenceStatistics:
        """Row counts (one snapshot) and sizes: ``size_bytes`` is what the library's
        tables and their indexes take; ``backend_details`` adds the whole database's
        size (``database_size_bytes``)."""
        with self.engine.snapshot() as conn:
            counts = stats_sql.to_counts(row(conn, stats_sql.COUNT_ALL))
            sizes = stats_sql.to_sizes(row(conn, stats_sql.SIZES))
            version = read_schema_version(conn)
            errors = value(conn, meta_sql.read(EMBEDDING_ERRORS_KEY))
            last_error = value(conn, meta_sql.read(LAST_EMBEDDING_ERROR_KEY))
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

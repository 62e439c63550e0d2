"""SQLiteStore: the durable source of truth, one WAL-mode SQLite file driven by APSW.

The composition root of the record families: it opens, migrates, rekeys and closes the
file (the engine, :class:`~persistence.sqlite.database.Database`, is :attr:`engine`: the
transactions, their hooks and the connections are its), owns the facts about the file
(``store_meta``) and statistics, and holds one part per record family over the same
engine: :attr:`memories` (:class:`MemoryStore`), :attr:`sessions` (:class:`SessionStore`),
:attr:`schedules` (:class:`ScheduleStore`) and :attr:`indexes` (:class:`IndexStore`).
Callers use the parts (``store.memories.put_memory(...)``); the reference design's
per-tier methods (``put_episodic``, ...) are
:class:`~persistence.stores.reference_api.ReferenceTierAPI`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import apsw

from migrations.sqlite import (
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
from persistence.records import (
    Key,
    PersistenceStatistics,
    Synchronous,
    Tier,
    now_ms,
)
from persistence.sqlite.cell_vectors import CellVectors
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
    VECTOR_INDEXES,
    IndexStore,
    MirrorVectors,
    build_index_store,
)
from persistence.sqlite.keyword_index import KeywordIndex
from persistence.sqlite.log import route_sqlite_log
from persistence.sqlite.memory_store import file_memory_store
from persistence.sqlite.schedule_store import file_schedule_store
from persistence.sqlite.sql import memory_sql, meta_sql, session_sql, stats_sql
from persistence.sqlite.sql.meta_sql import (
    EMBEDDING_DIM_KEY,
    EMBEDDING_ERRORS_KEY,
    LAST_EMBEDDING_ERROR_KEY,
)
from persistence.sqlite.tracing import TraceCallback
from persistence.sqlite.translate import storage_errors
from persistence.sqlite.vector_mirror import RESORT_AFTER
from persistence.statements import column, run, value
from persistence.stores.config import ConfiguredStore, StoreConfig
from persistence.stores.facts import MetaSql, StoreFacts
from persistence.stores.memories import MemoryStore
from persistence.stores.reference_api import ReferenceTierAPI
from persistence.stores.schedules import ScheduleStore
from persistence.stores.scope import Scope
from persistence.stores.sessions import SessionStore
from persistence.validation import (
    DEFAULT_MAX_CONTENT_BYTES,
    require_bool,
    require_choice,
    require_int,
    require_str,
)

logger = logging.getLogger("tiered_memory")


class SQLiteStore(ConfiguredStore, StoreFacts, ReferenceTierAPI):
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
    how many new ids the vector copy takes before it re-sorts. ``vector_index`` picks
    the vector search: ``"cells"`` (the default), the cells kept in the file (nothing
    per memory in RAM, see :mod:`~persistence.sqlite.cell_vectors`); ``"ram"``, the RAM
    copy of every vector's code. ``trace`` is told of each
    statement run (:mod:`~persistence.sqlite.tracing`). The engine is :attr:`engine`:
    the transactions' hooks, other processes' commits and the connections are asked of
    it (``store.engine.after_commit(...)``). The index part's settings live on it
    (``store.indexes.exact_scan_max``, its vector copy ``store.indexes.vectors`` and
    first stage ``store.indexes.vectors.first_stage``).
    """

    engine: Database
    memories: MemoryStore
    sessions: SessionStore
    schedules: ScheduleStore
    indexes: IndexStore[MirrorVectors | CellVectors]
    meta_sql: MetaSql = meta_sql

    rows_per_trip = 20
    """A read in-process costs microseconds: recall's batches are a little over its k."""

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
        scope: str = "",
        vector_index: str = "cells",
    ) -> None:
        if not isinstance(path, str | os.PathLike):
            raise InvalidTypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        require_int(embedding_dim, "embedding_dim", allow_none=True, minimum=1)
        require_int(max_content_bytes, "max_content_bytes", minimum=1)
        require_str(scope, "scope")
        require_choice(vector_index, "vector_index", VECTOR_INDEXES)
        self.config = StoreConfig(clock or now_ms, max_content_bytes, embedding_dim,
                                  Scope.of(scope), vector_index)  # fmt: skip
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
        self.engine = Database(self.path, self.options, read_only=read_only, trace=trace,
                               change_check_interval_ms=change_check_interval_ms,
                               reset_after_changes=reset_after_changes)  # fmt: skip
        self._migrations = list(migrations) if migrations is not None else None
        self.migrations_applied: tuple[int, ...] = ()  # by the last open (telemetry tells)
        self.memories = file_memory_store(self.engine, self.config)
        self.sessions = SessionStore(self.engine, session_sql, self.config)
        self.schedules = file_schedule_store(self.engine, self.config)
        self.keywords = KeywordIndex(self.engine, idle_merge_s)  # commit work, idle merges
        require_int(vector_resort_after, "vector_resort_after", minimum=1)
        self.indexes = build_index_store(
            self.engine, self.path, self.config, self.keywords, vector_resort_after
        )
        self.engine.after_exclusive(self.indexes.vectors.reset)

    # --- lifecycle ----------------------------------------------------------------------

    @property
    def location(self) -> str:  # where the data lives, safe to print: the path (no key)
        return self.path

    @property
    def is_memory(self) -> bool:
        """True for an in-memory store (nothing on disk)."""
        return self.path == MEMORY_PATH

    @property
    def _writer(self) -> apsw.Connection | None:
        return self.engine.writer

    @property
    def _readers(self) -> list[apsw.Connection]:
        return self.engine.readers

    def open(self) -> SQLiteStore:
        """Open (creating or migrating) the file; a second call does nothing.

        With ``read_only`` the file must exist at the current schema version: one written
        by an older version raises :class:`MigrationRequiredError`, as nothing migrates it.
        """
        route_sqlite_log()
        with (
            self.engine.lock,
            storage_errors(f"opening {self.path}", self.engine.place, opening=True),
        ):
            try:
                opened = self.engine.open(self._prepare)
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
            conn = self.engine.require_open()
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
            self.engine.close()
        except Exception as exc:  # the open's error is the one to report
            logger.debug("closing %s after a failed open: %s", self.path, exc)

    def _prepare(self, conn: apsw.Connection) -> None:
        """Check (and, read-write, migrate) a new connection's file before it is used."""
        latest = self._migrations[-1].VERSION if self._migrations else LATEST_VERSION
        _check_schema(conn, self.path, latest, self.read_only)
        if not self.read_only:
            connection_wal(conn)
            self.migrations_applied = tuple(apply_migrations(conn, self._migrations, self.clock))
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
        with storage_errors(f"changing the key of {self.path}", self.engine.place):
            self.engine.rekey(new)
        self.options = self.engine.options

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

    def __enter__(self) -> SQLiteStore:
        return self.open()

    # --- facts about the file -------------------------------------------------------------

    def set_meta(self, key: str, value: str | None) -> None:
        """Record (or with ``None`` forget) one fact about the file."""
        with self.transaction() as conn:
            run(conn, meta_sql.write(key, value))

    # --- statistics ---------------------------------------------------------------------

    @property
    def schema_version(self) -> int:
        """The schema version of the open file."""
        with self.engine.reading() as conn:
            return read_schema_version(conn)

    def get_statistics(self) -> PersistenceStatistics:
        """Row counts (one consistent snapshot) and file sizes."""
        with self.engine.snapshot() as conn:
            return _statistics(conn, self.path, self.config.scope)


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
    stored = value(conn, meta_sql.read(EMBEDDING_DIM_KEY))
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
    tables = [str(name) for name in column(conn, stats_sql.USER_TABLES)]
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


def _statistics(conn: apsw.Connection, path: str, scope: Scope) -> PersistenceStatistics:
    """Row counts (of ``scope``'s rows, in the caller's snapshot on ``conn``) and the
    sizes of ``path``."""
    counts = [int(value(conn, memory_sql.count(tier, scope))) for tier in Tier]
    scalar = {name: int(value(conn, count)) for name, count in stats_sql.counts(scope).items()}
    version = read_schema_version(conn)
    page_size = int(value(conn, stats_sql.PAGE_SIZE))
    page_count = int(value(conn, stats_sql.PAGE_COUNT))
    errors = value(conn, meta_sql.read(EMBEDDING_ERRORS_KEY))
    last_error = value(conn, meta_sql.read(LAST_EMBEDDING_ERROR_KEY))
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
        embedding_errors=int(errors) if errors and errors.isdigit() else 0,
        last_embedding_error=last_error,
        **scalar,
    )


def _expanded(path: Path) -> Path:
    """``~`` and ``~user`` expanded; a ``~name`` of no known user stays as written (as a
    shell leaves it), so opening it says which folder is missing."""
    try:
        return path.expanduser()
    except RuntimeError:  # Python: "Could not determine home directory"
        return path

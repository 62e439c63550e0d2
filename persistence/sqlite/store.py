"""SQLiteStore: the durable source of truth, one WAL-mode SQLite file driven by APSW.

The record API (memories, sessions, transcripts, schedules, promotion and forgetting
logs, recall indexes, statistics) over :class:`~persistence.database.Database`, the
engine that owns connections, transactions, hooks and watching other processes. Each
method validates its input, then runs the SQL of its table family's ``*_sql`` module
in one transaction (durable when it returns) or on this thread's read connection.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any

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
    DuplicateMemoryError,
    EmbeddingDimensionError,
    EmbeddingModelMismatchError,
    EncryptionKeyError,
    ForeignDatabaseError,
    InvalidInputError,
    InvalidPromotionError,
    InvalidTypeError,
    MemoryNotFoundError,
    MigrationError,
    MigrationRequiredError,
    NotADatabaseError,
    SchemaTooNewError,
    SessionNotFoundError,
    StorageFullError,
    TieredMemoryError,
)
from persistence.records import (
    ForgettingRecord,
    Memory,
    MemoryFilter,
    PersistenceStatistics,
    PromotionRecord,
    QueryOptions,
    RepetitionSchedule,
    RetentionInput,
    SessionState,
    Synchronous,
    Tier,
    TranscriptEntry,
    content_hash,
    new_id,
    now_ms,
)
from persistence.sqlite.codecs import encode_embedding
from persistence.sqlite.connection import (
    MEMORY_PATH,
    ConnectionOptions,
    connect_read_only,
    connection_optimize,
    connection_wal,
    query_all,
    query_value,
    read_snapshot,
)
from persistence.sqlite.database import RESET_AFTER_CHANGES, Database
from persistence.sqlite.encryption import Key, key_bytes, require_cipher
from persistence.sqlite.keyword_index import KeywordIndex
from persistence.sqlite.log import route_sqlite_log
from persistence.sqlite.sql import (
    conversation_sql,
    dedup_sql,
    embedding_cache_sql,
    forgetting_sql,
    index_sql,
    memory_sql,
    rebuild_sql,
    schedule_sql,
    session_sql,
)
from persistence.sqlite.sql.meta_sql import (
    EMBEDDING_DIM_KEY,
    EMBEDDING_MODEL_KEY,
    add_to_counter,
    embedding_errors,
    read_meta,
    record_embedding_error,
    write_meta,
)
from persistence.sqlite.translate import storage_errors
from persistence.sqlite.vector_mirror import RESORT_AFTER, VectorMirror
from persistence.validation import (
    DEFAULT_MAX_CONTENT_BYTES,
    parse_tier,
    require_bool,
    require_content_size,
    require_int,
    require_str,
    require_unit_float,
    validate_filter,
    validate_memory,
    validate_schedule,
    validate_session,
    validate_transcript,
)

_ANY_TIER, _ = memory_sql.fetch_any_query("")  # the statement of every uncached get
_any_tier_memory = memory_sql.any_tier_memory

VECTOR_OVERSAMPLE = 2
VECTOR_MIN_CANDIDATES = 128
"""Re-ranked exactly at least: the RAM copy's second stage orders them closely enough."""
EXACT_SCAN_MAX = 4096
"""A filtered vector search compares every accepted memory exactly up to this many."""


class SQLiteStore:
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

    Tunables (tests change them; defaults suit everyone else): ``idle_merge_s``, how long
    the writer rests before the keyword index is merged in the background (``None``:
    ``$TIERED_MEMORY_IDLE_MERGE_S``, else 0.05; see keyword_index.py);
    ``reset_after_changes``, the size of a transaction after which the writer's schema
    is reset (see :data:`~persistence.sqlite.database.RESET_AFTER_CHANGES`);
    ``vector_resort_after``, how many new ids the vector mirror takes before it re-sorts.

    The engine is :attr:`db`; :meth:`transaction`, the hooks and the connections are
    its, offered here too.
    """

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
    ) -> None:
        if not isinstance(path, str | os.PathLike):
            raise InvalidTypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        require_int(embedding_dim, "embedding_dim", allow_none=True, minimum=1)
        require_int(max_content_bytes, "max_content_bytes", minimum=1)
        self.max_content_bytes = max_content_bytes
        raw = os.fspath(path)
        self.path = raw if raw == MEMORY_PATH else str(Path(raw).expanduser().absolute())
        require_bool(read_only, "read_only")
        self.read_only = read_only
        self.options = ConnectionOptions(
            synchronous, busy_timeout_ms, wal_autocheckpoint, key_bytes(key)
        )
        if key is not None and self.path == MEMORY_PATH:
            raise InvalidInputError("an in-memory store has no file to encrypt: omit key")
        if key is not None:
            require_cipher()  # before anything is created
        self.db = Database(
            self.path,
            self.options,
            read_only=read_only,
            change_check_interval_ms=change_check_interval_ms,
            reset_after_changes=reset_after_changes,
        )
        self.embedding_dim = embedding_dim
        self.clock: Callable[[], int] = clock or now_ms
        self._migrations = list(migrations) if migrations is not None else None
        require_int(vector_resort_after, "vector_resort_after", minimum=1)
        self._vectors = VectorMirror(vector_resort_after)
        self.exact_scan_max = EXACT_SCAN_MAX
        self.keywords = KeywordIndex(self.db, idle_merge_s)
        """The keyword index's commit work and idle merges (keyword_index.py)."""
        self.db.after_exclusive(self._vectors.reset)
        self._reading = self.db.reading  # this thread's read connection

    # --- lifecycle ----------------------------------------------------------------------

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
        with self.db.lock, storage_errors(f"opening {self.path}", self.db.place):
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
            if read_meta(conn, EMBEDDING_DIM_KEY) and not index_sql.has_vector_index(conn):
                with self.transaction() as tx:
                    index_sql.ensure_vector_index(tx)
            if self.keywords.opened(conn):
                with self.transaction():  # written without the store: caught up on commit
                    pass
            return self

    def _prepare(self, conn: apsw.Connection) -> None:
        """Check (and, read-write, migrate) a new connection's file before it is used."""
        self._check_schema(conn)
        if not self.read_only:
            connection_wal(conn)
            apply_migrations(conn, self._migrations, self.clock)
        if self.embedding_dim is not None:
            self._check_configured_dim(conn)
        if not self.read_only:
            connection_optimize(conn, self.options, at_open=True)

    def _check_schema(self, conn: apsw.Connection) -> None:
        """Refuse a foreign or too-new file before anything writes to it (and, read-only,
        an empty or older one)."""
        version = read_schema_version(conn)
        latest = self._migrations[-1].VERSION if self._migrations else LATEST_VERSION
        if version > latest:
            raise SchemaTooNew(version, latest)
        if self.read_only and 0 < version < latest:
            raise MigrationRequiredError(version, latest, self.path)
        if version == 0:
            self._refuse_unversioned(conn, empty_ok=not self.read_only)

    def _refuse_unversioned(self, conn: apsw.Connection, *, empty_ok: bool) -> None:
        """A file without a schema version is another application's, or new and empty
        (which only a read-write open may turn into a database)."""
        tables = query_all(
            conn,
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
        )
        if tables:
            names = ", ".join(sorted(t[0] for t in tables)[:5])
            raise ForeignDatabaseError(
                f"{self.path} is a SQLite database of another application (tables: {names}); "
                "it was left untouched: use a new file"
            )
        if not empty_ok:
            raise NotADatabaseError(
                f"{self.path} is an empty SQLite file, not a tiered-memory database "
                "(left untouched; nothing is created here)"
            )

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
            probe = connect_read_only(store.path, store.options)
            try:
                before = read_schema_version(probe)
                if before == 0:
                    store._refuse_unversioned(probe, empty_ok=False)
            finally:
                probe.close()
            with store:
                return before, store.schema_version

    def _check_configured_dim(self, conn: apsw.Connection) -> None:
        stored = read_meta(conn, EMBEDDING_DIM_KEY)
        if stored is not None and int(stored) != self.embedding_dim:
            assert self.embedding_dim is not None
            raise EmbeddingDimensionError(self.embedding_dim, int(stored))

    def close(self) -> None:
        """Refresh planner statistics, then close every connection; twice is harmless.

        Waits for writes and reads under way in other threads; refused inside this
        thread's own :meth:`transaction` (finish it first). A read-only store changes
        nothing (it removes the empty -wal and -shm files its open created, if it can).
        """
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
        return self.db.check_external_changes(wait_s)

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

    # --- memories -------------------------------------------------------------------------

    def _write_memory(self, memory: Memory, tier: Tier) -> Memory:
        validate_memory(memory)
        if memory.tier is not tier:
            raise InvalidInputError(f"memory {memory.id} is {memory.tier.value}, not {tier.value}")
        oversized = self._oversized(memory.content)
        blob = None if memory.embedding is None else encode_embedding(memory.embedding, None)
        normalized = replace(memory, tags=tuple(dict.fromkeys(memory.tags)))
        row = memory_sql.encode_row(normalized, blob)
        stored = memory_sql.as_stored(normalized, row)
        with self.transaction() as conn:
            if oversized is not None and memory_sql.content_of(conn, memory.id) != memory.content:
                raise oversized
            other = memory_sql.tier_of(conn, memory.id)
            if other is not None and other is not tier:
                raise DuplicateMemoryError(
                    f"memory {memory.id} already lives in {other.value}; promote it instead"
                )
            if blob is not None:
                self._check_dim(conn, len(blob) // 4)
            memory_sql.upsert(conn, stored, row)
        return stored

    def _oversized(self, content: str) -> InvalidInputError | None:
        """The error for content over ``max_content_bytes`` (``None`` if it fits)."""
        try:
            require_content_size(content, "memory.content", self.max_content_bytes)
        except InvalidInputError as exc:
            return exc
        return None

    def check_content_size(self, content: str, what: str = "content") -> None:
        """Refuse new content over ``max_content_bytes`` before any work is done on it."""
        require_content_size(content, what, self.max_content_bytes)

    def _check_dim(self, conn: apsw.Connection, dim: int) -> None:
        """The first embedding fixes the file's dimension; later ones must match it."""
        stored = read_meta(conn, EMBEDDING_DIM_KEY)
        expected = int(stored) if stored is not None else self.embedding_dim
        if expected is not None and dim != expected:
            raise EmbeddingDimensionError(dim, expected)
        if stored is None:
            write_meta(conn, EMBEDDING_DIM_KEY, str(dim))
            index_sql.ensure_vector_index(conn)

    def _get(self, tier: Tier, memory_id: str) -> Memory | None:
        require_str(memory_id, "memory_id")
        with self._reading() as conn:
            return memory_sql.fetch(conn, tier, memory_id)

    def _delete(self, tier: Tier, memory_id: str) -> bool:
        require_str(memory_id, "memory_id")
        with self.transaction() as conn:
            return self._forget(conn, tier, memory_id, None, "deleted")

    def _query(self, tier: Tier, options: QueryOptions | None) -> list[Memory]:
        options = options or QueryOptions()
        with self._reading() as conn:  # memory_sql.query validates the options
            return memory_sql.query(conn, tier, options)

    def put_memory(self, memory: Memory) -> Memory:
        """Insert or update ``memory`` in the tier it names (a scratchpad one needs a key)."""
        validate_memory(memory)
        if memory.tier is Tier.SCRATCHPAD:
            require_str(memory.key, "memory.key of a scratchpad memory", allow_empty=False)
        return self._write_memory(memory, memory.tier)

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
        with self.transaction() as conn:
            for dim in sorted(sizes) if sizes else ():
                self._check_dim(conn, dim)
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

    def query(self, tier: Tier, options: QueryOptions | None = None) -> list[Memory]:
        """Memories of ``tier`` matching every filter set in ``options``."""
        return self._query(parse_tier(tier, "tier"), options)

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
        with self.transaction() as conn:
            tier = memory_sql.tier_of(conn, memory_id)
            if tier is not None:
                self._forget(conn, tier, memory_id, retention, reason)
            return tier

    def _forget(
        self,
        conn: apsw.Connection,
        tier: Tier,
        memory_id: str,
        retention: float | None,
        reason: str,
    ) -> bool:
        if not memory_sql.delete(conn, tier, memory_id):
            return False
        record = ForgettingRecord(memory_id, tier, self.clock(), retention, reason)
        forgetting_sql.log_forgotten(conn, record)
        return True

    def put_scratchpad(self, key: str, memory: Memory) -> Memory:
        """Store ``memory`` under ``key`` (replacing what the key held); return it as stored."""
        require_str(key, "key", allow_empty=False)
        return self._write_memory(replace(memory, key=key), Tier.SCRATCHPAD)

    def get_scratchpad(self, key: str) -> Memory | None:
        """The scratchpad memory under ``key``, or ``None``."""
        require_str(key, "key")
        with self._reading() as conn:
            return memory_sql.fetch_by_key(conn, key)

    def delete_scratchpad(self, key: str) -> bool:
        """Delete the scratchpad entry under ``key``; True if there was one."""
        require_str(key, "key")
        with self.transaction() as conn:
            memory = memory_sql.fetch_by_key(conn, key)
            return memory is not None and memory_sql.delete(conn, Tier.SCRATCHPAD, memory.id)

    def get_all_scratchpad(self) -> list[Memory]:
        """Every scratchpad entry, least recently written first."""
        with self._reading() as conn:
            return memory_sql.fetch_all(conn, Tier.SCRATCHPAD)

    def clear_scratchpad(self) -> int:
        """Delete every scratchpad entry; return how many."""
        with self.transaction() as conn:
            return memory_sql.clear(conn, Tier.SCRATCHPAD)

    def put_episodic(self, memory: Memory) -> Memory:
        """Insert or update an episodic memory; return it as stored."""
        return self._write_memory(memory, Tier.EPISODIC)

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
        return self._write_memory(memory, Tier.SEMANTIC)

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

    def count(self, tier: Tier) -> int:
        """How many memories ``tier`` holds."""
        with self._reading() as conn:
            return memory_sql.count(conn, parse_tier(tier, "tier"))

    def page(self, tier: Tier, after_id: str = "", limit: int = 500) -> list[Memory]:
        """The next ``limit`` memories of ``tier`` after ``after_id`` in id order."""
        require_str(after_id, "after_id")
        require_int(limit, "limit", minimum=1)
        with self._reading() as conn:
            return memory_sql.page(conn, parse_tier(tier, "tier"), after_id, limit)

    def get_memory(self, memory_id: str) -> Memory | None:
        """The memory with that id in whichever tier holds it, or ``None``."""
        if type(memory_id) is not str:
            require_str(memory_id, "memory_id")
        return _any_tier_memory(self.db.read_row(_ANY_TIER, (memory_id, memory_id, memory_id)))

    # --- promotion ----------------------------------------------------------------------

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
        with self.transaction() as conn:
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
            conn.execute(f"DELETE FROM {memory_sql.TABLE[source]} WHERE id = ?", (memory_id,))
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
        with self.transaction(join=True) as conn:
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

    # --- sessions -------------------------------------------------------------------------

    def put_session(self, session: SessionState) -> None:
        """Insert or update a session (its transcript is kept)."""
        validate_session(session)
        row = session_sql.encode_row(session)
        with self.transaction() as conn:
            session_sql.upsert(conn, row)

    def get_session(self, session_id: str) -> SessionState | None:
        """The session, or ``None``."""
        require_str(session_id, "session_id")
        with self._reading() as conn:
            return session_sql.fetch(conn, session_id)

    def session_is_active(self, session_id: str) -> bool | None:
        """Whether the session is active (not ended); ``None`` if there is none."""
        require_str(session_id, "session_id")
        with self._reading() as conn:
            return session_sql.is_active(conn, session_id)

    def delete_session(self, session_id: str) -> bool:
        """Delete a session and its transcript; memories from it stay. True if it existed."""
        require_str(session_id, "session_id")
        with self.transaction() as conn:
            return session_sql.delete(conn, session_id)

    def get_sessions(self, limit: int | None = None) -> list[SessionState]:
        """All sessions, ended or not, most recently active first."""
        require_int(limit, "limit", allow_none=True, minimum=0)
        with self._reading() as conn:
            return session_sql.recent(conn, limit)

    def get_sessions_pending_compaction(self) -> list[SessionState]:
        """Sessions flagged for compaction, least recently active first."""
        with self._reading() as conn:
            return session_sql.pending_compaction(conn)

    def touch_session(self, session_id: str, at: int) -> None:
        """Move a session's ``last_active_at`` forward to ``at`` (never backward)."""
        require_str(session_id, "session_id")
        require_int(at, "at")
        with self.transaction() as conn:
            session_sql.touch(conn, session_id, at)

    def get_active_sessions(self) -> list[SessionState]:
        """Sessions not yet ended, most recently active first."""
        with self._reading() as conn:
            return session_sql.active(conn)

    def append_transcript(
        self, session_id: str, turn: int, role: str, content: str, *, speaker: str | None = None
    ) -> TranscriptEntry:
        """Add a transcript line; the session's turn and ``last_active_at`` move forward."""
        entry = TranscriptEntry(new_id(), session_id, turn, role, content, self.clock(), speaker)
        validate_transcript(entry)
        with self.transaction() as conn:
            if session_sql.fetch(conn, session_id) is None:
                raise SessionNotFoundError(f"no session {session_id}: start it first")
            session_sql.append_transcript(conn, entry)
        return entry

    def get_transcripts(self, session_id: str) -> list[TranscriptEntry]:
        """A session's transcript in turn order."""
        require_str(session_id, "session_id")
        with self._reading() as conn:
            return session_sql.transcripts(conn, session_id)

    # --- repetition schedules ------------------------------------------------------------

    def put_repetition_schedule(self, schedule: RepetitionSchedule) -> None:
        """Insert or replace a memory's schedule; the memory must exist."""
        validate_schedule(schedule)
        with self.transaction() as conn:
            if memory_sql.tier_of(conn, schedule.memory_id) is None:
                raise MemoryNotFoundError(f"no memory {schedule.memory_id} to schedule")
            schedule_sql.upsert(conn, schedule)

    def get_repetition_schedule(self, memory_id: str) -> RepetitionSchedule | None:
        """A memory's schedule, or ``None``."""
        require_str(memory_id, "memory_id")
        with self._reading() as conn:
            return schedule_sql.fetch(conn, memory_id)

    def get_schedules_due_for_review(
        self, before: int, limit: int | None = None
    ) -> list[RepetitionSchedule]:
        """Schedules due at or before ``before`` (epoch ms), most overdue first."""
        require_int(before, "before")
        require_int(limit, "limit", allow_none=True, minimum=0)
        with self._reading() as conn:
            return schedule_sql.due(conn, before, limit)

    # --- recall indexes --------------------------------------------------------------------

    def keyword_search(
        self,
        match: str,
        limit: int,
        tier: Tier | None = None,
        context_weight: float = 0.5,
        after_weight: float = 0.5,
        *,
        where: MemoryFilter | None = None,
    ) -> list[tuple[str, float]]:
        """``(memory_id, bm25)`` for an FTS5 ``match`` expression, best first; words found
        only in the two memories before a memory in its session count ``context_weight``
        as much as its own, in the two after it ``after_weight``. ``where`` restricts the
        search itself: the best ``limit`` memories it accepts come back."""
        require_str(match, "match", allow_empty=False)
        require_int(limit, "limit", minimum=1)
        require_unit_float(context_weight, "context_weight")
        require_unit_float(after_weight, "after_weight")
        accepted = _filter(tier, where)
        with self._reading() as conn:
            if self.in_transaction:  # this transaction's writes are not indexed yet
                self.keywords.catch_up(conn)
            return index_sql.keyword_search(
                conn, match, limit, accepted, context_weight, after_weight
            )

    def vector_search(
        self,
        vector: object,
        limit: int,
        tier: Tier | None = None,
        *,
        where: MemoryFilter | None = None,
    ) -> list[tuple[str, float]]:
        """``(memory_id, cosine distance)`` nearest first ([] before any embedding exists).

        Candidates (``limit * VECTOR_OVERSAMPLE``, at least ``VECTOR_MIN_CANDIDATES``) come
        from the in-RAM copy of the index (3-bit codes, searched in two stages: see
        :mod:`persistence.vector_mirror`); exact cosine re-ranks them. With a
        filter ``where``, the candidates that pass it count: when too few do, the share
        that passed estimates how many the filter accepts; at most ``exact_scan_max``
        (default ``EXACT_SCAN_MAX``): all of them are compared exactly, else the copy is
        searched deeper until enough pass. A filter an index serves (session, agent, tags,
        time range) that accepts at most ``exact_scan_max`` is compared exactly at once.
        """
        require_int(limit, "limit", minimum=1)
        accepted = _filter(tier, where)
        with self._reading() as conn, read_snapshot(conn):
            dim = read_meta(conn, EMBEDDING_DIM_KEY)
            if dim is None:
                return []
            query = np.frombuffer(encode_embedding(vector, int(dim)), dtype="<f4")
            if accepted.narrows and index_sql.index_backed(accepted):
                # Few accepted (a session, say): compare them all, before searching the copy.
                everything = index_sql.accepted_embeddings(conn, accepted, self.exact_scan_max)
                if everything is not None:
                    return index_sql.nearest(everything, query, limit)
            wanted = count = max(limit * VECTOR_OVERSAMPLE, VECTOR_MIN_CANDIDATES)
            candidates = self._vector_candidates(conn, query, count, accepted.tier)
            while accepted.narrows:
                passed = index_sql.accepted_among(conn, accepted, candidates)
                total = self._vectors.size
                if len(passed) >= wanted or len(candidates) < count or count >= total:
                    candidates = passed
                    break
                share = max(len(passed), 1) / len(candidates)  # of the file the filter accepts
                if share * total <= self.exact_scan_max:
                    everything = index_sql.accepted_embeddings(conn, accepted, self.exact_scan_max)
                    if everything is not None:
                        return index_sql.nearest(everything, query, limit)
                count = min(max(count * 4, int(2 * wanted / share)), total)
                candidates = self._vector_candidates(conn, query, count, accepted.tier)
            return index_sql.rerank(conn, candidates, query, limit)

    def _vector_candidates(
        self, conn: apsw.Connection, query: np.ndarray, count: int, tier: Tier | None
    ) -> list[tuple[str, Tier]]:
        """The RAM copy's ``count`` nearest, seeing this thread's own uncommitted vectors."""
        if self.in_transaction:
            candidates = self._vectors.candidates_in_write(conn, query, count, tier)
            if candidates is not None:
                return candidates
            self.after_rollback(self._vectors.reset)  # it will see uncommitted rows
        return self._vectors.candidates(conn, query, count, tier)

    def vector_distances(self, vector: object, memory_ids: Sequence[str]) -> dict[str, float]:
        """Cosine distance from ``vector`` to each of ``memory_ids`` that has an embedding
        (exact, from the float vectors in the file; a memory without one is left out)."""
        for memory_id in memory_ids:
            require_str(memory_id, "memory_id")
        if not memory_ids:
            return {}
        with self._reading() as conn, read_snapshot(conn):
            dim = read_meta(conn, EMBEDDING_DIM_KEY)
            if dim is None:
                return {}
            query = np.frombuffer(encode_embedding(vector, int(dim)), dtype="<f4")
            found = index_sql.embeddings_of(conn, list(dict.fromkeys(memory_ids)))
            if not found:
                return {}
            ids, distances = index_sql.cosine_distances(found, query)
            return {memory_id: float(d) for memory_id, d in zip(ids, distances, strict=True)}

    def conversation_turns(
        self, memory_ids: Sequence[str], *, before: bool = False
    ) -> dict[str, conversation_sql.Turn]:
        """Memory id -> (speaker, asks something, id before it (``None`` unless
        ``before``) and after it in its session), for those of ``memory_ids`` that
        exist (recall's conversation signals and reranking)."""
        for memory_id in memory_ids:
            require_str(memory_id, "memory_id")
        with self._reading() as conn, read_snapshot(conn):
            return conversation_sql.turns(conn, list(dict.fromkeys(memory_ids)), before)

    def unembedded(self, limit: int = 256) -> list[tuple[str, Tier, str]]:
        """Memories still waiting for an embedding: ``(id, tier, content)``."""
        require_int(limit, "limit", minimum=1)
        with self._reading() as conn:
            return index_sql.unembedded(conn, limit)

    def set_embeddings(
        self,
        rows: Sequence[tuple[Tier, str, object]],
        contents: Sequence[str] | None = None,
        *,
        model_id: str | None = None,
    ) -> None:
        """Store computed embeddings in one transaction (the indexes follow by trigger).

        A memory that got an embedding meanwhile keeps it; with ``contents`` (the texts
        that were embedded, one per row), so does a memory whose content changed since.
        With ``model_id``, refused if the file records another model by then (another
        process may have re-embedded it).
        """
        if contents is not None and len(contents) != len(rows):
            raise InvalidInputError("set_embeddings: one content per row, or none")
        texts: Sequence[str | None] = contents if contents is not None else [None] * len(rows)
        encoded = [
            (tier, memory_id, encode_embedding(vector, None), text)
            for (tier, memory_id, vector), text in zip(rows, texts, strict=True)
        ]
        with self.transaction() as conn:
            recorded = read_meta(conn, EMBEDDING_MODEL_KEY)
            if model_id is not None and recorded not in (None, model_id):
                raise EmbeddingModelMismatchError(
                    f"{self.path} is now embedded with {recorded!r}, not {model_id!r}"
                )
            for _, _, blob, _ in encoded:
                self._check_dim(conn, len(blob) // 4)
            index_sql.set_embeddings(conn, encoded)

    def cached_embeddings(self, model_id: str, hashes: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """Embeddings cached for ``model_id`` by content hash
        (:func:`~persistence.embedding_cache_sql.content_hash`)."""
        require_str(model_id, "model_id", allow_empty=False)
        if not all(isinstance(h, bytes) for h in hashes):
            raise InvalidTypeError("hashes must be bytes (see content_hash)")
        with self._reading() as conn:
            found = embedding_cache_sql.lookup(conn, model_id, hashes)
        return {h: np.frombuffer(blob, dtype="<f4") for h, blob in found.items()}

    def cache_embeddings(
        self, model_id: str, entries: Sequence[tuple[bytes, object]], keep: int
    ) -> None:
        """Cache ``(content hash, vector)`` entries for ``model_id`` (a hit refreshes its
        age), then evict the least recently used beyond ``keep`` rows."""
        require_str(model_id, "model_id", allow_empty=False)
        require_int(keep, "keep", minimum=0)
        encoded = [(h, encode_embedding(vector, None)) for h, vector in entries]
        with self.transaction() as conn:
            embedding_cache_sql.remember(conn, model_id, encoded, self.clock())
            embedding_cache_sql.evict(conn, keep)

    # --- re-embedding with another model ------------------------------------------------

    def begin_rebuild(self, model_id: str, dim: int) -> bool:
        """Start (or resume) staging vectors of ``model_id``; True if staged work is kept."""
        require_str(model_id, "model_id", allow_empty=False)
        require_int(dim, "dim", minimum=1)
        with self.transaction() as conn:
            return rebuild_sql.begin(conn, model_id, dim)

    def rebuild_state(self) -> tuple[str, int] | None:
        """``(model id, dimension)`` of the re-embedding under way, or ``None``."""
        with self._reading() as conn:
            return rebuild_sql.state(conn)

    def unstaged_for_rebuild(self, limit: int = 256) -> list[tuple[str, str]]:
        """Memories the re-embedding has no vector for yet: ``(id, content)``."""
        require_int(limit, "limit", minimum=1)
        with self._reading() as conn:
            return rebuild_sql.unstaged(conn, limit)

    def stage_rebuild(self, rows: Sequence[tuple[str, str, object]]) -> None:
        """Stage ``(memory id, embedded content, vector)`` in one transaction."""
        with self.transaction() as conn:
            rebuild_sql.stage(conn, self._staged(conn, rows))

    def finish_rebuild(self, embed: Callable[[list[str]], object]) -> int:
        """Swap the staged vectors in, in ONE transaction, and return how many memories
        changed. Memories added or edited since they were staged are embedded here
        with ``embed(texts) -> [n, dim]``. Before it commits, the file is unchanged."""
        with self.transaction() as conn:
            under_way = rebuild_sql.state(conn)
            if under_way is None:
                raise InvalidInputError("no re-embedding under way: call begin_rebuild() first")
            missing = rebuild_sql.stale(conn)
            if missing:
                vectors = embed([content for _, content in missing])
                staged = [(i, c, v) for (i, c), v in zip(missing, vectors, strict=True)]  # type: ignore[call-overload]
                rebuild_sql.stage(conn, self._staged(conn, staged))
            self.after_commit(self._vectors.reset)
            return rebuild_sql.swap(conn, *under_way)

    def _staged(
        self, conn: apsw.Connection, rows: Sequence[tuple[str, str, object]]
    ) -> list[tuple[str, bytes, bytes]]:
        under_way = rebuild_sql.state(conn)
        if under_way is None:
            raise InvalidInputError("no re-embedding under way: call begin_rebuild() first")
        encoded = []
        for memory_id, content, vector in rows:
            require_str(memory_id, "memory_id")
            require_str(content, "content")
            blob = encode_embedding(vector, under_way[1])
            encoded.append((memory_id, content_hash(content), blob))
        return encoded

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

    def record_embedding_error(self, message: str) -> int:
        """Count a failure of background embedding in the file (with its message, stamped
        with the time); returns how many there have been."""
        require_str(message, "message")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.clock() / 1000))
        with self.transaction() as conn:
            return record_embedding_error(conn, f"{stamp} {message[:1000]}")

    # --- forgetting curve batches ------------------------------------------------------

    def retention_batch(
        self, tier: Tier, after_id: str = "", limit: int = 500, min_reviews: int = 0
    ) -> list[RetentionInput]:
        """The next ``limit`` memories of ``tier`` after ``after_id``, in id order.

        Lets the forgetting curve walk a file of any size in bounded memory.
        """
        require_str(after_id, "after_id")
        require_int(limit, "limit", minimum=1)
        require_int(min_reviews, "min_reviews", minimum=0)
        with self._reading() as conn:
            return forgetting_sql.retention_batch(
                conn, parse_tier(tier, "tier"), after_id, limit, min_reviews
            )

    def apply_decay(
        self,
        tier: Tier,
        updates: Sequence[tuple[str, float]],
        forgotten: Sequence[tuple[str, float]],
        reason: str,
    ) -> None:
        """In one transaction: store new retentions, forget ``forgotten`` with audit rows."""
        tier = parse_tier(tier, "tier")
        with self.transaction() as conn:
            forgetting_sql.set_retention(conn, tier, updates)
            for memory_id, retention in forgotten:
                self._forget(conn, tier, memory_id, retention, reason)

    def get_forgetting_log(self, memory_id: str | None = None) -> list[ForgettingRecord]:
        """Audit rows of forgotten memories, oldest first (for one memory, or all)."""
        require_str(memory_id, "memory_id", allow_none=True)
        with self._reading() as conn:
            return forgetting_sql.forgetting_log(conn, memory_id)

    # --- statistics ---------------------------------------------------------------------

    @property
    def schema_version(self) -> int:
        """The schema version of the open file."""
        with self._reading() as conn:
            return read_schema_version(conn)

    def get_statistics(self) -> PersistenceStatistics:
        """Row counts (one consistent snapshot) and file sizes."""
        with self._reading() as conn:
            nested = conn.in_transaction
            if not nested:
                conn.execute("BEGIN")
            try:
                counts = [memory_sql.count(conn, tier) for tier in Tier]
                scalar = {name: int(query_value(conn, sql)) for name, sql in _STAT_QUERIES.items()}
                version = read_schema_version(conn)
                page_size = int(conn.pragma("page_size"))
                page_count = int(conn.pragma("page_count"))
                errors, last_error = embedding_errors(conn)
            finally:
                if not nested:
                    conn.execute("COMMIT")
        return PersistenceStatistics(
            scratchpad_count=counts[0],
            episodic_count=counts[1],
            semantic_count=counts[2],
            schema_version=version,
            file_size_bytes=_file_size(self.path),
            wal_size_bytes=_file_size(self.path + "-wal"),
            page_size=page_size,
            page_count=page_count,
            path=self.path,
            embedding_errors=errors,
            last_embedding_error=last_error,
            **scalar,
        )


_STAT_QUERIES = {
    "session_count": "SELECT count(*) FROM sessions",
    "active_session_count": "SELECT count(*) FROM sessions WHERE is_active = 1",
    "transcript_count": "SELECT count(*) FROM session_transcripts",
    "schedule_count": "SELECT count(*) FROM repetition_schedules",
    "promotion_count": "SELECT count(*) FROM promotion_log",
    "forgotten_count": "SELECT count(*) FROM forgetting_log",
    "unembedded_count": "SELECT (SELECT count(*) FROM scratchpad WHERE embedding IS NULL) + "
    "(SELECT count(*) FROM episodic WHERE embedding IS NULL) + "
    "(SELECT count(*) FROM semantic WHERE embedding IS NULL)",
    "embedding_cache_count": "SELECT count(*) FROM embedding_cache",
}


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _filter(tier: Tier | None, where: MemoryFilter | None) -> MemoryFilter:
    """One filter from a search's ``tier`` and ``where`` arguments (checked)."""
    if where is None:
        return MemoryFilter(tier=tier)
    validate_filter(where)
    if tier is not None and where.tier not in (None, tier):
        raise InvalidInputError(f"tier {tier.value} contradicts where.tier {where.tier}")
    return where if tier is None else replace(where, tier=tier)

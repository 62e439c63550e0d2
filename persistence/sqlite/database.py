"""Database: the engine under the store — connections, transactions, hooks, watching.

One WAL-mode SQLite file driven by APSW. Writes go through one connection, serialized
by a lock, each inside ``BEGIN IMMEDIATE`` so the write lock is taken up front
(``busy_timeout`` alone does not prevent writer-versus-writer deadlocks). Reads use one
connection per thread, so readers never wait for writers; a thread inside
:meth:`Database.transaction` reads through the write connection and sees its own
uncommitted work. Knows nothing of memories or tables: :class:`~persistence.sqlite.SQLiteStore`
builds the record API on top of it. Other processes' commits are watched by
:mod:`~persistence.sqlite.watcher`; the threads beside the writer are
:mod:`~persistence.sqlite.background`'s.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from types import TracebackType
from typing import TypeVar

import apsw

from persistence.errors import (
    DatabaseBusyError,
    InvalidInputError,
    ReadOnlyError,
    StoreClosedError,
    TransactionAbortedError,
)
from persistence.frames import Hook, TransactionFrames, run_hooks
from persistence.sqlite import encryption, file_users
from persistence.sqlite.background import Background
from persistence.sqlite.connection import (
    MEMORY_PATH,
    WRITER_CACHE_KIB,
    ConnectionOptions,
    connect,
    connect_read_only,
    connection_busy_timeout,
    connection_cache_size,
    connection_optimize,
    connection_reset_schema,
    may_leave_wal_files,
    read_snapshot,
    tidy_wal_files,
)
from persistence.sqlite.erasure import erase_at_close
from persistence.sqlite.tracing import StatementTracer, TraceCallback
from persistence.sqlite.translate import SQLITE_ERRORS, _from_sqlite, result_code, storage_errors
from persistence.sqlite.watcher import DATA_VERSION, ChangeWatcher
from persistence.validation import require_int

T = TypeVar("T")
logger = logging.getLogger("tiered_memory")

RESET_AFTER_CHANGES = 20_000
"""The default ``reset_after_changes``: a transaction that changed this many rows (about
2,000 memories) is followed by :func:`~persistence.sqlite.connection.connection_reset_schema`
on the writer: FTS5's pending-terms hash, grown by such a batch, would otherwise slow
every later commit."""

_ABORTED = (
    "SQLite rolled this transaction back after an earlier error: "
    "leave the `with transaction()` block and start again"
)


_OPEN_STEP = 1 << 48
"""How far each open moves :meth:`Database.change_stamp`: past any ``total_changes()``
a closed in-memory connection reached, so a reopened one never repeats a stamp."""


class Database(TransactionFrames):
    """Connections and transactions of one SQLite file (or ``":memory:"``).

    ``path`` is already absolute (or ``":memory:"``). ``read_only`` opens with SQLite's
    read-only flag: every write raises :class:`ReadOnlyError`, and the empty -wal/-shm
    files the open created are removed again at close. Other connections' commits are
    looked for at most every ``change_check_interval_ms``. A transaction that changed
    ``reset_after_changes`` rows resets the writer's schema after it ends (see
    :data:`RESET_AFTER_CHANGES`).
    """

    def __init__(
        self,
        path: str,
        options: ConnectionOptions,
        *,
        read_only: bool = False,
        change_check_interval_ms: int = 50,
        reset_after_changes: int = RESET_AFTER_CHANGES,
        trace: TraceCallback | None = None,
    ) -> None:
        if read_only and path == MEMORY_PATH:
            raise InvalidInputError("an in-memory store cannot be opened read-only")
        require_int(change_check_interval_ms, "change_check_interval_ms", minimum=0)
        require_int(reset_after_changes, "reset_after_changes", minimum=1)
        self._tracer = None if trace is None else StatementTracer(trace)
        self.reset_after_changes = reset_after_changes
        self.path = path
        self._in_memory = path == MEMORY_PATH
        self._read_label = f"reading {path}"  # built once: every read names it
        self._write_label = f"writing to {path}"  # and every write
        self._place = None if path == MEMORY_PATH else path
        self.options = options
        self.read_only = read_only
        self.lock = threading.RLock()
        """Held by the thread that writes (and by one opening or closing the file)."""
        self._writer: apsw.Connection | None = None
        self._readers: list[apsw.Connection] = []
        self._readers_cond = threading.Condition(threading.Lock())
        self._reads: list[None] = []
        """One item per read under way through a thread's own connection (close() waits
        until it is empty): appended and popped without a lock, both atomic."""
        self._local = threading.local()
        TransactionFrames.__init__(self)
        self._closed = False
        self._tidy_wal = False
        self._watcher = ChangeWatcher(
            self._in_memory, change_check_interval_ms / 1000, self.lock, self._idle_writer
        )
        self._stamp = 0  # change_stamp(): moved by each connection's look that saw a commit
        self._stamp_lock = threading.Lock()
        self._pending_writers: list[Callable[[apsw.Connection], None]] = []
        self._exclusive_listeners: list[Hook] = []
        self.background = Background(path, path == MEMORY_PATH)
        """The threads beside the writer: WAL checkpoints (``request_checkpoint()``) and the
        jobs registered in ``jobs`` (each started as a writable file's writer opens,
        stopped before it closes)."""

    # --- lifecycle ----------------------------------------------------------------------

    @property
    def is_memory(self) -> bool:
        """True for an in-memory database (nothing on disk)."""
        return self.path == MEMORY_PATH

    @property
    def is_open(self) -> bool:
        """True between :meth:`open` and :meth:`close`."""
        return self._writer is not None

    @property
    def place(self) -> str | None:
        """Where the file is, for telling a full or read-only disk from other failures."""
        return None if self.is_memory else self.path

    @property
    def writer(self) -> apsw.Connection | None:
        """The write connection (``None`` while closed); use :meth:`transaction` to write."""
        return self._writer

    @property
    def readers(self) -> list[apsw.Connection]:
        """The per-thread read connections open now."""
        return self._readers

    def connect(self) -> apsw.Connection:
        """A new connection with the policy of this database (read-only if it is)."""
        if self.read_only:
            conn = connect_read_only(self.path, self.options)
        else:
            conn = connect(self.path, self.options)
        if self._tracer is not None:
            self._tracer.attach(conn)
        return conn

    def open(self, prepare: Callable[[apsw.Connection], None]) -> bool:
        """Connect, run ``prepare(conn)`` (schema checks, migrations), and adopt the
        connection as the writer. False (and nothing done) if already open. If
        ``prepare`` raises, the connection is closed and nothing is adopted."""
        with self.lock:
            if self._writer is not None:
                return False
            with self._stamp_lock:  # a new connection: nothing kept before holds (in RAM
                self._stamp += _OPEN_STEP  # its total_changes() starts again at 0)
            if self.read_only:
                self._tidy_wal = may_leave_wal_files(self.path)
            try:
                conn = self.connect()
                try:
                    prepare(conn)
                except BaseException:
                    conn.close()
                    raise
            except BaseException:
                self._tidy_after_read_only()
                raise
            self._writer = conn
            self._closed = False
            if not self._in_memory:
                file_users.register(self.path)
            self._watcher.opened(conn)
            if not self.read_only:
                connection_cache_size(conn, WRITER_CACHE_KIB)  # for the keyword merges
                self.background.start(conn, self.options)
            return True

    def when_idle(self, work: Callable[[apsw.Connection], T]) -> T:
        """``work(writer)`` for a background job, on the writer's connection and under its
        lock, so its commits are the writer's own (``data_version`` does not report them
        as another process's). ``apsw.BusyError`` if the writer is busy (its lock taken,
        a transaction open) or closed; another process's lock is never waited for."""
        if not self.lock.acquire(blocking=False):
            raise apsw.BusyError("the writer is busy")
        try:
            writer = self._writer
            if writer is None or self._depth or self._closed:
                raise apsw.BusyError("the writer is busy or closed")
            writer.set_busy_timeout(0)  # another process writing: skip, never wait
            try:
                return work(writer)
            finally:
                connection_busy_timeout(writer, self.options.busy_timeout_ms)
        finally:
            self.lock.release()

    def _tidy_after_read_only(self) -> None:
        tidy, self._tidy_wal = self._tidy_wal, False
        if tidy:
            tidy_wal_files(self.path, self.options.key)

    def close(self) -> None:
        """Refresh planner statistics, then close every connection; twice is harmless.

        Waits for writes and reads under way in other threads; refused inside this
        thread's own :meth:`transaction`. A read-only database changes nothing.
        """
        with self.lock:
            if self._depth:
                raise InvalidInputError(
                    "close() inside a transaction: finish the transaction first"
                )
            writer = self._writer
            self.background.stop(writer)
            with self._readers_cond:
                self._writer = None
                self._closed = True
                while self._reads:
                    self._readers_cond.wait()
                readers, self._readers = self._readers, []
            self._local = threading.local()  # may run reader finalizers: not under the cond
        with storage_errors(f"closing {self.path}", self.place):
            for conn in readers:
                conn.close()
            if writer is not None:
                try:
                    if not self.read_only:
                        connection_optimize(writer, self.options, at_open=False)
                        if not self.is_memory:
                            erase_at_close(
                                writer
                            )  # no forgotten term in the index, no page in the WAL
                finally:
                    writer.close()
                    if not self._in_memory:
                        file_users.unregister(self.path)
        if writer is not None and self.read_only:
            self._tidy_after_read_only()

    def rekey(self, new_key: bytes) -> None:
        """Re-encrypt the file with ``new_key`` in one write transaction, then use it.

        Waits for other threads' reads and writes; their read connections (opened with
        the old key) are closed and reopened with the new one on their next read. A
        crash leaves the file under exactly one of the keys (the WAL commits it whole).
        The background checkpointer's connection holds the old key: it is stopped first
        and started again with the new one.
        """
        with self.lock:
            writer = self.require_open()
            self.require_sole_user("changing the key")
            restart = self.background.stop_checkpointer(writer)
            try:
                self._rekey(new_key)
            finally:
                if restart and self._writer is not None:
                    self.background.start_checkpointer(self._writer, self.options)

    def _rekey(self, new_key: bytes) -> None:
        with self.exclusive_connection() as conn:
            with self._readers_cond:
                while self._reads:
                    self._readers_cond.wait()
                readers, self._readers = self._readers, []
            self._local = threading.local()
            for reader in readers:
                reader.close()
            encryption.rekey(conn, new_key)
            self.options = replace(self.options, key=new_key)
            conn.pragma("wal_checkpoint", "TRUNCATE")

    def require_sole_user(self, doing: str) -> None:
        """Raise :class:`DatabaseInUseError` if another handle or process has the file
        open (see :mod:`~persistence.sqlite.file_users`): for work that changes what
        their connections hold (the key, the salt)."""
        if not self._in_memory:
            file_users.require_sole_user(self.path, doing)

    def require_writable(self) -> None:
        """Raise :class:`ReadOnlyError` if opened read-only."""
        if self.read_only:
            raise ReadOnlyError(
                f"{self.path} is open read-only (read_only=True): nothing was written; "
                "open it without read_only to change it"
            )

    def require_open(self) -> apsw.Connection:
        """The write connection, or :class:`StoreClosedError`."""
        writer = self._writer
        if writer is None:
            state = "closed" if self._closed else "not open: call open() or use 'with'"
            raise StoreClosedError(f"store {self.path} is {state}")
        return writer

    # --- transactions -------------------------------------------------------------------

    def before_commit(self, callback: Callable[[apsw.Connection], None]) -> None:
        """Run ``callback(conn)`` before every outermost COMMIT, and before a read inside
        a transaction that must see deferred work (:meth:`write_pending`)."""
        self._pending_writers.append(callback)

    def write_pending(self, conn: apsw.Connection) -> None:
        """Run the :meth:`before_commit` callbacks now (inside this thread's transaction)."""
        for callback in self._pending_writers:
            callback(conn)

    def transaction(self, *, join: bool = False) -> AbstractContextManager[apsw.Connection]:
        """Group writes: ``BEGIN IMMEDIATE`` ... ``COMMIT``, or ``ROLLBACK`` on exception.

        Nested use becomes a ``SAVEPOINT`` that rolls back alone. With ``join=True``
        (and inside such a block, every nested use), it joins the enclosing transaction
        instead: no savepoint. A joined block that raises after it wrote something
        aborts the enclosing transaction (leaving it raises
        :class:`TransactionAbortedError`); one that raises before writing leaves it
        usable. Yields the write connection.
        """
        if self._depth and self.in_transaction:  # this thread's own: no lock to decide
            if join or self._joined:
                return _Joined(self)
            return _Savepoint(self)
        return _Outer(self, join)

    # --- other processes' writes ------------------------------------------------------

    def on_external_change(self, callback: Hook) -> None:
        """Call ``callback`` when another connection (another process, say) has committed.

        Checked at the start of every write transaction and by
        :meth:`check_external_changes`.
        """
        self._watcher.listeners.append(callback)

    def check_external_changes(self, wait_s: float = 0.05) -> bool:
        """Look for other connections' commits, at most once per check interval.

        Returns ``False`` when a check was due but a write in another thread held the
        connection for more than ``wait_s`` seconds: RAM copies may be stale then.
        """
        return self._watcher.check(wait_s)

    def change_stamp(self) -> int | None:
        """A number that moves whenever a commit may have changed the file since it was
        last given (any connection: this handle's writer, another handle, another
        process), so RAM copies read at one stamp hold while it stays; ``None`` inside
        this thread's transaction (its reads see uncommitted rows: copy nothing).

        Exact, not every ``change_check_interval_ms``: this thread's read connection's
        ``PRAGMA data_version`` (one statement, a few microseconds), which moves when
        any other connection commits; each connection's first look moves the stamp too
        (a commit before it cannot be told apart). In memory the one connection's
        ``total_changes()`` (every row it ever changed, committed or not). Every
        :meth:`exclusive_connection` block (a restore, say) moves it too."""
        if self._depth and self.in_transaction:
            return None
        with self.reading() as conn:
            if self._in_memory:  # (+ the exclusive blocks: a restore changes no row)
                return int(conn.total_changes()) + self._stamp
            holder: _ThreadReader = self._local.reader
            if conn.in_transaction:  # a snapshot: its stamp, while no later commit was seen
                pinned = holder.pinned
                return pinned if pinned is not None and pinned == self._stamp else None
            row = conn.execute(DATA_VERSION).fetchone()
        version = None if row is None else int(row[0])
        if version is None or version != holder.version:
            holder.version = version
            with self._stamp_lock:
                self._stamp += 1
        return self._stamp

    def _idle_writer(self) -> apsw.Connection | None:
        return self._writer if self._depth == 0 else None

    # --- connections for special work ---------------------------------------------------

    def after_exclusive(self, callback: Hook) -> None:
        """Call ``callback`` after every :meth:`exclusive_connection` block (the file may
        have been replaced underneath: RAM copies of it must go)."""
        self._exclusive_listeners.append(callback)

    @contextmanager
    def exclusive_connection(self) -> Iterator[apsw.Connection]:
        """The write connection with no transaction open, other threads' writes held off.

        For work SQLite must do outside a transaction (online backup into this file,
        ``VACUUM``, checkpoints). Refused inside :meth:`transaction`.
        """
        self.require_open()
        self.require_writable()
        with self.lock, storage_errors(self._write_label, self._place, os_errors=False):
            conn = self.require_open()
            if self._depth:
                raise InvalidInputError("not possible inside a transaction: finish it first")
            try:
                with self.background.paused():
                    yield conn
            finally:
                with self._stamp_lock:
                    self._stamp += 1  # a restore may have replaced every page (change_stamp)
                run_hooks(self._exclusive_listeners)

    @contextmanager
    def fresh_read_connection(self) -> Iterator[apsw.Connection]:
        """A connection of its own for one call, in one read snapshot: the file as a new
        process sees it.

        For integrity checks: a long-lived connection caches derived state (FTS5 keeps
        each table's structure), so a check on it can report damage that is not there.
        Inside a transaction, and in memory, the one connection that sees the data is
        used instead.
        """
        self.require_open()
        if self.is_memory or self.in_transaction:
            with self.reading() as conn, read_snapshot(conn):
                if self.in_transaction:
                    self.write_pending(conn)
                yield conn
            return
        with storage_errors(f"reading {self.path}", self.place, os_errors=False):
            conn = self.connect()
            try:
                with read_snapshot(conn):
                    yield conn
            finally:
                conn.close()

    def reading(self) -> AbstractContextManager[apsw.Connection]:
        """A connection to read from: this thread's own (readers never wait for writers),
        or the writer inside this thread's transaction and in memory."""
        self.require_open()
        return _Reading(self)

    @contextmanager
    def snapshot(self) -> Iterator[apsw.Connection]:
        """A connection whose reads see one snapshot until the block ends (nested blocks
        share it; inside this thread's transaction, the transaction's view)."""
        with self.reading() as conn:
            outer = not (self._in_memory or conn.in_transaction or self.in_transaction)
            with read_snapshot(conn):
                if not outer:
                    yield conn
                    return
                holder: _ThreadReader = self._local.reader
                with self._stamp_lock:  # the snapshot starts here: no bump slips between
                    row = conn.execute(DATA_VERSION).fetchone()
                    version = None if row is None else int(row[0])
                    if version is None or version != holder.version:
                        holder.version = version
                        self._stamp += 1
                    holder.pinned = self._stamp
                try:
                    yield conn
                finally:
                    holder.pinned = None

    def read_row(self, sql: str, params: tuple[object, ...]) -> tuple[object, ...] | None:
        """The first row of a one-statement read: :meth:`reading` without its context
        manager, for the read every uncached ``get`` makes (same connection, same wait
        in :meth:`close`, same error translation)."""
        if self._writer is None:
            self.require_open()
        if self._in_memory or (self._depth and self.in_transaction):
            with _Reading(self) as conn:
                row: tuple[object, ...] | None = conn.execute(sql, params).fetchone()
                return row
        try:
            holder: _ThreadReader | None = getattr(self._local, "reader", None)
            conn = holder.conn if holder is not None else self._thread_reader()
        except apsw.Error as exc:
            raise _from_sqlite(exc, self._read_label, self.path) from exc
        reads = self._reads
        reads.append(None)  # counted first, then the writer looked at: close() sets the
        try:  # writer to None first, then waits for the count, so one of them sees the other
            if self._writer is None:
                self.require_open()
            row = conn.execute(sql, params).fetchone()
            return row
        except SQLITE_ERRORS as exc:
            raise _from_sqlite(exc, self._read_label, self.path) from exc
        finally:
            reads.pop()
            if not reads and self._writer is None:
                with self._readers_cond:
                    self._readers_cond.notify_all()  # close() waits for the last read

    def _thread_reader(self) -> apsw.Connection:
        """This thread's read connection, closed again when the thread ends."""
        holder: _ThreadReader | None = getattr(self._local, "reader", None)
        if holder is not None:
            return holder.conn
        conn = self.connect()
        with self._readers_cond:
            if self._writer is None:
                conn.close()
                self.require_open()
            self._readers.append(conn)
        holder = _ThreadReader(conn)
        weakref.finalize(holder, self._release_reader, conn)
        self._local.reader = holder
        return conn

    def _release_reader(self, conn: apsw.Connection) -> None:
        with self._readers_cond:
            if conn not in self._readers:
                return
            self._readers.remove(conn)
        conn.close()


class _Locked:
    """A block that writes under the writer's lock with error translation
    (:class:`storage_errors`): :meth:`_start` once both are held, :meth:`_end` before
    they are let go; a failure in either is translated and the lock released. The
    outermost transaction and a savepoint are the two kinds."""

    __slots__ = ("_db", "_errors", "_conn")

    def __init__(self, db: Database) -> None:
        self._db = db

    def __enter__(self) -> apsw.Connection:
        db = self._db
        self._check()
        db.lock.acquire()
        errors = self._errors = storage_errors(db._write_label, db._place, os_errors=False)
        errors.__enter__()
        try:
            self._conn = self._start()
        except BaseException as exc:
            try:
                errors.__exit__(type(exc), exc, exc.__traceback__)  # raises a translation
            finally:
                db.lock.release()
            raise
        return self._conn

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            try:
                self._end(commit=kind is None)
            except BaseException as failure:
                self._errors.__exit__(type(failure), failure, failure.__traceback__)
                raise
            self._errors.__exit__(kind, exc, tb)  # the block's own error: translated
        finally:
            self._db.lock.release()

    def _check(self) -> None:
        """Refuse before the lock is taken (nothing by default)."""

    def _start(self) -> apsw.Connection:
        raise NotImplementedError

    def _end(self, commit: bool) -> None:
        raise NotImplementedError


class _Outer(_Locked):
    """What :meth:`Database.transaction` returns outside this thread's transaction:
    ``BEGIN IMMEDIATE``, and at the end ``COMMIT`` (or ``ROLLBACK``) with the hooks. A
    class, not a generator: every ``remember()`` is one. The steps and their order are
    the generator's it replaced."""

    __slots__ = ("_join", "_begun")

    def __init__(self, db: Database, join: bool) -> None:
        self._db = db
        self._join = join

    def _check(self) -> None:
        self._db.require_open()
        self._db.require_writable()

    def _start(self) -> apsw.Connection:
        conn, self._begun = self._begin()
        return conn

    def _end(self, commit: bool) -> None:
        self._finish(self._conn, self._begun, commit)

    def _begin(self) -> tuple[apsw.Connection, int]:
        """``BEGIN IMMEDIATE`` and a new outermost frame (this thread holds the lock);
        the connection and its ``total_changes()`` then."""
        db = self._db
        conn = db.require_open()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except apsw.BusyError as exc:
            raise DatabaseBusyError(
                f"{db.path} stayed locked by another writer for "
                f"{db.options.busy_timeout_ms} ms; try again",
                result_code=result_code(exc),
            ) from exc
        db._open_frame()
        db._joined = self._join
        begun = conn.total_changes()
        try:
            db._watcher.notice(conn)
        except BaseException:
            self._finish(conn, begun, commit=False)
            raise
        return conn, begun

    def _finish(self, conn: apsw.Connection, begun: int, commit: bool) -> None:
        """COMMIT (or ROLLBACK) and the hooks; then, if the transaction changed
        ``reset_after_changes`` rows since ``total_changes()`` was ``begun``, the
        schema reset."""
        try:
            self._close(conn, commit)
        finally:
            _reset_after_large(conn, begun, self._db.reset_after_changes)

    def _close(self, conn: apsw.Connection, commit: bool) -> None:
        db = self._db
        on_commit, on_rollback, aborted = db._close_outer_frame()
        if commit and (aborted or not conn.in_transaction):
            if conn.in_transaction:  # a joined block wrote half: none of it may stay
                conn.execute("ROLLBACK")
            run_hooks(reversed(on_rollback))
            raise TransactionAbortedError(
                "SQLite rolled this transaction back after an earlier error; nothing was committed"
            )
        if commit:
            try:
                db.write_pending(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                run_hooks(reversed(on_rollback))
                raise
            run_hooks(on_commit)
        else:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            run_hooks(reversed(on_rollback))


class _Savepoint(_Locked):
    """What :meth:`Database.transaction` returns for a block nested in this thread's
    transaction that rolls back alone: ``SAVEPOINT`` ... ``RELEASE`` (or ``ROLLBACK TO``)."""

    __slots__ = ("_name",)

    def _start(self) -> apsw.Connection:
        db = self._db
        conn = db.require_open()
        if db._aborted:
            raise TransactionAbortedError(_ABORTED)
        self._name = f"tm_savepoint_{db._depth}"
        conn.execute(f"SAVEPOINT {self._name}")
        db._open_frame()
        return conn

    def _end(self, commit: bool) -> None:
        db, conn, name = self._db, self._conn, self._name
        if commit:
            try:
                conn.execute(f"RELEASE {name}")
            except BaseException:
                self._rollback()
                raise
            db._close_inner_frame(commit=True)
        else:
            self._rollback()

    def _rollback(self) -> None:
        """Undo the savepoint; if SQLite already dropped the whole transaction, remember it."""
        db, conn, name = self._db, self._conn, self._name
        try:
            if conn.in_transaction:
                conn.execute(f"ROLLBACK TO {name}")
                conn.execute(f"RELEASE {name}")
            else:
                db._aborted = True
        except apsw.Error:
            db._aborted = True
        finally:
            db._close_inner_frame(commit=False)


class _Joined:
    """What :meth:`Database.transaction` returns for a block that joins this thread's
    open transaction (the block under way holds the lock and translates errors): a
    class, not a generator, because every write inside ``remember()`` joins one. Does
    what the generator's joined branch did, in the same order."""

    __slots__ = ("_db", "_conn", "_changes", "_outer_joined")

    def __init__(self, db: Database) -> None:
        self._db = db

    def __enter__(self) -> apsw.Connection:
        db = self._db
        conn = db.require_open()
        if db._aborted:
            raise TransactionAbortedError(_ABORTED)
        self._conn = conn
        self._changes = conn.total_changes()
        self._outer_joined = db._joined
        db._joined = True
        db._open_frame()
        return conn

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        db = self._db
        if kind is None:
            db._joined = self._outer_joined
            db._close_inner_frame(commit=True)
            return
        try:
            if self._conn.total_changes() != self._changes:
                db._aborted = True  # half of it may be written: all must go
            db._close_inner_frame(commit=False)
        finally:
            db._joined = self._outer_joined


class _ThreadReader:
    """Holds one thread's read connection; when the thread ends, it is released."""

    __slots__ = ("conn", "version", "pinned", "__weakref__")

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self.pinned: int | None = None
        self.version: int | None = None
        """Its ``data_version`` at its last :meth:`Database.change_stamp` (``None``: never)."""


class _Reading:
    """What :meth:`Database.reading` returns: a class, not a generator, because every
    uncached read pays for it. While a block reads through this thread's own connection,
    :meth:`Database.close` waits for it; the writer (in memory, or inside this thread's
    transaction) is used under the write lock. ``apsw`` errors leave as
    :class:`~persistence.TieredMemoryError` (see :class:`storage_errors`)."""

    __slots__ = ("_db", "_errors", "_locked", "_counted")

    def __init__(self, db: Database) -> None:
        self._db = db
        self._errors = storage_errors(
            db._read_label, None if db._in_memory else db.path, os_errors=False
        )
        self._locked = False
        self._counted = False

    def __enter__(self) -> apsw.Connection:
        db, errors = self._db, self._errors
        errors.__enter__()
        try:
            if db._in_memory or db.in_transaction:
                db.lock.acquire()
                self._locked = True
                return db.require_open()
            conn = db._thread_reader()
            with db._readers_cond:
                db.require_open()
                db._reads.append(None)
            self._counted = True
            return conn
        except BaseException as exc:
            self._leave()
            errors.__exit__(type(exc), exc, exc.__traceback__)  # raises a translation
            raise

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self._leave()
        finally:
            self._errors.__exit__(kind, exc, tb)

    def _leave(self) -> None:
        db = self._db
        if self._locked:
            self._locked = False
            db.lock.release()
        elif self._counted:
            self._counted = False
            with db._readers_cond:
                db._reads.pop()
                if not db._reads and db._writer is None:
                    db._readers_cond.notify_all()  # close() waits for the last read


def _reset_after_large(conn: apsw.Connection, begun: int, threshold: int) -> None:
    """The schema reset after a transaction of ``threshold`` rows; a failure only
    leaves later commits slower: logged, never raised."""
    try:
        if conn.total_changes() - begun >= threshold:
            connection_reset_schema(conn)
    except apsw.Error as exc:
        logger.debug("schema reset after a large transaction skipped: %s", exc)

"""Open APSW connections under one policy, modelled on ``apsw.bestpractice``.

Each pragma has a small named function; :func:`connect` applies the ones that never
write to the file, in one place, to every connection. :func:`connection_wal` writes the
file header, so the store calls it only after checking that the file is ours.
:func:`connect_read_only` opens an existing file with SQLite's read-only flag, also on
read-only storage (see its docstring for how a WAL file is read there).
"""

from __future__ import annotations

import errno
import logging
import os
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

from persistence.errors import (
    CorruptDatabaseOpenError,
    DatabaseOpenError,
    MissingDirectoryError,
    MissingFileError,
    NotADatabaseError,
    ReadOnlyError,
    TieredMemoryError,
)
from persistence.records import Synchronous
from persistence.sqlite.encryption import apply_key, check_file_for_key, wrong_key
from persistence.sqlite.erasure import connection_secure_delete
from persistence.sqlite.planner import fix_shadow_statistics, refresh_statistics
from persistence.sqlite.translate import read_only_storage, storage_errors
from persistence.validation import require_choice, require_int

logger = logging.getLogger("tiered_memory")

MEMORY_PATH = ":memory:"


@dataclass(frozen=True, slots=True)
class ConnectionOptions:
    """Per-connection settings. ``synchronous="FULL"`` also survives power loss.

    ``key`` (bytes, see :mod:`persistence.sqlite.encryption`) is given to every connection
    before it reads anything; it is left out of the repr.
    """

    synchronous: Synchronous = "NORMAL"
    busy_timeout_ms: int = 5000
    wal_autocheckpoint: int = 1000
    key: bytes | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        require_choice(self.synchronous, "synchronous", ("NORMAL", "FULL"))
        for name in ("busy_timeout_ms", "wal_autocheckpoint"):
            require_int(getattr(self, name), name, minimum=0, maximum=2**31 - 1)


BUSY_POLL_MS = (1.0, 5.0)
"""A connection waiting for another's lock tries again after this many ms (random)."""


class SteadyBusyWait:
    """SQLite's busy handler, trying at a steady pace until ``ms`` have passed.

    SQLite's own (``busy_timeout``) backs off to one try every 100 ms after the first
    second, while a writer that just arrived tries after 1, 2, 5 ms: with many writers
    the one that had waited longest lost every race to newcomers and failed at the
    timeout (2 of 24,600 calls, 16 processes and 8 threads on one file). This one tries
    every 1-5 ms (random, so waiters do not move in step) for as long as any other.
    """

    __slots__ = ("_ms", "_since", "_sleep", "_clock", "_random")

    def __init__(
        self,
        ms: int,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ms = ms
        self._since = 0.0
        self._sleep, self._clock = sleep, clock
        self._random = random.Random()

    def __call__(self, tries: int) -> bool:
        """``tries``: SQLite's count of earlier calls for this lock (0: a new wait).
        True: sleep a little and try again; False: give up (``SQLITE_BUSY``)."""
        now = self._clock()
        if tries == 0:
            self._since = now
        left_ms = self._ms - (now - self._since) * 1000
        if left_ms < 0.5:  # not even a try's worth left
            return False
        self._sleep(min(left_ms, self._random.uniform(*BUSY_POLL_MS)) / 1000)
        return True


def connection_busy_timeout(conn: apsw.Connection, ms: int) -> None:
    """Wait up to ``ms`` for another connection's lock instead of failing at once,
    trying every few ms (:class:`SteadyBusyWait`); ``0``: never wait."""
    if ms == 0:
        conn.set_busy_timeout(0)
    else:
        conn.set_busy_handler(SteadyBusyWait(ms))


def connection_foreign_keys(conn: apsw.Connection) -> None:
    """Enforce foreign keys (transcripts belong to sessions)."""
    conn.pragma("foreign_keys", "ON")


def connection_synchronous(conn: apsw.Connection, level: Synchronous) -> None:
    """Set explicitly: this SQLite build defaults WAL mode to FULL."""
    conn.pragma("synchronous", level)


def connection_temp_store(conn: apsw.Connection) -> None:
    """Statement journals in RAM: every write that fires a trigger opens one, and on
    disk that cost 30-50 µs a row (a trigger made an insert 3-4x slower)."""
    conn.pragma("temp_store", "MEMORY")


def connection_reset_schema(conn: apsw.Connection) -> None:
    """Drop this connection's parsed schema and its virtual tables' per-connection
    state; both are rebuilt at the next statement (the page cache stays).

    FTS5 keeps the pending terms of a connection's writes in a hash table that grows with
    the largest transaction and never shrinks: every later commit clears and sorts all
    of its slots (after a 10k-memory transaction, 40-80 µs a commit, a quarter of a
    ``remember()``). ``writable_schema = RESET`` also leaves ``writable_schema`` off,
    as it always is here.
    """
    conn.execute("PRAGMA writable_schema = RESET")


WRITER_CACHE_KIB = 32768
"""Page cache of the write connection. SQLite's default (2 MiB) holds a tenth of the
keyword index at 10k memories, so FTS5's merges and the keyword window's neighbour
lookups read most pages back through the WAL: with 32 MiB a commit's keyword work took
a third of the time at 10k memories. The cache fills only as far as the file is read."""


def connection_cache_size(conn: apsw.Connection, kib: int) -> None:
    """Let this connection's page cache grow to ``kib`` KiB."""
    conn.pragma("cache_size", -kib)


def connection_wal_autocheckpoint(conn: apsw.Connection, pages: int) -> None:
    """Checkpoint the WAL back into the file every ``pages`` pages."""
    conn.pragma("wal_autocheckpoint", pages)


def connection_optimize(conn: apsw.Connection, options: ConnectionOptions, at_open: bool) -> None:
    """Refresh the query planner's statistics where they are stale, if the lock is free.

    Without them, a filter such as ``tags + agent_id`` picks the wrong index and runs
    several times slower. At open every table is checked, as ``PRAGMA optimize=0x10002``
    (the form SQLite recommends at open) does, but with its analysis limit and without
    FTS5's shadow tables (:func:`~persistence.sqlite.planner.refresh_statistics`): that
    pragma analyzed the whole keyword index at every open (0.2-0.8 s at 1M memories).
    At close, the plain pragma (limited) refreshes what this connection's queries used.
    It never waits for another writer: opening or closing next to a busy process must
    not stall. A damaged index is left for ``check_integrity`` to report: the file must
    still open so that it can be checked, exported or restored. FTS5's shadow tables
    keep fixed statistics (see :mod:`persistence.sqlite.sql.planner_sql`): a file that
    has others gets them here, at its next writable open.
    """
    conn.set_busy_timeout(0)
    try:
        if at_open:
            refresh_statistics(conn)
        else:
            conn.pragma("optimize")
        fix_shadow_statistics(conn)  # FTS5's statements plan right without statistics
    except (apsw.BusyError, apsw.LockedError, apsw.CorruptError, apsw.FullError,
            apsw.ReadOnlyError, apsw.IOError) as exc:  # fmt: skip
        logger.debug("pragma optimize skipped: %s", exc)
        if conn.in_transaction:  # a commit that failed (a full disk) left it open
            conn.execute("ROLLBACK")
    finally:
        connection_busy_timeout(conn, options.busy_timeout_ms)


def connection_wal(conn: apsw.Connection) -> None:
    """Switch the file to write-ahead logging (persistent; writes the header once)."""
    if conn.readonly("main"):
        return
    mode = conn.pragma("journal_mode", "wal")
    if str(mode).lower() not in ("wal", "memory"):
        raise DatabaseOpenError(f"could not enable WAL mode (journal_mode is {mode!r})")


def connect(path: str, options: ConnectionOptions) -> apsw.Connection:
    """Open ``path`` (or ``":memory:"``) read-write under the connection policy.

    New files are created with mode 0600 (SQLite gives the -wal and -shm files the
    same mode). A missing directory, a directory, or a file that is not SQLite raises a
    specific error and leaves everything as it was; so does a file SQLite can only read
    here (:class:`ReadOnlyError`: open it with ``read_only=True``).
    """
    with storage_errors(f"opening {path}", None if path == MEMORY_PATH else path, opening=True):
        if path != MEMORY_PATH:
            _prepare_file(Path(path), options.key)
        try:
            conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE)
        except apsw.CantOpenError as exc:
            raise _cannot_open(path, exc) from exc
        with _closed_on_failure(conn, path, _cannot_open, options.key):
            connection_key(conn, options.key)
            connection_busy_timeout(conn, options.busy_timeout_ms)
            conn.execute("SELECT count(*) FROM sqlite_schema").fetchall()
            if path != MEMORY_PATH and conn.readonly("main"):
                raise ReadOnlyError(
                    f"{path} can only be read here (read-only storage or no write "
                    "permission): open it with read_only=True to read it (nothing was written)"
                )
            connection_foreign_keys(conn)
            connection_synchronous(conn, options.synchronous)
            connection_wal_autocheckpoint(conn, options.wal_autocheckpoint)
            connection_temp_store(conn)
            connection_secure_delete(conn)
        return conn


def connection_key(conn: apsw.Connection, key: bytes | None) -> None:
    """Give an encrypted file's key first of all (no-op for a plain file)."""
    if key is not None:
        apply_key(conn, key)


@contextmanager
def _closed_on_failure(
    conn: apsw.Connection,
    path: str,
    cannot_open: Callable[[str, apsw.CantOpenError], TieredMemoryError],
    key: bytes | None = None,
) -> Iterator[None]:
    """Set up a new connection: on any failure close it, naming what SQLite found."""
    try:
        yield
    except apsw.NotADBError as exc:
        conn.close()
        if key is not None:
            raise wrong_key(path) from None
        raise NotADatabaseError(f"{path} is not a SQLite database (left untouched)") from exc
    except apsw.CorruptError as exc:
        conn.close()
        raise CorruptDatabaseOpenError(f"{path} is damaged: {exc}; restore a backup") from exc
    except apsw.CantOpenError as exc:
        conn.close()
        raise cannot_open(path, exc) from exc
    except BaseException:
        conn.close()
        raise


def _cannot_open(path: str, exc: apsw.CantOpenError) -> DatabaseOpenError | ReadOnlyError:
    if path != MEMORY_PATH and (read_only_storage(path) or not os.access(path, os.W_OK)):
        return ReadOnlyError(
            f"{path} is on read-only storage (or not writable): open it with "
            "read_only=True to read it (nothing was written)"
        )
    return DatabaseOpenError(f"cannot open {path}: {exc}")


def connect_read_only(path: str, options: ConnectionOptions) -> apsw.Connection:
    """Open an existing database with SQLite's read-only flag: nothing can write to it.

    Creates nothing: a missing, empty or non-SQLite file raises a specific error. How
    the file is opened depends on where it is (SQLite reads a WAL-mode file through its
    ``-shm`` index, which it cannot create on read-only storage):

    - writable storage: plainly, with SQLite's locks. If the ``-wal`` and ``-shm`` files
      do not exist SQLite creates them (empty); :func:`tidy_wal_files` removes them again.
    - read-only storage, no ``-wal``: ``immutable=1`` (no locks, no index; the database
      file holds everything).
    - read-only storage, ``-wal`` and ``-shm``: plainly; SQLite reads the index read-only.
    - read-only storage, a ``-wal`` without ``-shm``: exclusive locking mode through a
      VFS without locks, so the WAL's index is built in RAM and its commits are seen.

    "Read-only storage" is also a folder this user cannot create files in, or a file this
    user cannot write (mode ``0444``): SQLite could not create the ``-wal`` and ``-shm``
    there, or could not remove them again, so none is created.

    The second and last take no locks a writer elsewhere would see, as read-only storage
    has no writer: a process writing the same file through another, writable mount (or as
    another user) is not coordinated with (copy the file first, or read it there).
    """
    file = Path(path)
    with storage_errors(f"opening {path} read-only", path, opening=True):
        _require_database_file(file, options.key)
        name, flags, vfs = _read_only_target(file, options.key)
        try:
            conn = apsw.Connection(name, flags=flags, vfs=vfs)
        except apsw.CantOpenError as exc:
            raise _cannot_read(path, exc) from exc
        with _closed_on_failure(conn, path, _cannot_read, options.key):
            connection_key(conn, options.key)
            if vfs:
                conn.pragma("locking_mode", "exclusive")
            connection_busy_timeout(conn, options.busy_timeout_ms)
            conn.execute("SELECT count(*) FROM sqlite_schema").fetchall()
            connection_foreign_keys(conn)
        return conn


def connect_snapshot(path: Path, key: bytes | None) -> apsw.Connection:
    """Open a snapshot or staging file read-only, with the key of the store it belongs to
    (the caller has checked it is a database; reading it may still fail)."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        connection_key(conn, key)
    except BaseException:
        conn.close()
        raise
    return conn


def _require_database_file(path: Path, key: bytes | None) -> None:
    """A read-only open needs an existing, non-empty SQLite file."""
    if not path.parent.is_dir():
        raise MissingDirectoryError(f"directory {path.parent} does not exist (nothing was read)")
    if path.is_dir():
        raise NotADatabaseError(f"{path} is a directory, not a database file")
    if not path.exists():
        raise MissingFileError(f"no database at {path} (a read-only open creates nothing)")
    check_file_for_key(path, key, doing="read")
    if path.stat().st_size == 0:
        raise NotADatabaseError(
            f"{path} is empty, not a tiered-memory database (left untouched; a read-only "
            "open creates nothing)"
        )


def _read_only_target(path: Path, key: bytes | None) -> tuple[str, int, str | None]:
    """``(name, flags, vfs)`` to open ``path`` read-only (see :func:`connect_read_only`)."""
    flags = apsw.SQLITE_OPEN_READONLY
    if not cannot_write_beside(path):
        return str(path), flags, None
    if not Path(f"{path}-wal").exists():
        uri = "file:" + urllib.parse.quote(str(path)) + "?immutable=1"
        return uri, flags | apsw.SQLITE_OPEN_URI, None
    if Path(f"{path}-shm").exists():
        return str(path), flags, None
    if key is not None:
        # The cipher works through its own VFS, which a Python VFS cannot sit on.
        raise DatabaseOpenError(
            f"{path} is encrypted and on read-only storage with a -wal but no -shm file: "
            "copy the database and its -wal to a writable folder to read it"
        )
    return str(path), flags, _no_lock_vfs()


def _cannot_read(path: str, exc: apsw.CantOpenError) -> DatabaseOpenError:
    where = Path(path).parent
    return DatabaseOpenError(
        f"cannot read {path} ({exc}): SQLite reads a WAL-mode database through "
        f"{Path(path).name}-wal and -shm files beside it and could not open or create them in "
        f"{where}; copy the database (and its -wal) to a writable folder to read it"
    )


class _NoLockFile(apsw.VFSFile):
    """A file on read-only storage: nothing there can change, so it takes no locks."""

    def __init__(self, name: str | apsw.URIFilename | None, flags: list[int]) -> None:
        super().__init__("", name, flags)

    def xLock(self, level: int) -> None:
        pass

    def xUnlock(self, level: int) -> None:
        pass

    def xCheckReservedLock(self) -> bool:
        return False


class _NoLockVFS(apsw.VFS):
    """The default VFS, but its files take no locks (for read-only storage only)."""

    def __init__(self) -> None:
        super().__init__(_NO_LOCK_VFS_NAME, "")

    def xOpen(self, name: str | apsw.URIFilename | None, flags: list[int]) -> apsw.VFSFile:
        return _NoLockFile(name, flags)


_NO_LOCK_VFS_NAME = "tiered-memory-read-only-media"
_no_lock_vfs_lock = threading.Lock()
_no_lock_vfs_instance: list[_NoLockVFS] = []


def _no_lock_vfs() -> str:
    """The name of the lock-free VFS, registered with SQLite on first use."""
    with _no_lock_vfs_lock:
        if not _no_lock_vfs_instance:
            _no_lock_vfs_instance.append(_NoLockVFS())
    return _NO_LOCK_VFS_NAME


def may_leave_wal_files(path: str) -> bool:
    """True if a read-only open of ``path`` would create its -wal and -shm files (writable
    storage where neither exists): see :func:`tidy_wal_files`."""
    return (
        path != MEMORY_PATH
        and not Path(f"{path}-wal").exists()
        and not Path(f"{path}-shm").exists()
        and not cannot_write_beside(Path(path))
    )


def cannot_write_beside(path: Path) -> bool:
    """True if a read-only open of ``path`` must create no file beside it: read-only
    storage, a folder this user cannot write to, or a file it cannot write (a read-only
    connection could create its -wal/-shm there, but never remove them again)."""
    return (
        read_only_storage(path)
        or not os.access(path.parent, os.W_OK | os.X_OK)
        or not os.access(path, os.W_OK)
    )


def tidy_wal_files(path: str, key: bytes | None = None) -> None:
    """Remove the empty -wal and its -shm that read-only connections to ``path`` created.

    SQLite's read-only connections cannot remove them; its last read-write connection
    does, on close, once it holds the exclusive lock. So: if the WAL is still empty
    (nothing was written meanwhile), open read-write, read the schema and close. An
    empty WAL has nothing to checkpoint, so the database file is not written; another
    process that has the file open holds a lock that stops the removal. Best effort.
    """
    wal = Path(f"{path}-wal")
    try:
        if not wal.exists() or wal.stat().st_size != 0:
            return
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READWRITE)
        try:
            connection_key(conn, key)
            conn.set_busy_timeout(0)
            conn.execute("SELECT 1 FROM sqlite_schema LIMIT 1").fetchall()
        finally:
            conn.close()
    except (apsw.Error, OSError) as exc:
        logger.debug("left %s-wal and -shm for a later close: %s", path, exc)


def _prepare_file(path: Path, key: bytes | None) -> None:
    if not path.parent.is_dir():
        raise MissingDirectoryError(
            f"directory {path.parent} does not exist: create it first (nothing was written)"
        )
    if path.is_dir():
        raise NotADatabaseError(f"{path} is a directory, not a database file")
    if path.exists():
        check_file_for_key(path, key, doing="written")
        return
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        check_file_for_key(path, key, doing="written")
        return
    except OSError as exc:
        if exc.errno in (errno.EROFS, errno.ENOSPC, errno.EDQUOT):
            raise  # storage_errors says which: read-only or full
        raise DatabaseOpenError(f"cannot create {path}: {exc.strerror}") from exc
    os.close(fd)


Row = tuple[Any, ...]


def query_all(conn: apsw.Connection, sql: str, params: Sequence[Any] = ()) -> list[Row]:
    """Every row of ``sql`` with bound ``params``."""
    return conn.execute(sql, params).fetchall()


def query_one(conn: apsw.Connection, sql: str, params: Sequence[Any] = ()) -> Row | None:
    """The first row of ``sql`` with bound ``params``, or ``None``."""
    row: Row | None = conn.execute(sql, params).fetchone()
    return row


def query_value(conn: apsw.Connection, sql: str, params: Sequence[Any] = ()) -> Any:
    """The first column of the first row (``None`` when there is no row)."""
    row = query_one(conn, sql, params)
    return None if row is None else row[0]


@contextmanager
def read_snapshot(conn: apsw.Connection) -> Iterator[None]:
    """Run the block's reads in one snapshot (a read transaction unless one is open)."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        try:
            conn.execute("ROLLBACK")  # nothing was written
        except apsw.Error:
            # SQLite repeats an error of the reads (e.g. a damaged page) when the
            # transaction ends; once it has ended, the reads' own outcome stands.
            if conn.in_transaction:
                raise

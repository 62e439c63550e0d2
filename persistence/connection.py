"""Open APSW connections under one policy, modelled on ``apsw.bestpractice``.

Each pragma has a small named function; :func:`connect` applies the ones that never
write to the file, in one place, to every connection. :func:`connection_wal` writes the
file header, so the store calls it only after checking that the file is ours.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import apsw
import sqlite_vec

from persistence.errors import (
    CorruptDatabaseError,
    DatabaseOpenError,
    InvalidInputError,
    InvalidTypeError,
    MissingDirectoryError,
    NotADatabaseError,
)

SQLITE_HEADER = b"SQLite format 3\x00"
MEMORY_PATH = ":memory:"

Synchronous = Literal["NORMAL", "FULL"]


@dataclass(frozen=True, slots=True)
class ConnectionOptions:
    """Per-connection settings. ``synchronous="FULL"`` also survives power loss."""

    synchronous: Synchronous = "NORMAL"
    busy_timeout_ms: int = 5000
    wal_autocheckpoint: int = 1000

    def __post_init__(self) -> None:
        if self.synchronous not in ("NORMAL", "FULL"):
            raise InvalidInputError(
                f"synchronous must be 'NORMAL' or 'FULL', got {self.synchronous!r}"
            )
        for name in ("busy_timeout_ms", "wal_autocheckpoint"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidTypeError(f"{name} must be an int, got {type(value).__name__}")
            if not 0 <= value <= 2**31 - 1:
                raise InvalidInputError(f"{name} must be within 0 and 2**31 - 1, got {value}")


def connection_busy_timeout(conn: apsw.Connection, ms: int) -> None:
    """Wait up to ``ms`` for another connection's lock instead of failing at once."""
    conn.set_busy_timeout(ms)


def connection_foreign_keys(conn: apsw.Connection) -> None:
    """Enforce foreign keys (transcripts belong to sessions)."""
    conn.pragma("foreign_keys", "ON")


def connection_synchronous(conn: apsw.Connection, level: Synchronous) -> None:
    """Set explicitly: this SQLite build defaults WAL mode to FULL."""
    conn.pragma("synchronous", level)


def connection_wal_autocheckpoint(conn: apsw.Connection, pages: int) -> None:
    """Checkpoint the WAL back into the file every ``pages`` pages."""
    conn.pragma("wal_autocheckpoint", pages)


def connection_sqlite_vec(conn: apsw.Connection) -> None:
    """Load the sqlite-vec extension, then close the door to further extensions."""
    conn.enable_load_extension(True)
    try:
        conn.load_extension(sqlite_vec.loadable_path())
    finally:
        conn.enable_load_extension(False)


def connection_optimize(conn: apsw.Connection, options: ConnectionOptions, at_open: bool) -> None:
    """Refresh the query planner's statistics where they are stale, if the lock is free.

    Without them, a filter such as ``tags + agent_id`` picks the wrong index and runs
    several times slower. At open, 0x10002 is the cheap form APSW recommends. It never
    waits for another writer: opening or closing next to a busy process must not stall.
    A damaged index is left for ``check_integrity`` to report: the file must still open
    so that it can be checked, exported or restored.
    """
    conn.set_busy_timeout(0)
    try:
        if at_open:
            conn.pragma("optimize", 0x10002)
        else:
            conn.pragma("optimize")
    except (apsw.BusyError, apsw.LockedError, apsw.CorruptError):
        pass
    finally:
        conn.set_busy_timeout(options.busy_timeout_ms)


def connection_wal(conn: apsw.Connection) -> None:
    """Switch the file to write-ahead logging (persistent; writes the header once)."""
    if conn.readonly("main"):
        return
    mode = conn.pragma("journal_mode", "wal")
    if str(mode).lower() not in ("wal", "memory"):
        raise DatabaseOpenError(f"could not enable WAL mode (journal_mode is {mode!r})")


def connect(path: str, options: ConnectionOptions) -> apsw.Connection:
    """Open ``path`` (or ``":memory:"``) under the connection policy.

    New files are created with mode 0600 (SQLite gives the -wal and -shm files the
    same mode). A missing directory, a directory, or a file that is not SQLite raises a
    specific error and leaves everything as it was.
    """
    if path != MEMORY_PATH:
        _prepare_file(Path(path))
    try:
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE)
    except apsw.CantOpenError as exc:
        raise DatabaseOpenError(f"cannot open {path}: {exc}") from exc
    try:
        connection_busy_timeout(conn, options.busy_timeout_ms)
        conn.execute("SELECT count(*) FROM sqlite_schema").fetchall()
        connection_foreign_keys(conn)
        connection_synchronous(conn, options.synchronous)
        connection_wal_autocheckpoint(conn, options.wal_autocheckpoint)
        connection_sqlite_vec(conn)
    except apsw.NotADBError as exc:
        conn.close()
        raise NotADatabaseError(f"{path} is not a SQLite database (left untouched)") from exc
    except apsw.CorruptError as exc:
        conn.close()
        raise CorruptDatabaseError(f"{path} is damaged: {exc}; restore a backup") from exc
    except BaseException:
        conn.close()
        raise
    return conn


def _prepare_file(path: Path) -> None:
    if not path.parent.is_dir():
        raise MissingDirectoryError(
            f"directory {path.parent} does not exist: create it first (nothing was written)"
        )
    if path.is_dir():
        raise NotADatabaseError(f"{path} is a directory, not a database file")
    if path.exists():
        _check_header(path)
        return
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        _check_header(path)
        return
    except OSError as exc:
        raise DatabaseOpenError(f"cannot create {path}: {exc.strerror}") from exc
    os.close(fd)


def _check_header(path: Path) -> None:
    try:
        with path.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise DatabaseOpenError(f"cannot read {path}: {exc.strerror}") from exc
    if header and header != SQLITE_HEADER:
        raise NotADatabaseError(f"{path} is not a SQLite database (left untouched)")


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

"""SQLite's and the OS's failures turned into the library's errors (:mod:`persistence.errors`):
``storage_errors`` wraps every public call that touches the file."""

from __future__ import annotations

import errno
import json
import os
from contextvars import ContextVar, Token
from pathlib import Path
from types import TracebackType

import apsw

from persistence.errors import (
    CorruptDatabaseError,
    CorruptDatabaseOpenError,
    DatabaseBusyError,
    EncryptionKeyError,
    ReadOnlyError,
    StorageError,
    StorageFullError,
    TieredMemoryError,
)
from persistence.sqlite.encryption import looks_encrypted

# --- turning SQLite's and the OS's failures into the errors above -----------------------

_translating: ContextVar[bool] = ContextVar("tiered_memory_translating", default=False)
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class storage_errors:  # noqa: N801 - a context manager used like a function
    """Raise a :class:`TieredMemoryError` for an ``apsw.Error`` (and, with ``os_errors``, an
    ``OSError``) that escapes the block, naming ``doing`` (``"backing up a.db to b.db"``).

    ``place`` (a file or folder) is looked at to tell a read-only or full disk from other
    failures. Blocks nest: the outermost one translates, so the message names what the
    caller asked for, not an inner step. ``opening``: damage found in the block is
    reported as found while opening (:class:`CorruptDatabaseOpenError`). Every error
    translated from SQLite carries its extended result code (``result_code``). (A class,
    not a generator: reads use it on every call, so it must cost little.)
    """

    __slots__ = ("doing", "place", "os_errors", "opening", "_token")

    def __init__(self, doing: str, place: str | os.PathLike[str] | None = None, *,
                 os_errors: bool = True, opening: bool = False) -> None:  # fmt: skip
        self.doing = doing
        self.place = place
        self.os_errors = os_errors
        self.opening = opening
        self._token: Token[bool] | None = None

    def __enter__(self) -> None:
        if not _translating.get():
            self._token = _translating.set(True)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        token, self._token = self._token, None
        if token is None:
            return  # an outer block translates
        _translating.reset(token)
        if exc is None or isinstance(exc, TieredMemoryError):
            return
        if isinstance(exc, SQLITE_ERRORS):
            raise _from_sqlite(exc, self.doing, self.place, self.opening) from exc
        if self.os_errors and isinstance(exc, OSError):
            raise _from_os(exc, self.doing, self.place) from exc


_FULL_ADVICE = "free some space and try again (nothing was changed)"
_READ_ONLY_ADVICE = (
    "nothing was changed: read a database there with read_only=True (the command line's "
    "read commands do), and write to writable storage"
)


SQLITE_ERRORS = (apsw.Error, UnicodeDecodeError, json.JSONDecodeError)
"""What reading or writing through APSW raises: SQLite's errors, and a value that does
not decode: TEXT that is not UTF-8, a JSON column that is not JSON (only a damaged page
leaves either: the library writes str and valid JSON)."""


def _from_sqlite(
    exc: apsw.Error | UnicodeDecodeError | json.JSONDecodeError,
    doing: str,
    place: str | os.PathLike[str] | None,
    opening: bool = False,
) -> Exception:
    damaged = CorruptDatabaseOpenError if opening else CorruptDatabaseError
    if isinstance(exc, UnicodeDecodeError | json.JSONDecodeError):
        what = "not UTF-8" if isinstance(exc, UnicodeDecodeError) else "not valid JSON"
        return damaged(
            f"{doing} failed: a value in the file is {what}, so the file is damaged; run "
            "`tiered-memory check`"
        )
    code = result_code(exc)
    if isinstance(exc, apsw.FullError) or (isinstance(exc, apsw.IOError) and disk_full(place)):
        return StorageFullError(
            f"{doing} failed: the disk is full ({exc}); {_FULL_ADVICE}", result_code=code
        )
    if isinstance(exc, apsw.ReadOnlyError) or (
        isinstance(exc, apsw.CantOpenError | apsw.IOError) and read_only_storage(place)
    ):
        return ReadOnlyError(
            f"{doing} failed: {place or 'the file'} is read-only; {_READ_ONLY_ADVICE}",
            result_code=code,
        )
    if isinstance(exc, apsw.BusyError | apsw.LockedError):
        return DatabaseBusyError(
            f"{doing} failed: another connection held a lock ({exc}); try again",
            result_code=code,
        )
    if isinstance(exc, apsw.NotADBError) and _encrypted_file(place):
        return EncryptionKeyError(
            f"{doing} failed: {place} no longer decrypts with the key this handle holds: "
            "another process changed its key (rekey) or restored another file over it, or "
            "it is damaged; reopen it with its current key, or run `tiered-memory check`"
        )
    if isinstance(exc, apsw.CorruptError | apsw.NotADBError):
        return damaged(
            f"{doing} failed: SQLite reports damage ({exc}); run `tiered-memory check`",
            result_code=code,
        )
    return StorageError(
        f"{doing} failed: SQLite reported {type(exc).__name__}: {exc}", result_code=code
    )


def result_code(exc: BaseException) -> int | None:
    """SQLite's extended result code of an ``apsw`` error (``None`` for another)."""
    code = getattr(exc, "extendedresult", None)
    if not isinstance(code, int):
        code = getattr(exc, "result", None)
    return code if isinstance(code, int) and code >= 0 else None


def _encrypted_file(place: str | os.PathLike[str] | None) -> bool:
    """True if ``place`` is a file whose header is an encrypted database's."""
    if place is None:
        return False
    try:
        with open(place, "rb") as handle:
            header = handle.read(24)
    except OSError:
        return False
    return looks_encrypted(header)


def _from_os(exc: OSError, doing: str, place: str | os.PathLike[str] | None) -> Exception:
    where = exc.filename or place
    reason = exc.strerror or str(exc)
    if exc.errno in _FULL_ERRNOS:
        return StorageFullError(f"{doing} failed: the disk is full ({reason}); {_FULL_ADVICE}")
    if exc.errno == errno.EROFS:
        return ReadOnlyError(
            f"{doing} failed: {where} is on read-only storage; {_READ_ONLY_ADVICE}"
        )
    return StorageError(f"{doing} failed: {where}: {reason}")


def _existing(place: str | os.PathLike[str] | None) -> Path | None:
    """``place`` or its nearest existing parent folder."""
    if place is None:
        return None
    path = Path(place)
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def read_only_storage(place: str | os.PathLike[str] | None) -> bool:
    """True if ``place`` (or its folder) sits on a file system mounted read-only."""
    path = _existing(place)
    if path is None:
        return False
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def disk_full(place: str | os.PathLike[str] | None) -> bool:
    """True if the file system holding ``place`` has no block left for this user."""
    path = _existing(place)
    if path is None:
        return False
    try:
        return os.statvfs(path).f_bavail == 0
    except OSError:
        return False

"""psycopg's errors turned into the library's: every failure of a server call leaves as
a :class:`~persistence.errors.TieredMemoryError` subclass that says what to do, with the
location printed without its password (:func:`storage_errors`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import errors as pg

from persistence.errors import (
    AuthenticationError,
    ConnectionLostError,
    DatabaseBusyError,
    DatabaseMissingError,
    ReadOnlyError,
    ServerUnavailableError,
    StorageError,
    StorageFullError,
    TieredMemoryError,
    TransactionAbortedError,
)
from persistence.locations import redact, scrub


def _first_line(exc: BaseException, url: str) -> str:
    primary = exc.diag.message_primary if isinstance(exc, psycopg.Error) else None
    if primary:  # the server's own message (a CONTEXT line may follow it)
        return scrub(primary, url)
    text = str(exc).strip().splitlines()
    return scrub(text[-1] if text else type(exc).__name__, url)


def connect_error(exc: psycopg.Error, url: str) -> TieredMemoryError:
    """The error of a failed connection attempt to ``url``."""
    where, why = redact(url), _first_line(exc, url)
    text = str(exc)
    refused = ("password authentication failed", "no password supplied")
    if isinstance(exc, pg.InvalidPassword | pg.InvalidAuthorizationSpecification) or any(
        phrase in text for phrase in refused
    ):
        return AuthenticationError(f"the server at {where} refused the credentials ({why})")
    if isinstance(exc, pg.InvalidCatalogName) or ("database" in text and "does not exist" in text):
        return DatabaseMissingError(
            f"the server at {where} has no such database ({why}); create it first "
            "(createdb NAME, or CREATE DATABASE)"
        )
    if isinstance(exc, pg.CannotConnectNow | pg.AdminShutdown):
        return ServerUnavailableError(f"the server at {where} is starting or stopping ({why}); "
                                      "try again in a moment")  # fmt: skip
    return ServerUnavailableError(
        f"cannot reach the PostgreSQL server at {where} ({why}); is it running, and are "
        "the host and port right?"
    )


def call_error(exc: psycopg.Error, url: str, *, committing: bool = False) -> TieredMemoryError:
    """The error of a statement that failed (the transaction was rolled back)."""
    why = _first_line(exc, url)
    code = {"sqlstate": getattr(exc, "sqlstate", None)}
    if isinstance(exc, pg.ReadOnlySqlTransaction):
        return ReadOnlyError(f"the store was opened read-only ({why}); nothing was written", **code)
    if isinstance(exc, pg.DiskFull | pg.OutOfMemory | pg.ProgramLimitExceeded):
        return StorageFullError(f"the server is out of space ({why}); nothing was written", **code)
    if isinstance(exc, pg.LockNotAvailable | pg.DeadlockDetected | pg.QueryCanceled):
        return DatabaseBusyError(f"another writer held the lock too long ({why}); retry", **code)
    if isinstance(exc, pg.InFailedSqlTransaction):
        return TransactionAbortedError("an earlier statement of this transaction failed; "
                                       "the whole transaction was rolled back", **code)  # fmt: skip
    if isinstance(exc, (psycopg.OperationalError, pg.AdminShutdown)):
        if committing:
            return ConnectionLostError(
                f"the connection to {redact(url)} broke during COMMIT ({why}); the outcome "
                "is unknown: read the data again before retrying",
                **code,
            )
        return ConnectionLostError(
            f"the connection to {redact(url)} broke ({why}); nothing was written: retry "
            "(the pool reconnects)",
            **code,
        )
    return StorageError(
        f"the PostgreSQL server failed the call ({why}); it was rolled back", **code
    )


@contextmanager
def storage_errors(url: str) -> Iterator[None]:
    """Translate any psycopg error raised in the block (library errors pass through)."""
    try:
        yield
    except psycopg.Error as exc:
        raise call_error(exc, url) from None

"""SQL for ``store_meta``: facts about the file, such as the embedding dimension."""

from __future__ import annotations

import apsw

from persistence.meta_keys import (  # re-exported: the SQL modules read them from here
    DEDUPLICATED_KEY,
    EMBEDDING_DIM_KEY,
    EMBEDDING_ERRORS_KEY,
    EMBEDDING_MODEL_KEY,
    LAST_EMBEDDING_ERROR_KEY,
    NEAR_DUPLICATES_KEY,
    REDACTIONS_KEY,
)
from persistence.sqlite.connection import query_value


def write_meta(conn: apsw.Connection, key: str, value: str | None) -> None:
    """Set (or with ``None`` delete) one fact about the file in ``store_meta``."""
    if value is None:
        conn.execute("DELETE FROM store_meta WHERE key = ?", (key,))
    else:
        conn.execute(
            "INSERT INTO store_meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )


def read_meta(conn: apsw.Connection, key: str) -> str | None:
    """One fact about the file from ``store_meta``, or ``None``."""
    value = query_value(conn, "SELECT value FROM store_meta WHERE key = ?", (key,))
    return None if value is None else str(value)


def add_to_counter(conn: apsw.Connection, key: str, by: int) -> int:
    """Add ``by`` to the counter under ``key`` (missing or not a count: 0) in the
    caller's transaction; returns the new value."""
    value = read_meta(conn, key)
    total = (int(value) if value and value.isdigit() else 0) + by
    write_meta(conn, key, str(total))
    return total


def add_redactions(conn: apsw.Connection, count: int) -> None:
    """Count ``count`` more secrets redacted before they reached the file (in the same
    transaction as the write they were removed from)."""
    if count:
        add_to_counter(conn, REDACTIONS_KEY, count)


def record_embedding_error(conn: apsw.Connection, message: str) -> int:
    """Count one failure of background embedding and keep its message; returns the count.

    Kept in the file so that every process (the operator's ``tiered-memory stats``
    beside a running agent) sees it.
    """
    count = embedding_errors(conn)[0] + 1
    write_meta(conn, EMBEDDING_ERRORS_KEY, str(count))
    write_meta(conn, LAST_EMBEDDING_ERROR_KEY, message)
    return count


def embedding_errors(conn: apsw.Connection) -> tuple[int, str | None]:
    """How many times background embedding failed, and the last failure's message."""
    count = read_meta(conn, EMBEDDING_ERRORS_KEY)
    return (int(count) if count and count.isdigit() else 0), read_meta(
        conn, LAST_EMBEDDING_ERROR_KEY
    )


__all__ = [
    "DEDUPLICATED_KEY",
    "EMBEDDING_DIM_KEY",
    "EMBEDDING_ERRORS_KEY",
    "EMBEDDING_MODEL_KEY",
    "LAST_EMBEDDING_ERROR_KEY",
    "NEAR_DUPLICATES_KEY",
    "REDACTIONS_KEY",
    "add_to_counter",
    "read_meta",
    "write_meta",
]

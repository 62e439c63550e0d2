"""SQL for ``store_meta``: facts about the file, such as the embedding dimension.

Built, not run: each function returns a :class:`~persistence.statements.Statement` that
the caller runs (:func:`~persistence.statements.value` for :func:`read` and :func:`add`).
"""

from __future__ import annotations

from persistence.meta_keys import (  # re-exported: the SQL modules read them from here
    DEDUPLICATED_KEY,
    EMBEDDING_DIM_KEY,
    EMBEDDING_ERRORS_KEY,
    EMBEDDING_MODEL_KEY,
    LAST_EMBEDDING_ERROR_KEY,
    NEAR_DUPLICATES_KEY,
    REDACTIONS_KEY,
)
from persistence.statements import Statement

_READ = "SELECT value FROM store_meta WHERE key = ?"
_WRITE = (
    "INSERT INTO store_meta (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
_DELETE = "DELETE FROM store_meta WHERE key = ?"
# A value that is not a count (empty, signed, not digits) counts as 0, as it always has.
_ADD = (
    "INSERT INTO store_meta (key, value) VALUES (?1, CAST(?2 AS TEXT)) "
    "ON CONFLICT (key) DO UPDATE SET value = CAST("
    "CASE WHEN store_meta.value <> '' AND store_meta.value NOT GLOB '*[^0-9]*' "
    "THEN CAST(store_meta.value AS INTEGER) ELSE 0 END + ?2 AS TEXT) "
    "RETURNING CAST(value AS INTEGER)"
)


def write(key: str, value: str | None) -> Statement:
    """Set (or with ``None`` delete) one fact about the file in ``store_meta``."""
    if value is None:
        return Statement(_DELETE, (key,))
    return Statement(_WRITE, (key, value))


def read(key: str) -> Statement:
    """One fact about the file from ``store_meta`` (no row when there is none)."""
    return Statement(_READ, (key,))


def add(key: str, by: int) -> Statement:
    """Add ``by`` to the counter under ``key`` (missing or not a count: 0) in the
    caller's transaction, in one statement; its one row is the new value."""
    return Statement(_ADD, (key, by))


__all__ = [
    "DEDUPLICATED_KEY",
    "EMBEDDING_DIM_KEY",
    "EMBEDDING_ERRORS_KEY",
    "EMBEDDING_MODEL_KEY",
    "LAST_EMBEDDING_ERROR_KEY",
    "NEAR_DUPLICATES_KEY",
    "REDACTIONS_KEY",
    "add",
    "read",
    "write",
]

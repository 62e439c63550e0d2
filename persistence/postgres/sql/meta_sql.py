"""SQL of ``tm_meta``: facts and counters kept with the data.

Built, not run: each function returns a :class:`~persistence.statements.Statement` that
the caller runs (:func:`~persistence.statements.value` for :func:`read` and :func:`add`).
"""

from __future__ import annotations

from persistence.statements import Statement

_READ = "SELECT value FROM tm_meta WHERE key = %s"
_WRITE = (
    "INSERT INTO tm_meta (key, value) VALUES (%s, %s) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
_DELETE = "DELETE FROM tm_meta WHERE key = %s"
_ADD = (
    "INSERT INTO tm_meta (key, value) VALUES (%s, %s::text) ON CONFLICT (key) "
    "DO UPDATE SET value = ((tm_meta.value)::bigint + %s)::text RETURNING value::bigint"
)


def read(key: str) -> Statement:
    """The value under ``key`` (no row when there is none)."""
    return Statement(_READ, (key,))


def write(key: str, value: str | None) -> Statement:
    """Set (or with ``None`` delete) ``key``."""
    if value is None:
        return Statement(_DELETE, (key,))
    return Statement(_WRITE, (key, value))


def add(key: str, by: int) -> Statement:
    """Add ``by`` to the counter under ``key`` (missing: 0), atomically; its one row is
    the new value."""
    return Statement(_ADD, (key, by, by))

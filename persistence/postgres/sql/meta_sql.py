"""SQL of ``tm_meta``: facts and counters kept with the data."""

from __future__ import annotations

from typing import Any

import psycopg

_READ = "SELECT value FROM tm_meta WHERE key = %s"
_WRITE = (
    "INSERT INTO tm_meta (key, value) VALUES (%s, %s) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
_DELETE = "DELETE FROM tm_meta WHERE key = %s"
_ADD = (
    "INSERT INTO tm_meta (key, value) VALUES (%(k)s, %(by)s::text) ON CONFLICT (key) "
    "DO UPDATE SET value = ((tm_meta.value)::bigint + %(by)s)::text RETURNING value::bigint"
)


def read(conn: psycopg.Connection[Any], key: str) -> str | None:
    """The value under ``key``, or ``None``."""
    row = conn.execute(_READ, (key,)).fetchone()
    return None if row is None else str(row[0])


def write(conn: psycopg.Connection[Any], key: str, value: str | None) -> None:
    """Set (or with ``None`` delete) ``key``."""
    if value is None:
        conn.execute(_DELETE, (key,))
    else:
        conn.execute(_WRITE, (key, value))


def add(conn: psycopg.Connection[Any], key: str, by: int) -> int:
    """Add ``by`` to the counter under ``key`` (missing: 0), atomically; the new value."""
    row = conn.execute(_ADD, {"k": key, "by": by}).fetchone()
    assert row is not None
    return int(row[0])

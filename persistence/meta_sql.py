"""SQL for ``store_meta``: facts about the file, such as the embedding dimension."""

from __future__ import annotations

import apsw

from persistence.connection import query_value

EMBEDDING_DIM_KEY = "embedding_dim"
EMBEDDING_MODEL_KEY = "embedding_model"


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

"""SQL for ``embedding_cache``: embeddings kept by (model id, content hash), so the same
text is embedded once per model. Bounded: the least recently used rows are evicted."""

from __future__ import annotations

from collections.abc import Sequence

import apsw
import numpy as np

from persistence.sqlite.connection import query_all, query_value
from persistence.sqlite.sql.index_sql import blob_of


def lookup(
    conn: apsw.Connection, model_id: str, hashes: Sequence[bytes]
) -> dict[bytes, np.ndarray]:
    """``hash -> float32 vector`` for each of ``hashes`` that is cached for ``model_id``."""
    if not hashes:
        return {}
    marks = ", ".join("?" for _ in hashes)
    rows = query_all(
        conn,
        f"SELECT content_hash, embedding FROM embedding_cache "
        f"WHERE model_id = ? AND content_hash IN ({marks})",
        [model_id, *hashes],
    )
    return {bytes(h): np.frombuffer(blob, dtype="<f4") for h, blob in rows}


def remember(
    conn: apsw.Connection, model_id: str, entries: Sequence[tuple[bytes, np.ndarray]], now: int
) -> None:
    """Add or refresh ``(hash, vector)`` entries (a hit counts as a use)."""
    conn.executemany(
        "INSERT INTO embedding_cache (model_id, content_hash, embedding, used_at) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (model_id, content_hash) DO UPDATE SET "
        "used_at = excluded.used_at",
        [(model_id, h, blob_of(v), now) for h, v in entries],
    )


def evict(conn: apsw.Connection, keep: int) -> int:
    """Delete the least recently used rows beyond ``keep``; returns how many."""
    excess = int(query_value(conn, "SELECT count(*) FROM embedding_cache") or 0) - keep
    if excess <= 0:
        return 0
    conn.execute(
        "DELETE FROM embedding_cache WHERE (model_id, content_hash) IN ("
        "SELECT model_id, content_hash FROM embedding_cache ORDER BY used_at LIMIT ?)",
        (excess,),
    )
    return excess


def count(conn: apsw.Connection) -> int:
    """How many embeddings are cached (all models)."""
    return int(query_value(conn, "SELECT count(*) FROM embedding_cache") or 0)

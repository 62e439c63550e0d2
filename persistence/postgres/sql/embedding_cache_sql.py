"""SQL for ``tm_embedding_cache``: embeddings kept by (scope, model id, content hash), so
the same text is embedded once per model and agent. Bounded per scope: the least
recently used rows are evicted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

_LOOKUP = (
    "SELECT content_hash, embedding FROM tm_embedding_cache "
    "WHERE scope = tm_scope() AND model_id = %s AND content_hash = ANY(%s)"
)
_REMEMBER = (
    "INSERT INTO tm_embedding_cache (model_id, content_hash, embedding, used_at) "
    "VALUES (%s, %s, %b, %s) ON CONFLICT (scope, model_id, content_hash) "
    "DO UPDATE SET used_at = excluded.used_at"
)
_COUNT = "SELECT count(*) FROM tm_embedding_cache WHERE scope = tm_scope()"
_EVICT = (
    "DELETE FROM tm_embedding_cache WHERE (scope, model_id, content_hash) IN ("
    "SELECT scope, model_id, content_hash FROM tm_embedding_cache WHERE scope = tm_scope() "
    "ORDER BY used_at, model_id, content_hash LIMIT %s)"
)


def lookup(
    conn: psycopg.Connection[Any], model_id: str, hashes: Sequence[bytes]
) -> dict[bytes, np.ndarray]:
    """``hash -> float32 vector`` for each of ``hashes`` cached for ``model_id``."""
    if not hashes:
        return {}
    with conn.cursor(binary=True) as cur:
        rows = cur.execute(_LOOKUP, (model_id, list(hashes))).fetchall()
    return {bytes(h): np.asarray(v.to_numpy(), dtype=np.float32) for h, v in rows}


def remember(
    conn: psycopg.Connection[Any],
    model_id: str,
    entries: Sequence[tuple[bytes, np.ndarray]],
    now: int,
) -> None:
    """Add or refresh ``(hash, vector)`` entries (a hit counts as a use)."""
    if entries:
        with conn.cursor() as cur:
            cur.executemany(_REMEMBER, [(model_id, h, v, now) for h, v in entries])


def evict(conn: psycopg.Connection[Any], keep: int) -> int:
    """Delete this scope's least recently used rows beyond ``keep``; how many."""
    row = conn.execute(_COUNT).fetchone()
    excess = (int(row[0]) if row else 0) - keep
    if excess <= 0:
        return 0
    conn.execute(_EVICT, (excess,))
    return excess


def count(conn: psycopg.Connection[Any]) -> int:
    """How many embeddings this scope has cached (all models)."""
    row = conn.execute(_COUNT).fetchone()
    return int(row[0]) if row else 0

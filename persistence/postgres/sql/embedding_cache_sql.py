"""SQL for ``tm_embedding_cache``: embeddings kept by (scope, model id, content hash), so
the same text is embedded once per model and agent. Bounded per scope: the least
recently used rows are evicted (the store runs :data:`COUNT`, then :func:`evict`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from persistence.statements import Batch, Row, Statement

_LOOKUP = (
    "SELECT content_hash, vector_send(embedding) FROM tm_embedding_cache "
    "WHERE scope = tm_scope() AND model_id = %s AND content_hash = ANY(%s)"
)
_REMEMBER = (
    "INSERT INTO tm_embedding_cache (model_id, content_hash, embedding, used_at) "
    "VALUES (%s, %s, %b, %s) ON CONFLICT (scope, model_id, content_hash) "
    "DO UPDATE SET used_at = excluded.used_at"
)
COUNT = Statement("SELECT count(*) FROM tm_embedding_cache WHERE scope = tm_scope()")
"""How many embeddings this scope has cached (all models)."""
_EVICT = (
    "DELETE FROM tm_embedding_cache WHERE (scope, model_id, content_hash) IN ("
    "SELECT scope, model_id, content_hash FROM tm_embedding_cache WHERE scope = tm_scope() "
    "ORDER BY used_at, model_id, content_hash LIMIT %s)"
)


def lookup(model_id: str, hashes: Sequence[bytes]) -> Statement:
    """``(hash, vector)`` of each of ``hashes`` (at least one) cached for ``model_id``:
    :func:`cached` decodes them. The vector comes in pgvector's binary form
    (``vector_send``), read without parsing text."""
    return Statement(_LOOKUP, (model_id, list(hashes)))


def cached(rows: Sequence[Row]) -> dict[bytes, np.ndarray]:
    """``hash -> float32 vector`` from :func:`lookup`'s rows (``vector_send``: a 2-byte
    dimension, 2 unused bytes, then big-endian float32)."""
    return {
        bytes(h): np.frombuffer(data, dtype=">f4", offset=4).astype(np.float32) for h, data in rows
    }


def remember(model_id: str, entries: Sequence[tuple[bytes, np.ndarray]], now: int) -> Batch:
    """Add or refresh ``(hash, vector)`` entries (a hit counts as a use)."""
    return Batch(_REMEMBER, [(model_id, h, v, now) for h, v in entries])


def evict(excess: int) -> Statement:
    """Delete this scope's ``excess`` least recently used rows (:data:`COUNT` beyond the
    rows kept)."""
    return Statement(_EVICT, (excess,))

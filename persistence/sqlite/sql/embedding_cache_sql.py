"""SQL for ``embedding_cache``: embeddings kept by (model id, content hash), so the same
text is embedded once per model. Bounded: the least recently used rows are evicted (the
store runs :data:`COUNT`, then :func:`evict`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from persistence.sqlite.sql.index_sql import blob_of
from persistence.statements import Batch, Row, Statement

COUNT = Statement("SELECT count(*) FROM embedding_cache")
"""How many embeddings are cached (all models)."""


def lookup(model_id: str, hashes: Sequence[bytes]) -> Statement:
    """``(hash, vector)`` of each of ``hashes`` (at least one) cached for ``model_id``:
    :func:`cached` decodes them."""
    marks = ", ".join("?" for _ in hashes)
    sql = (
        "SELECT content_hash, embedding FROM embedding_cache "
        f"WHERE model_id = ? AND content_hash IN ({marks})"
    )
    return Statement(sql, [model_id, *hashes])


def cached(rows: Sequence[Row]) -> dict[bytes, np.ndarray]:
    """``hash -> float32 vector`` from :func:`lookup`'s rows."""
    return {bytes(h): np.frombuffer(blob, dtype="<f4") for h, blob in rows}


def remember(model_id: str, entries: Sequence[tuple[bytes, np.ndarray]], now: int) -> Batch:
    """Add or refresh ``(hash, vector)`` entries (a hit counts as a use)."""
    return Batch(
        "INSERT INTO embedding_cache (model_id, content_hash, embedding, used_at) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (model_id, content_hash) DO UPDATE SET "
        "used_at = excluded.used_at",
        [(model_id, h, blob_of(v), now) for h, v in entries],
    )


def evict(excess: int) -> Statement:
    """Delete the ``excess`` least recently used rows (:data:`COUNT` beyond the rows
    kept)."""
    return Statement(
        "DELETE FROM embedding_cache WHERE (model_id, content_hash) IN ("
        "SELECT model_id, content_hash FROM embedding_cache ORDER BY used_at LIMIT ?)",
        (excess,),
    )

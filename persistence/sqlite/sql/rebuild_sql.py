"""SQL for re-embedding with another model: stage new vectors beside the live ones
(``embedding_rebuild``), then swap them in with one transaction.

Built here (:class:`~persistence.stores.index_engine.RebuildSql`); the shared
:class:`~persistence.stores.indexes.IndexStore` runs them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from persistence.records import Tier
from persistence.sqlite.sql.index_sql import blob_of
from persistence.sqlite.sql.memory_sql import TABLE
from persistence.statements import Batch, Statement


def clear() -> Statement:
    """Delete every staged vector."""
    return Statement("DELETE FROM embedding_rebuild")


def unstaged(limit: int) -> Statement:
    """``(id, content)`` of up to ``limit`` memories with no staged vector yet."""
    tiers = " UNION ALL ".join(
        f"SELECT t.id, t.content FROM {TABLE[tier]} AS t "
        "LEFT JOIN embedding_rebuild AS r ON r.memory_id = t.id WHERE r.memory_id IS NULL"
        for tier in Tier
    )
    return Statement(f"SELECT id, content FROM ({tiers}) LIMIT ?", (limit,))


def stage(rows: Sequence[tuple[str, bytes, np.ndarray]]) -> Batch:
    """Keep ``(memory id, content hash, vector)`` for the swap (a float32 BLOB)."""
    return Batch(
        "INSERT INTO embedding_rebuild (memory_id, content_hash, embedding) VALUES (?, ?, ?) "
        "ON CONFLICT (memory_id) DO UPDATE SET content_hash = excluded.content_hash, "
        "embedding = excluded.embedding",
        [(memory_id, h, blob_of(v)) for memory_id, h, v in rows],
    )


def staged() -> Statement:
    """``(id, content, content hash of its staged vector or NULL)`` of every memory."""
    return Statement(
        " UNION ALL ".join(
            f"SELECT t.id, t.content, r.content_hash FROM {TABLE[tier]} AS t "
            "LEFT JOIN embedding_rebuild AS r ON r.memory_id = t.id"
            for tier in Tier
        )
    )


def drop_unstaged() -> list[Statement]:
    """Nothing: :func:`swap` clears the vector of a memory with no staged one."""
    return []


def swap() -> list[Statement]:
    """Replace every memory's embedding with its staged one; a row per memory updated.

    Every memory must have an up-to-date staged vector (see :func:`staged`).
    """
    return [
        Statement(
            f"UPDATE {TABLE[tier]} SET embedding = (SELECT r.embedding FROM embedding_rebuild "
            f"AS r WHERE r.memory_id = {TABLE[tier]}.id) RETURNING id"
        )
        for tier in Tier
    ]

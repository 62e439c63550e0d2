"""SQL for re-embedding with another model: stage new vectors beside the live ones
(``tm_embedding_rebuild``), then swap them in with one transaction (the vector column is
retyped and its HNSW index rebuilt for the new size, by the engine's vector index).

The statements of :class:`~persistence.stores.index_engine.RebuildSql`, run by the
shared :class:`~persistence.stores.indexes.IndexStore`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from persistence.statements import Batch, Statement


def clear() -> Statement:
    """Empty ``tm_embedding_rebuild``."""
    return Statement("DELETE FROM tm_embedding_rebuild")


def unstaged(limit: int) -> Statement:
    """``(id, content)`` of up to ``limit`` memories with no staged vector yet."""
    return Statement(
        "SELECT m.id, m.content FROM tm_memories m WHERE NOT EXISTS "
        "(SELECT 1 FROM tm_embedding_rebuild r WHERE r.memory_id = m.id) "
        "ORDER BY m.seq LIMIT %s",
        (limit,),
    )


def stage(rows: Sequence[tuple[str, bytes, np.ndarray]]) -> Batch:
    """Keep ``(memory id, content hash, vector)`` for the swap (a memory gone meanwhile
    is skipped)."""
    return Batch(
        "INSERT INTO tm_embedding_rebuild (memory_id, content_hash, embedding) "
        "SELECT m.id, %s, %b FROM tm_memories m WHERE m.id = %s "
        "ON CONFLICT (memory_id) DO UPDATE SET content_hash = excluded.content_hash, "
        "embedding = excluded.embedding",
        [(h, v, memory_id) for memory_id, h, v in rows],
    )


def staged() -> Statement:
    """``(id, content, content hash of its staged vector or NULL)`` of every memory."""
    return Statement(
        "SELECT m.id, m.content, r.content_hash FROM tm_memories m "
        "LEFT JOIN tm_embedding_rebuild r ON r.memory_id = m.id ORDER BY m.seq"
    )


def drop_unstaged() -> list[Statement]:
    """Delete the vectors no staged one replaces."""
    return [
        Statement(
            "DELETE FROM tm_vectors v WHERE NOT EXISTS "
            "(SELECT 1 FROM tm_embedding_rebuild r WHERE r.memory_id = v.memory_id)"
        )
    ]


def swap() -> list[Statement]:
    """Replace every memory's vector with its staged one; a row per memory updated.

    Every memory must have an up-to-date staged vector (see :func:`staged`).
    """
    return [
        Statement(
            "UPDATE tm_vectors v SET embedding = r.embedding FROM tm_embedding_rebuild r "
            "WHERE r.memory_id = v.memory_id RETURNING v.memory_id"
        ),
        Statement(
            "INSERT INTO tm_vectors (memory_id, embedding) SELECT r.memory_id, r.embedding "
            "FROM tm_embedding_rebuild r ON CONFLICT (memory_id) DO NOTHING RETURNING memory_id"
        ),
    ]

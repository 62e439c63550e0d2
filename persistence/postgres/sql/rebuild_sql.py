"""SQL for re-embedding with another model: stage new vectors beside the live ones
(``tm_embedding_rebuild``), then swap them in with one transaction (the vector column is
retyped and its HNSW index rebuilt for the new size). Functions run in the caller's
transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

from persistence.meta_keys import (
    REBUILD_DIM_KEY,
    REBUILD_MODEL_KEY,
)
from persistence.postgres import vector_column
from persistence.postgres.sql import meta_sql
from persistence.records import content_hash
from persistence.statements import run, run_all
from persistence.stores.facts import rebuild_state, swapped_model


def state(conn: psycopg.Connection[Any]) -> tuple[str, int] | None:
    """The rebuild under way in the store (see :func:`~persistence.stores.facts.rebuild_state`)."""
    return rebuild_state(conn, meta_sql)


def begin(conn: psycopg.Connection[Any], model_id: str, dim: int) -> bool:
    """Start (or resume) building ``model_id``; True if earlier staged work is kept."""
    if state(conn) == (model_id, dim):
        return True
    conn.execute("DELETE FROM tm_embedding_rebuild")
    run(conn, meta_sql.write(REBUILD_MODEL_KEY, model_id))
    run(conn, meta_sql.write(REBUILD_DIM_KEY, str(dim)))
    return False


def unstaged(conn: psycopg.Connection[Any], limit: int) -> list[tuple[str, str]]:
    """Up to ``limit`` memories with no staged vector yet: ``(id, content)``."""
    rows = conn.execute(
        "SELECT m.id, m.content FROM tm_memories m WHERE NOT EXISTS "
        "(SELECT 1 FROM tm_embedding_rebuild r WHERE r.memory_id = m.id) "
        "ORDER BY m.seq LIMIT %s",
        (limit,),
    )
    return [(r[0], r[1]) for r in rows]


def stage(conn: psycopg.Connection[Any], rows: Sequence[tuple[str, bytes, np.ndarray]]) -> None:
    """Keep ``(memory id, content hash, vector)`` for the swap (a memory gone meanwhile
    is skipped)."""
    if not rows:
        return
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO tm_embedding_rebuild (memory_id, content_hash, embedding) "
            "SELECT m.id, %s, %b FROM tm_memories m WHERE m.id = %s "
            "ON CONFLICT (memory_id) DO UPDATE SET content_hash = excluded.content_hash, "
            "embedding = excluded.embedding",
            [(h, v, memory_id) for memory_id, h, v in rows],
        )


def stale(conn: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    """Memories whose staged vector is missing or was made from other content."""
    rows = conn.execute(
        "SELECT m.id, m.content, r.content_hash FROM tm_memories m "
        "LEFT JOIN tm_embedding_rebuild r ON r.memory_id = m.id ORDER BY m.seq"
    )
    return [(i, c) for i, c, h in rows if h is None or bytes(h) != content_hash(c)]


def swap(conn: psycopg.Connection[Any], model_id: str, dim: int) -> int:
    """Replace every memory's vector with its staged one, record the new model and size,
    retype the column and rebuild the HNSW index; how many memories were updated.

    Every memory must have an up-to-date staged vector (see :func:`stale`).
    """
    vector_column.drop_vector_index(conn)
    updated = conn.execute(
        "UPDATE tm_vectors v SET embedding = r.embedding FROM tm_embedding_rebuild r "
        "WHERE r.memory_id = v.memory_id"
    ).rowcount
    added = conn.execute(
        "INSERT INTO tm_vectors (memory_id, embedding) SELECT r.memory_id, r.embedding "
        "FROM tm_embedding_rebuild r ON CONFLICT (memory_id) DO NOTHING"
    ).rowcount
    conn.execute(
        "DELETE FROM tm_vectors v WHERE NOT EXISTS "
        "(SELECT 1 FROM tm_embedding_rebuild r WHERE r.memory_id = v.memory_id)"
    )
    run_all(conn, swapped_model(meta_sql, model_id, dim))
    conn.execute("DELETE FROM tm_embedding_rebuild")
    vector_column.ensure_vector_index(conn, dim)
    return max(updated, 0) + max(added, 0)

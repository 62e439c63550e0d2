"""SQL of the vectors (``tm_vectors``): the column's dimension and HNSW index, nearest
neighbours (HNSW with an iterative scan, or exact for a small filtered set), exact
distances, and the embedding queue (memories without a vector).

Vectors travel in binary (``%b``, numpy float32 through pgvector's dumper).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from persistence.meta_keys import (
    EMBEDDING_ERRORS_KEY,
    EMBEDDING_MODEL_KEY,
    LAST_EMBEDDING_ERROR_KEY,
)
from persistence.postgres.sql import meta_sql, recall_filter_sql
from persistence.records import MemoryFilter, Tier
from persistence.statements import run, value

INDEX_NAME = "tm_vectors_hnsw"
HALFVEC_INDEX_MAX_DIM = 4000
"""HNSW over ``halfvec`` takes at most this many dimensions; above it, no index."""

_TYPMOD = (
    "SELECT atttypmod FROM pg_attribute "
    "WHERE attrelid = 'tm_vectors'::regclass AND attname = 'embedding'"
)
_HAS_INDEX = "SELECT to_regclass('tm_vectors_hnsw') IS NOT NULL"


def column_dimension(conn: psycopg.Connection[Any]) -> int | None:
    """The dimension ``tm_vectors.embedding`` is typed with, ``None`` while untyped."""
    row = conn.execute(_TYPMOD).fetchone()
    return None if row is None or int(row[0]) < 0 else int(row[0])


def ensure_vector_index(conn: psycopg.Connection[Any], dim: int) -> None:
    """Type the vector column ``vector(dim)`` if it is untyped and create the HNSW index
    (cosine, over the vectors in half precision: migration v011) if missing and ``dim``
    allows one; idempotent, in the caller's transaction."""
    if column_dimension(conn) is None:
        conn.execute(
            sql.SQL("ALTER TABLE tm_vectors ALTER COLUMN embedding TYPE vector({})").format(
                sql.Literal(int(dim))
            )
        )
    if dim <= HALFVEC_INDEX_MAX_DIM and not conn.execute(_HAS_INDEX).fetchone()[0]:  # type: ignore[index]
        conn.execute(
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS {} ON tm_vectors "
                "USING hnsw ((embedding::halfvec({})) halfvec_cosine_ops)"
            ).format(sql.Identifier(INDEX_NAME), sql.Literal(int(dim)))
        )


def drop_vector_index(conn: psycopg.Connection[Any]) -> None:
    """Drop the HNSW index and untype the column (before the dimension changes)."""
    conn.execute(f"DROP INDEX IF EXISTS {INDEX_NAME}")
    conn.execute("ALTER TABLE tm_vectors ALTER COLUMN embedding TYPE vector")


_NEAREST_INDEXED = """
SELECT id, d FROM (
    SELECT v.memory_id AS id, v.embedding <=> %(v)b AS d
    FROM tm_vectors v {join} WHERE {cond}
    ORDER BY {order} LIMIT %(limit)s
) AS near ORDER BY d, id
"""
"""The HNSW scan: ordered by the index's expression (half precision), each found vector's
distance exact (float32), the answer ordered by that."""


def index_order(dim: int) -> str:
    """The ORDER BY that the HNSW index serves at ``dim`` (see migration v011)."""
    if dim > HALFVEC_INDEX_MAX_DIM:
        return "v.embedding <=> %(v)b"
    return f"v.embedding::halfvec({int(dim)}) <=> %(v)b::halfvec({int(dim)})"


_NEAREST_EXACT = """
WITH c AS MATERIALIZED (
    SELECT v.memory_id AS id, v.embedding <=> %(v)b AS d
    FROM tm_memories m JOIN tm_vectors v ON v.memory_id = m.id WHERE {cond}
)
SELECT id, d FROM c ORDER BY d, id LIMIT %(limit)s
"""

_COUNT_ACCEPTED = "SELECT count(*) FROM (SELECT 1 FROM tm_memories m WHERE {cond} LIMIT %(cap)s) x"


def accepted_at_most(conn: psycopg.Connection[Any], where: MemoryFilter, cap: int) -> bool:
    """True if ``where`` accepts at most ``cap`` memories (counted no further)."""
    cond, params = recall_filter_sql.condition(where, "m")
    params["cap"] = cap + 1
    row = conn.execute(_COUNT_ACCEPTED.format(cond=cond), params, prepare=False).fetchone()
    return row is not None and int(row[0]) <= cap


def nearest(
    conn: psycopg.Connection[Any],
    query: np.ndarray,
    limit: int,
    where: MemoryFilter,
    *,
    exact: bool,
) -> list[tuple[str, float]]:
    """``(memory_id, cosine distance)`` of the ``limit`` nearest that ``where`` accepts,
    nearest first (ties by id). ``exact`` compares every accepted vector; else the HNSW
    index is scanned (iteratively, with the filter inside the scan: the caller sets
    ``hnsw.ef_search``)."""
    if exact:
        cond, params = recall_filter_sql.condition(where, "m")
        text = _NEAREST_EXACT.format(cond=cond)
    elif where == MemoryFilter():
        cond, params = "true", {}
        text = _NEAREST_INDEXED.format(join="", cond=cond, order=index_order(query.size))
    else:
        cond, params = recall_filter_sql.condition(where, "m")
        text = _NEAREST_INDEXED.format(
            join="JOIN tm_memories m ON m.id = v.memory_id", cond=cond,
            order=index_order(query.size),
        )  # fmt: skip
    params.update(v=query, limit=limit)
    return [(r[0], float(r[1])) for r in conn.execute(text, params, prepare=False)]


def set_ef_search(conn: psycopg.Connection[Any], ef: int, *, local: bool) -> None:
    """``hnsw.ef_search`` for this connection (``local``: this transaction only)."""
    conn.execute("SELECT set_config('hnsw.ef_search', %s, %s)", (str(int(ef)), local))


def distances(
    conn: psycopg.Connection[Any], query: np.ndarray, memory_ids: Sequence[str]
) -> dict[str, float]:
    """Exact cosine distance from ``query`` to each of ``memory_ids`` with a vector."""
    rows = conn.execute(
        "SELECT memory_id, embedding <=> %b FROM tm_vectors WHERE memory_id = ANY(%s)",
        (query, list(memory_ids)),
    )
    return {r[0]: float(r[1]) for r in rows}


def unembedded(conn: psycopg.Connection[Any], limit: int) -> list[tuple[str, Tier, str]]:
    """Up to ``limit`` memories without a vector: ``(id, tier, content)``, oldest first
    (the queue ``tm_unembedded``, kept by triggers: migration v005)."""
    rows = conn.execute(
        "SELECT m.id, m.tier, m.content FROM tm_unembedded u "
        "JOIN tm_memories m ON m.id = u.memory_id ORDER BY u.seq LIMIT %s",
        (limit,),
    )
    return [(r[0], Tier(r[1]), r[2]) for r in rows]


def unembedded_count(conn: psycopg.Connection[Any]) -> int:
    """How many memories wait in ``tm_unembedded`` for a vector."""
    row = conn.execute("SELECT count(*) FROM tm_unembedded").fetchone()
    return int(row[0]) if row is not None else 0


def set_embeddings(
    conn: psycopg.Connection[Any], rows: Sequence[tuple[Tier, str, np.ndarray, str | None]]
) -> None:
    """Store ``(tier, id, vector, content)``: only for a memory still of that tier, that
    has no vector yet and, when ``content`` is given, still has that content."""
    if not rows:
        return
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO tm_vectors (memory_id, embedding) SELECT m.id, %(v)b FROM tm_memories m "
            "WHERE m.id = %(id)s AND m.tier = %(tier)s "
            "AND (%(content)s::text IS NULL OR m.content = %(content)s::text) "
            "ON CONFLICT (memory_id) DO NOTHING",
            [
                {"id": memory_id, "tier": tier.value, "v": vector, "content": content}
                for tier, memory_id, vector, content in rows
            ],
        )


def embedding_model(conn: psycopg.Connection[Any]) -> str | None:
    """The model id the store's vectors were made with (``None`` before any)."""
    model: str | None = value(conn, meta_sql.read(EMBEDDING_MODEL_KEY))
    return model


def record_embedding_error(conn: psycopg.Connection[Any], message: str) -> int:
    """Count one failure of background embedding and keep its message; returns the count."""
    count = int(value(conn, meta_sql.add(EMBEDDING_ERRORS_KEY, 1)))
    run(conn, meta_sql.write(LAST_EMBEDDING_ERROR_KEY, message))
    return count

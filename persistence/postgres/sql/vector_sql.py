"""SQL of the vectors (``tm_vectors``): the column's dimension and HNSW index, nearest
neighbours (HNSW with an iterative scan, or exact for a small filtered set), exact
distances, and the embedding queue (memories without a vector). Run by the store and
the engine's :mod:`persistence.postgres.vector_column` and
:class:`~persistence.postgres.index_store.HnswVectors`.

Vectors travel in binary (``%b``, numpy float32 through pgvector's dumper).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from persistence.postgres.sql import recall_filter_sql
from persistence.records import MemoryFilter, Tier
from persistence.statements import Batch, Row, Statement

INDEX_NAME = "tm_vectors_hnsw"
HALFVEC_INDEX_MAX_DIM = 4000
"""HNSW over ``halfvec`` takes at most this many dimensions; above it, no index."""

COLUMN_DIMENSION = Statement(
    "SELECT atttypmod FROM pg_attribute "
    "WHERE attrelid = 'tm_vectors'::regclass AND attname = 'embedding'"
)
"""The dimension ``tm_vectors.embedding`` is typed with: :func:`to_dimension` decodes it."""
HAS_INDEX = Statement("SELECT to_regclass('tm_vectors_hnsw') IS NOT NULL")
"""One row: true if the HNSW index exists."""


def to_dimension(row: Row | None) -> int | None:
    """:data:`COLUMN_DIMENSION`'s row as a dimension, ``None`` while the column is untyped."""
    return None if row is None or int(row[0]) < 0 else int(row[0])


def type_column(dim: int) -> Statement:
    """Type the vector column ``vector(dim)`` (DDL takes no parameters: ``dim`` is an int)."""
    return Statement(f"ALTER TABLE tm_vectors ALTER COLUMN embedding TYPE vector({int(dim)})")


def create_index(dim: int) -> Statement:
    """The HNSW index (cosine, over the vectors in half precision: migration v011)."""
    return Statement(
        f"CREATE INDEX IF NOT EXISTS {INDEX_NAME} ON tm_vectors "
        f"USING hnsw ((embedding::halfvec({int(dim)})) halfvec_cosine_ops)"
    )


DROP_VECTOR_INDEX = (
    Statement(f"DROP INDEX IF EXISTS {INDEX_NAME}"),
    Statement("ALTER TABLE tm_vectors ALTER COLUMN embedding TYPE vector"),
)
"""Drop the HNSW index and untype the column (before the dimension changes)."""


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


def accepted_count(where: MemoryFilter, cap: int) -> Statement:
    """How many memories ``where`` accepts, counted up to ``cap + 1`` (no further)."""
    cond, params = recall_filter_sql.condition(where, "m")
    params["cap"] = cap + 1
    return Statement(_COUNT_ACCEPTED.format(cond=cond), params)


def nearest(query: np.ndarray, limit: int, where: MemoryFilter, *, exact: bool) -> Statement:
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
    return Statement(text, params)


def set_ef_search(ef: int, *, local: bool) -> Statement:
    """``hnsw.ef_search`` for this connection (``local``: this transaction only)."""
    return Statement("SELECT set_config('hnsw.ef_search', %s, %s)", (str(int(ef)), local))


def distances(query: np.ndarray, memory_ids: Sequence[str]) -> Statement:
    """``(memory_id, exact cosine distance)`` from ``query`` to each of ``memory_ids``
    that has a vector."""
    return Statement(
        "SELECT memory_id, embedding <=> %b FROM tm_vectors WHERE memory_id = ANY(%s)",
        (query, list(memory_ids)),
    )


def unembedded(limit: int) -> Statement:
    """Up to ``limit`` memories without a vector: ``(id, tier, content)``, oldest first
    (the queue ``tm_unembedded``, kept by triggers: migration v005)."""
    return Statement(
        "SELECT m.id, m.tier, m.content FROM tm_unembedded u "
        "JOIN tm_memories m ON m.id = u.memory_id ORDER BY u.seq LIMIT %s",
        (limit,),
    )


def unembedded_count() -> Statement:
    """How many memories wait in ``tm_unembedded`` for a vector."""
    return Statement("SELECT count(*) FROM tm_unembedded")


def set_embeddings(rows: Sequence[tuple[Tier, str, np.ndarray, str | None]]) -> list[Batch]:
    """Store ``(tier, id, vector, content)``: only for a memory still of that tier, that
    has no vector yet and, when ``content`` is given, still has that content."""
    return [
        Batch(
            "INSERT INTO tm_vectors (memory_id, embedding) SELECT m.id, %b FROM tm_memories m "
            "WHERE m.id = %s AND m.tier = %s AND (%s::text IS NULL OR m.content = %s::text) "
            "ON CONFLICT (memory_id) DO NOTHING",
            [
                (vector, memory_id, tier.value, content, content)
                for tier, memory_id, vector, content in rows
            ],
        )
    ]

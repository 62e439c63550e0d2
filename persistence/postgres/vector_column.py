"""The vector column's type and HNSW index (``tm_vectors.embedding``): the steps that
read and change them, over the statements :mod:`~persistence.postgres.sql.vector_sql`
builds. The embedding that fixes the dimension, a re-embedding and an import take them."""

from __future__ import annotations

from typing import Any

import psycopg

from persistence.postgres.sql import vector_sql
from persistence.statements import row, run, run_all, value

Connection = psycopg.Connection[Any]


def column_dimension(conn: Connection) -> int | None:
    """The dimension ``tm_vectors.embedding`` is typed with, ``None`` while untyped."""
    return vector_sql.to_dimension(row(conn, vector_sql.COLUMN_DIMENSION))


def ensure_vector_index(conn: Connection, dim: int) -> None:
    """Type the vector column ``vector(dim)`` if it is untyped and create the HNSW index
    (cosine, over the vectors in half precision: migration v011) if missing and ``dim``
    allows one; idempotent, in the caller's transaction."""
    if column_dimension(conn) is None:
        run(conn, vector_sql.type_column(dim))
    if dim <= vector_sql.HALFVEC_INDEX_MAX_DIM and not value(conn, vector_sql.HAS_INDEX):
        run(conn, vector_sql.create_index(dim))


def drop_vector_index(conn: Connection) -> None:
    """Drop the HNSW index and untype the column (before the dimension changes)."""
    run_all(conn, vector_sql.DROP_VECTOR_INDEX)

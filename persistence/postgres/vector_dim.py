"""The store's embedding dimension on a server: the check (and first claim) shared by the
memory records (``put_memory``/``insert_memories`` with an embedding) and the recall
index (``set_embeddings``, which also builds the vector index when this fixes the
dimension): one place decides what size vectors the store holds. The SQL is
:mod:`~persistence.postgres.sql.vector_dim_sql`.
"""

from __future__ import annotations

from persistence.engine import Connection
from persistence.postgres.sql import vector_dim_sql
from persistence.statements import count, value


def fix_dimension(conn: Connection, dim: int, configured: int | None) -> bool:
    """Check ``dim`` against the stored dimension (``configured`` while none is stored)
    and store it if none is; True if this call fixed it (the caller then makes the
    vector index). Raises :class:`EmbeddingDimensionError` on a mismatch.

    Writers of different agents are not serialised, so the claim is an insert that
    yields to a concurrent one, and the value that won is read back.
    """
    stored = value(conn, vector_dim_sql.READ)
    if stored is None:
        vector_dim_sql.check(dim, configured)
        if count(conn, vector_dim_sql.claim(dim)):
            return True
        stored = value(conn, vector_dim_sql.READ)
    vector_dim_sql.check(dim, None if stored is None else int(stored))
    return False

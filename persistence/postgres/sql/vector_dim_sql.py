"""The store's embedding dimension (``tm_meta``): fixed by the first embedding written (or
by the store's configuration), checked for every later one.

Shared by the memory records (``put_memory``/``insert_memories`` with an embedding) and
the recall index (``set_embeddings``, which also builds the vector index when this
fixes the dimension): one place decides what size vectors the store holds.
"""

from __future__ import annotations

from typing import Any

import psycopg

from persistence.errors import EmbeddingDimensionError
from persistence.meta_keys import EMBEDDING_DIM_KEY

_READ = "SELECT value FROM tm_meta WHERE key = %s"
_CLAIM = "INSERT INTO tm_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING"


def fix_dimension(conn: psycopg.Connection[Any], dim: int, configured: int | None) -> bool:
    """Check ``dim`` against the stored dimension (``configured`` while none is stored)
    and store it if none is; True if this call fixed it (the caller then makes the
    vector index). Raises :class:`EmbeddingDimensionError` on a mismatch.

    Writers of different agents are not serialised, so the claim is an insert that
    yields to a concurrent one, and the value that won is read back.
    """
    row = conn.execute(_READ, (EMBEDDING_DIM_KEY,)).fetchone()
    fixed = False
    if row is None:
        if configured is not None and dim != configured:
            raise EmbeddingDimensionError(dim, configured)
        fixed = conn.execute(_CLAIM, (EMBEDDING_DIM_KEY, str(dim))).rowcount > 0
        if not fixed:
            row = conn.execute(_READ, (EMBEDDING_DIM_KEY,)).fetchone()
    if row is not None and int(row[0]) != dim:
        raise EmbeddingDimensionError(dim, int(row[0]))
    return fixed

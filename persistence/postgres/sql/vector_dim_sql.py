"""SQL of the store's embedding dimension (``tm_meta``): fixed by the first embedding
written (or by the store's configuration), checked for every later one. The statements
are built here; :func:`persistence.postgres.vector_dim.fix_dimension` runs them.
"""

from __future__ import annotations

from persistence.errors import EmbeddingDimensionError
from persistence.meta_keys import EMBEDDING_DIM_KEY
from persistence.statements import Statement

READ = Statement("SELECT value FROM tm_meta WHERE key = %s", (EMBEDDING_DIM_KEY,))
"""The stored dimension (no row: none yet)."""


def claim(dim: int) -> Statement:
    """Store ``dim`` unless a dimension is stored (a concurrent claim wins): a row if
    this claim did."""
    return Statement(
        "INSERT INTO tm_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING "
        "RETURNING key",
        (EMBEDDING_DIM_KEY, str(dim)),
    )


def check(dim: int, expected: int | None) -> None:
    """Refuse ``dim`` unless it is the ``expected`` dimension (``None``: any)."""
    if expected is not None and dim != expected:
        raise EmbeddingDimensionError(dim, expected)

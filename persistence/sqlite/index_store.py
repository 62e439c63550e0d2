"""The SQLite engine's part of the recall indexes: what differs from PostgreSQL, handed to
the shared :class:`~persistence.stores.indexes.IndexStore`.

- :class:`~persistence.sqlite.cell_vectors.CellVectors` (the default,
  ``vector_index="cells"``): vector search over the codes in k-means cells kept in the
  file, nothing per memory in RAM (the RAM copy only as its fallback).
  With ``vector_index="ram"``,
  :class:`~persistence.sqlite.mirror_vectors.MirrorVectors` instead: vector search
  over the in-RAM copy of the vectors (3-bit codes
  searched in two stages, :class:`~persistence.sqlite.vector_mirror.VectorMirror`),
  re-ranked exactly from the float32 BLOBs; a filter that accepts few memories is
  compared exactly. New vectors also refresh the codes kept in the file (``code_sync``).
- keyword search is :class:`~persistence.sqlite.keyword_index.KeywordIndex` (FTS5 bm25).

The SQL is :mod:`~persistence.sqlite.sql.index_sql`, ``conversation_sql``,
``embedding_cache_sql`` and ``rebuild_sql``; the vector reads the search runs are
:mod:`~persistence.sqlite.vector_reads`.
"""

from __future__ import annotations

from persistence.sqlite.cell_vectors import CellVectors
from persistence.sqlite.database import Database
from persistence.sqlite.keyword_index import KeywordIndex
from persistence.sqlite.mirror_vectors import MirrorVectors, VectorCandidates
from persistence.sqlite.sql import (
    conversation_sql,
    embedding_cache_sql,
    index_sql,
    meta_sql,
    rebuild_sql,
)
from persistence.sqlite.vector_mirror import RESORT_AFTER
from persistence.stores.config import StoreConfig
from persistence.stores.index_engine import IndexSql
from persistence.stores.indexes import IndexStore

__all__ = [
    "VECTOR_INDEXES",
    "IndexStore",
    "MirrorVectors",
    "VectorCandidates",
    "build_index_store",
]

EXACT_SCAN_MAX = 4096
"""A filtered vector search compares every accepted memory exactly up to this many."""


SQL = IndexSql(
    embeddings=index_sql,
    conversation=conversation_sql,
    cache=embedding_cache_sql,
    rebuild=rebuild_sql,
    meta=meta_sql,
)


VECTOR_INDEXES = ("ram", "cells")
"""The vector indexes a file store can search with: ``"cells"`` (the default), the cells
kept in the file (:class:`~persistence.sqlite.cell_vectors.CellVectors`: nothing per
memory in RAM); ``"ram"``, the RAM copy of every vector's code (:class:`MirrorVectors`)."""


def build_index_store(
    engine: Database,
    path: str,
    config: StoreConfig,
    keywords: KeywordIndex,
    resort_after: int = RESORT_AFTER,
) -> IndexStore[MirrorVectors | CellVectors]:
    """The recall indexes of one file: ``path`` names it in errors; ``config`` is the
    store's (read live, its ``vector_index`` picks the vector search); ``resort_after``
    tunes the vector copy."""
    vectors: MirrorVectors | CellVectors
    if config.vector_index == "cells":
        vectors = CellVectors(engine, resort_after)
    else:
        vectors = MirrorVectors(engine, resort_after)
    return IndexStore(
        engine, SQL, keywords, vectors, config, location=path, exact_scan_max=EXACT_SCAN_MAX
    )

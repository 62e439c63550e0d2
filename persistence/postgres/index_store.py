"""The PostgreSQL engine's part of the recall indexes: what differs from SQLite, handed to
the shared :class:`~persistence.stores.indexes.IndexStore`.

- keyword search is :mod:`~persistence.postgres.keyword_search` (FTS5's bm25 over
  ``tm_keywords``, kept by triggers: migration v002; re-indexed at COMMIT, or early for a
  search inside the transaction).
- :class:`HnswVectors`: vectors live in ``tm_vectors`` under an HNSW index (cosine),
  searched with the filter inside the scan, or exactly when the filter accepts few
  memories; the first embedding makes the index. The stored dimension is remembered
  between searches (a search refused at a stale one reads it again).
- the empty embedding queue is remembered while the version row says nothing changed
  (:class:`~persistence.postgres.empty_cache.EmptyAtVersion`).

The SQL is in :mod:`persistence.postgres.sql` (``keyword_sql``, ``vector_sql``,
``conversation_sql``, ``embedding_cache_sql``, ``rebuild_sql``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import psycopg

from persistence.errors import EmbeddingDimensionError
from persistence.meta_keys import EMBEDDING_DIM_KEY
from persistence.postgres import keyword_search, unprepared
from persistence.postgres.database import DEFAULT_EF_SEARCH, PgDatabase
from persistence.postgres.empty_cache import EmptyAtVersion
from persistence.postgres.sql import (
    conversation_sql,
    embedding_cache_sql,
    meta_sql,
    rebuild_sql,
    recall_filter_sql,
    vector_sql,
)
from persistence.postgres.vector_column import drop_vector_index, ensure_vector_index
from persistence.postgres.vector_dim import fix_dimension
from persistence.records import MemoryFilter
from persistence.statements import rows, run, value
from persistence.stores.config import StoreConfig
from persistence.stores.index_engine import IndexSql
from persistence.stores.indexes import IndexStore

__all__ = ["HnswVectors", "build_index_store"]

Connection = psycopg.Connection[Any]
T = TypeVar("T")

EXACT_SCAN_MAX = 2000
"""A filter an index serves that accepts at most this many memories is searched exactly."""
MIN_EF_SEARCH = DEFAULT_EF_SEARCH
"""``hnsw.ef_search`` is at least this (and at least the limit): recall@10 >= 0.95. Every
pooled connection starts with it (``PgDatabase``), so the usual search sets nothing."""

SQL = IndexSql(
    embeddings=vector_sql,
    conversation=conversation_sql,
    cache=embedding_cache_sql,
    rebuild=rebuild_sql,
    meta=meta_sql,
)


def build_index_store(engine: PgDatabase, config: StoreConfig) -> IndexStore[HnswVectors]:
    """The recall indexes of one database (see the module docstring); ``config`` is the
    store's (read live)."""
    return IndexStore(
        engine, SQL, keyword_search, HnswVectors(engine), config,
        location=engine.location, exact_scan_max=EXACT_SCAN_MAX, queue=EmptyAtVersion(engine),
    )  # fmt: skip


class HnswVectors:
    """Vector search over HNSW, as the shared store's
    :class:`~persistence.stores.indexes.VectorIndex` (see the module docstring)."""

    def __init__(self, engine: PgDatabase) -> None:
        self.engine = engine
        self._ef: dict[int, int] = {}  # id(pooled connection) -> its hnsw.ef_search
        self._dim: int | None = None  # the stored dimension as last read (searches only)
        engine.on_external_change(self.forget_dimension)

    def forget_dimension(self) -> None:
        """Read the stored dimension again at the next search."""
        self._dim = None

    def _search_dimension(self, conn: Connection) -> int | None:
        """The store's vector dimension for a search (``None`` before any embedding).
        Outside a transaction the value last read is used without a round trip: the
        search itself fails on a stale one (the column refuses another size), which
        :meth:`searching` answers by reading it again."""
        if self._dim is not None and not self.engine.in_transaction:
            return self._dim
        stored = value(conn, meta_sql.read(EMBEDDING_DIM_KEY))
        dim = None if stored is None else int(stored)
        if not self.engine.in_transaction:
            self._dim = dim
        return dim

    def searching(self, search: Callable[[Connection, int], T], empty: T) -> T:
        """``search(conn, dim)`` at the store's dimension (``empty`` before any
        embedding); a search refused because the dimension changed since it was last
        read (another process re-embedded) is redone once with the new one."""
        for attempt in (1, 2):
            cached = self._dim is not None and not self.engine.in_transaction
            with self.engine.reading() as conn:
                dim = self._search_dimension(conn)
                if dim is None:
                    return empty
                try:
                    return search(conn, dim)
                except (psycopg.errors.DataException, EmbeddingDimensionError):
                    if not cached or attempt == 2:
                        raise
            self.forget_dimension()
        raise AssertionError("unreachable")

    def nearest(
        self, conn: Connection, query: np.ndarray, limit: int, where: MemoryFilter,
        exact_scan_max: int,
    ) -> list[tuple[str, float]]:  # fmt: skip
        """A filter an index serves (session, agent, tags, time range) that accepts at
        most ``exact_scan_max`` memories is compared exactly; otherwise HNSW is scanned
        with ``ef_search >= max(limit, MIN_EF_SEARCH)`` and the filter inside the scan
        (iterative scan); a filtered scan that comes back short is redone exactly."""
        if (
            where.narrows
            and recall_filter_sql.index_backed(where)
            and _accepted_at_most(conn, where, exact_scan_max)
        ):
            return _nearest(conn, query, limit, where, exact=True)
        self._ef_search(conn, max(limit, MIN_EF_SEARCH))
        found = _nearest(conn, query, limit, where, exact=False)
        if len(found) < limit and where != MemoryFilter():
            found = _nearest(conn, query, limit, where, exact=True)
        return found

    def _ef_search(self, conn: Connection, ef: int) -> None:
        """Set ``hnsw.ef_search`` on ``conn`` unless its session value is ``ef`` already
        (every pooled connection opens with ``DEFAULT_EF_SEARCH``; a value set outside a
        transaction is remembered per connection); inside a transaction for that
        transaction only (a rollback would undo it); behind a pooler always for the
        transaction (every transaction starts at ``DEFAULT_EF_SEARCH``)."""
        if self.engine.pooler:
            if ef != DEFAULT_EF_SEARCH:
                run(conn, vector_sql.set_ef_search(ef, local=True))
            return
        if self._ef.get(id(conn), DEFAULT_EF_SEARCH) == ef:
            return
        if self.engine.in_transaction:
            run(conn, vector_sql.set_ef_search(ef, local=True))
        else:
            run(conn, vector_sql.set_ef_search(ef, local=False))
            self._ef[id(conn)] = ef

    def distances(
        self, conn: Connection, query: np.ndarray, memory_ids: list[str]
    ) -> dict[str, float]:
        return {r[0]: float(r[1]) for r in rows(conn, vector_sql.distances(query, memory_ids))}

    def fix_dimension(self, conn: Connection, dim: int, configured: int | None) -> None:
        """The embedding that fixes the dimension also makes the vector index."""
        if fix_dimension(conn, dim, configured):
            ensure_vector_index(conn, dim)

    def written(self, conn: Connection) -> None:
        """Nothing more to keep: the HNSW index follows the table."""

    def swapping(self, conn: Connection) -> None:
        """The HNSW index and the column's type are the old size's: dropped."""
        drop_vector_index(conn)

    def swapped(self, conn: Connection, dim: int) -> None:
        """The column is typed and the HNSW index made again at the new size ``dim``."""
        ensure_vector_index(conn, dim)


def _accepted_at_most(conn: Connection, where: MemoryFilter, cap: int) -> bool:
    """True if ``where`` accepts at most ``cap`` memories (counted no further)."""
    (found,) = unprepared.rows(conn, vector_sql.accepted_count(where, cap))
    return int(found[0]) <= cap


def _nearest(
    conn: Connection, query: np.ndarray, limit: int, where: MemoryFilter, *, exact: bool
) -> list[tuple[str, float]]:
    """``(memory_id, cosine distance)`` of the ``limit`` nearest ``where`` accepts (see
    :func:`~persistence.postgres.sql.vector_sql.nearest`)."""
    statement = vector_sql.nearest(query, limit, where, exact=exact)
    return [(r[0], float(r[1])) for r in unprepared.rows(conn, statement)]

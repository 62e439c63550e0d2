"""The PostgreSQL engine's part of the recall indexes: what differs from SQLite, handed to
the shared :class:`~persistence.stores.indexes.IndexStore`.

- keyword search is :mod:`~persistence.postgres.keyword_search` (FTS5's bm25 over each
  memory's window, assembled from the own-word postings ``tm_kw_postings`` and window
  pointers ``tm_kw_docs`` that triggers keep in the writing statement: migration v012).
- :class:`HnswVectors`: vectors live in ``tm_vectors`` under an HNSW index (cosine),
  searched with the filter inside the scan, or exactly when the filter accepts few
  memories, or when its neighbourhood is flat (random-like vectors) among at most
  ``FLAT_EXACT_MAX``; the first embedding makes the index. The stored dimension is
  remembered between searches (a search refused at a stale one reads it again).
- the empty embedding queue is remembered while the version row says nothing changed
  (:class:`~persistence.postgres.empty_cache.EmptyAtVersion`).

The SQL is in :mod:`persistence.postgres.sql` (``keyword_sql``, ``vector_sql``,
``conversation_sql``, ``embedding_cache_sql``, ``rebuild_sql``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np
import psycopg

from persistence.errors import EmbeddingDimensionError
from persistence.meta_keys import EMBEDDING_DIM_KEY
from persistence.postgres import keyword_search, unprepared
from persistence.postgres.connector import DEFAULT_EF_SEARCH
from persistence.postgres.database import PgDatabase
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
"""``hnsw.ef_search`` is at least this (and at least the limit). Every pooled connection
starts with it (``PgDatabase``), so the usual search sets nothing."""
FLAT_EF_SEARCH = 400
"""``hnsw.ef_search`` of the second scan when the first one's neighbourhood is flat (see
:func:`flat`). Measured on the peer benchmark's 384-d random unit vectors
(benchmarks/test_pg_vector_recall_bench.py, index m=16, ef_construction=64): recall@10
against exact 0.67-0.69 at ef_search 100 and 0.95-0.96 at 400 at 10k memories, for
2-4x the scan's time; at 100k, 0.13 at 100 and 0.38 at 400 (0.63 at pgvector's maximum,
1,000, 5.5x the time): no HNSW setting reaches 0.95 there."""
FLAT_SIGMAS = 5.0
"""A neighbourhood is flat when its ``FLAT_RANK``-th nearest is no more similar to the
query than this many standard deviations of the cosine between random directions
(``1 / sqrt(dim)``: 0.255 at 384 dimensions), which is where the 10th best of a million
random vectors lies. Random vectors are below it (the 10th nearest's cosine: 0.19-0.22
at 10k-100k memories): every vector is about as far from the query as any other and the
HNSW graph's walk finds the true neighbours by luck. Clustered vectors (as real
embeddings of related texts are) are far above it, and pay for no second scan."""
FLAT_RANK = 10
FLAT_EXACT_MAX = 20_000
"""A flat neighbourhood (see :func:`flat`) among at most this many accepted memories
(the whole store unfiltered, or a filter an index serves) is compared exactly instead of
scanned again at ``FLAT_EF_SEARCH``. Measured on the peer benchmark's random vectors
(benchmarks/test_pg_vector_recall_bench.py and the raw curve below it): an exact scan
costs about 1.5 us per vector (14.8 ms at 10k, 28 ms over one agent's 10k of 100k under
load), the second HNSW scan at ``ef_search`` 400 about as much or more (20.9 ms at 10k,
71-90 ms at 100k under the same load) for recall@10 0.95 at 10k and 0.33-0.41 at 100k;
exact is 1.0. Above it (a flat store of 100k unfiltered: 157 ms exact) the second scan
stays: no setting of pgvector's reaches 0.95 there at HNSW's cost."""
FLAT_MIN_DIM = 128
"""Below this many dimensions no neighbourhood counts as flat: the band of chance
similarity is too wide to tell (``5 / sqrt(dim)`` reaches 0.44 at 128); HNSW serves
low-dimensional vectors well anyway."""

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
        engine, SQL, keyword_search.PostingSearch(engine.scope), HnswVectors(engine), config,
        location=engine.location, exact_scan_max=EXACT_SCAN_MAX, queue=EmptyAtVersion(engine),
    )  # fmt: skip


class HnswVectors:
    """Vector search over HNSW, as the shared store's
    :class:`~persistence.stores.indexes.VectorIndex` (see the module docstring)."""

    def __init__(self, engine: PgDatabase) -> None:
        self.engine = engine
        self._dim: int | None = None  # the stored dimension as last read (searches only)
        self._flat = False  # the last exact comparison's neighbourhood was flat
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
        (iterative scan); a full answer whose neighbourhood is :func:`flat` is compared
        exactly when at most ``FLAT_EXACT_MAX`` memories are accepted, else scanned again
        at ``FLAT_EF_SEARCH``; a filtered scan that comes back short is redone exactly.
        After an exact comparison whose answer was flat, the next search that may be
        compared exactly is so without the HNSW scan first (its answer is judged again)."""
        if (
            where.narrows
            and recall_filter_sql.index_backed(where)
            and _accepted_at_most(conn, where, exact_scan_max)
        ):
            return _nearest(conn, query, limit, where, exact=True)
        ef = max(limit, MIN_EF_SEARCH)
        few: bool | None = None  # whether at most FLAT_EXACT_MAX are accepted (if counted)
        if self._flat and ef < FLAT_EF_SEARCH and _countable(where):
            few = _accepted_at_most(conn, where, FLAT_EXACT_MAX)
            if few:
                return self._compared(conn, query, limit, where)
        found = _scan(conn, query, limit, where, ef)
        if ef < FLAT_EF_SEARCH and len(found) == limit and flat(found, query.size):
            if few is None and _countable(where):
                few = _accepted_at_most(conn, where, FLAT_EXACT_MAX)
            if few:
                return self._compared(conn, query, limit, where)
            found = _scan(conn, query, limit, where, FLAT_EF_SEARCH)
        if len(found) < limit and where != MemoryFilter():
            found = _nearest(conn, query, limit, where, exact=True)
        return found

    def _compared(
        self, conn: Connection, query: np.ndarray, limit: int, where: MemoryFilter
    ) -> list[tuple[str, float]]:
        """The exact nearest (a flat neighbourhood among few); whether it is flat decides
        if the next search skips the HNSW scan (random-like vectors stay so)."""
        found = _nearest(conn, query, limit, where, exact=True)
        self._flat = len(found) < limit or flat(found, query.size)
        return found

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


def _scan(
    conn: Connection, query: np.ndarray, limit: int, where: MemoryFilter, ef: int
) -> list[tuple[str, float]]:
    """The HNSW scan at ``hnsw.ef_search = ef``. At ``DEFAULT_EF_SEARCH`` (what every
    pooled connection opens with) nothing is set; another value is set for the scan's
    transaction only (``SET LOCAL``): a transaction of its own on a connection outside
    one (so a transaction-mode pooler cannot hand the setting to another client), else
    set back after the scan (a snapshot's or the caller's transaction goes on)."""
    if ef == DEFAULT_EF_SEARCH:
        return _nearest(conn, query, limit, where, exact=False)
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        run(conn, vector_sql.set_ef_search(ef, local=True))
        found = _nearest(conn, query, limit, where, exact=False)  # failed: the tx is over
        run(conn, vector_sql.set_ef_search(DEFAULT_EF_SEARCH, local=True))
        return found
    with conn.transaction():
        run(conn, vector_sql.set_ef_search(ef, local=True))
        return _nearest(conn, query, limit, where, exact=False)


def flat(found: list[tuple[str, float]], dim: int) -> bool:
    """True if the ``FLAT_RANK``-th nearest of ``found`` (``(id, cosine distance)``,
    nearest first) is within ``FLAT_SIGMAS`` standard deviations of a random direction's
    similarity (see :data:`FLAT_SIGMAS`); fewer found, or under ``FLAT_MIN_DIM``
    dimensions: never flat."""
    if len(found) < FLAT_RANK or dim < FLAT_MIN_DIM:
        return False
    return 1.0 - found[FLAT_RANK - 1][1] < FLAT_SIGMAS / math.sqrt(dim)


def _countable(where: MemoryFilter) -> bool:
    """True if the memories ``where`` accepts are counted cheaply up to a cap: an index
    serves the filter, or it sets nothing that leaves out more than the superseded
    (tier, current, as of: most memories pass, so the count soon reaches the cap)."""
    broad = replace(where, tier=None, current=False, as_of=None) == MemoryFilter()
    return broad or recall_filter_sql.index_backed(where)


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

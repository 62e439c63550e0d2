"""The RAM copy of a file's vectors as the shared store's
:class:`~persistence.stores.indexes.VectorIndex` (``vector_index="ram"``):
3-bit codes searched in two stages (:class:`~persistence.sqlite.vector_mirror.VectorMirror`),
re-ranked exactly from the float32 BLOBs; a filter that accepts few memories is compared
exactly. New vectors also refresh the codes kept in the file (``code_sync``), and a file's
vector cells where it has them (:mod:`~persistence.sqlite.cell_sync`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import apsw
import numpy as np

from persistence.records import MemoryFilter, Tier
from persistence.sqlite import cell_sync, code_sync, vector_deepen, vector_reads
from persistence.sqlite.database import Database
from persistence.sqlite.memory_store import check_dimension
from persistence.sqlite.sql import cell_sql, meta_sql, vector_codes_sql
from persistence.sqlite.sql.meta_sql import EMBEDDING_DIM_KEY
from persistence.sqlite.vector_mirror import RESORT_AFTER, VectorMirror
from persistence.statements import run_all, value
from persistence.stores.stamped import StampedCache

T = TypeVar("T")

VECTOR_OVERSAMPLE = 2
VECTOR_MIN_CANDIDATES = 128
"""Re-ranked exactly at least: the RAM copy's second stage orders them closely enough."""
KEPT_VECTORS = 10_000
"""Float vectors :meth:`MirrorVectors.distances` keeps in RAM at most (15 MiB at 384
dimensions); past it they are read again."""
VectorCandidates = Callable[
    [apsw.Connection, np.ndarray, int, Tier | None],
    tuple[vector_deepen.Candidates, vector_deepen.Candidates],
]
"""The first stage of vector search: ``(conn, query, count, tier) -> (ranked, extras)``,
``(id, tier)`` pairs: the nearest by the copy, best first, and those it does not hold yet."""


class MirrorVectors(VectorMirror):
    """The RAM copy of the file's vectors as the shared store's
    :class:`~persistence.stores.indexes.VectorIndex` (see the module docstring)."""

    def __init__(self, engine: Database, resort_after: int = RESORT_AFTER) -> None:
        super().__init__(resort_after)
        self.engine = engine
        self._vectors: StampedCache[str, tuple[Tier, bytes]] = StampedCache(engine, KEPT_VECTORS)
        self.first_stage: VectorCandidates = self.vector_candidates
        """The first stage of :meth:`nearest` (a test swaps in a spy)."""
        self.current_share = 1.0
        """The share of candidates the last search for current (or ``as_of``) memories
        kept: the next one starts that much deeper (one round, not two; still checked)."""

    def searching(self, search: Callable[[apsw.Connection, int], T], empty: T) -> T:
        """``search(conn, dim)`` in one snapshot, at the dimension the file records."""
        with self.engine.snapshot() as conn:
            dim = value(conn, meta_sql.read(EMBEDDING_DIM_KEY))
            return empty if dim is None else search(conn, int(dim))

    def nearest(
        self, conn: apsw.Connection, query: np.ndarray, limit: int, where: MemoryFilter,
        exact_scan_max: int,
    ) -> list[tuple[str, float]]:  # fmt: skip
        """Candidates (``limit * VECTOR_OVERSAMPLE``, at least ``VECTOR_MIN_CANDIDATES``)
        from the RAM copy, re-ranked by exact cosine (the float vectors read through the
        handle's copy, :meth:`_found`); a filter is applied as
        :func:`~persistence.sqlite.vector_deepen.filtered_nearest` says (a filter an index
        serves that accepts at most ``exact_scan_max`` is compared exactly at once)."""

        def rerank(candidates: vector_deepen.Candidates) -> list[tuple[str, float]]:
            return vector_reads.nearest(self._found(conn, candidates), query, limit)

        # few accepted (a session, say): compare them all
        exact = vector_deepen.exact_if_few(conn, where, exact_scan_max, rerank)
        if exact is not None:
            return exact

        asked = [0]

        def stage(
            count: int, share: float
        ) -> tuple[vector_deepen.Candidates, vector_deepen.Candidates, bool]:
            # the copy's candidates depend on count alone: no more asked, none more found
            found, extras = self.first_stage(conn, query, count, where.tier)
            deeper, asked[0] = count > asked[0], count
            return found, extras, len(found) < count or count >= self.size or not deeper

        wanted = max(limit * VECTOR_OVERSAMPLE, VECTOR_MIN_CANDIDATES)
        found, share = vector_deepen.filtered_nearest(
            conn, where, stage, lambda: self.size, wanted, exact_scan_max, rerank,
            start_share=self.current_share,
        )  # fmt: skip
        if where.narrows and vector_deepen.in_time_only(where):
            self.current_share = share
        return found

    def vector_candidates(
        self, conn: apsw.Connection, query: np.ndarray, count: int, tier: Tier | None
    ) -> tuple[vector_deepen.Candidates, vector_deepen.Candidates]:
        """The RAM copy's ``count`` nearest, and this thread's own uncommitted vectors
        the copy does not hold yet (compared exactly)."""
        if self.engine.in_transaction:
            candidates = self.candidates_in_write(conn, query, count, tier)
            if candidates is not None:
                return candidates
            self.engine.after_rollback(self.reset)  # it will see uncommitted rows
        return self.candidates(conn, query, count, tier), []

    def _found(
        self, conn: apsw.Connection, candidates: list[tuple[str, Tier]]
    ) -> list[tuple[str, Tier, bytes]]:
        """The float vectors of ``(id, tier)`` candidates, tier by tier in their order
        (as :func:`~persistence.sqlite.vector_reads.rerank` reads them; kept in RAM as in
        :meth:`distances`); a memory no longer in that tier, or without one, is left out."""
        kept = self._vectors.get_many([m for m, _ in candidates], self._reader(conn))
        found = []
        for tier in Tier:
            found += [(m, tier, kept[m][1]) for m, at in candidates
                      if at is tier and m in kept and kept[m][0] is tier]  # fmt: skip
        return found

    @staticmethod
    def _reader(conn: apsw.Connection) -> Callable[[list[str]], dict[str, tuple[Tier, bytes]]]:
        def read(ids: list[str]) -> dict[str, tuple[Tier, bytes]]:
            return {i: (tier, blob) for i, tier, blob in vector_reads.embeddings_of(conn, ids)}

        return read

    def distances(
        self, conn: apsw.Connection, query: np.ndarray, memory_ids: list[str]
    ) -> dict[str, float]:
        """Exact, from the float vectors in the file (kept in RAM, :data:`KEPT_VECTORS`
        at most, until something commits: recall asks for mostly the same memories call
        after call; a memory's distance does not depend on its batch)."""
        kept = self._vectors.get_many(memory_ids, self._reader(conn))
        found = [(memory_id, tier, blob) for memory_id, (tier, blob) in kept.items()]
        if not found:
            return {}
        ids, distances = vector_reads.cosine_distances(found, query)
        return {memory_id: float(d) for memory_id, d in zip(ids, distances, strict=True)}

    def fix_dimension(self, conn: apsw.Connection, dim: int, configured: int | None) -> None:
        check_dimension(conn, dim, configured)

    def written(self, conn: apsw.Connection) -> None:
        """New processes load the new vectors' codes instead of encoding them."""
        code_sync.sync(conn)

    def swapping(self, conn: apsw.Connection) -> None:
        """The codes were made for the old model's vectors; the copy reloads after commit."""
        self.engine.after_commit(self.reset)
        run_all(conn, vector_codes_sql.DROP_ALL)
        run_all(conn, cell_sql.DROP_ALL)  # a handle with vector_index="cells" trains them again

    def swapped(self, conn: apsw.Connection, dim: int) -> None:
        """Nothing more: the vectors are in the tier tables, the codes made again later."""

    def maintain(self, conn: apsw.Connection) -> int:
        """``maintain()``'s part: the codes (and packs) brought up to date in a
        transaction of its own on ``conn``, so later opens load codes, not every vector;
        a file that has vector cells (made by a ``vector_index="cells"`` handle) has them
        trained again if due and their tails folded too."""
        written = code_sync.sync_alone(conn)
        if cell_sync.read_state(conn) is not None:
            written += cell_sync.sync_alone(conn)
        return written

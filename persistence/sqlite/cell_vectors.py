"""The vector stage on disk (issue 46): a search that keeps nothing per memory in RAM.

:class:`CellVectors` is the shared store's
:class:`~persistence.stores.indexes.VectorIndex` over the vector cells (migration v019,
kept by :mod:`persistence.sqlite.cell_sync`). A search:

1. ranks the cells' centroids (the only thing kept in RAM: one per
   :data:`~persistence.sqlite.cell_train.CELL_SIZE` vectors or so, as int16,
   :class:`~persistence.sqlite.cell_centroids.Centroids`, read once per generation of
   the cells, :func:`~persistence.sqlite.cell_sync.cached_centroids`)
   and reads the packs and tails of the nearest :data:`PROBES` cells: a fixed number,
   as the cells are of a fixed size, so a search reads about the same codes at any size;
2. scores their 3-bit codes by the RAM copy's two stages, a group of packs at a time
   (:func:`~persistence.sqlite.cell_scan.best_codes`), the tier byte of each code
   excluding other tiers;
3. adds every memory whose vector was logged after the cells' position (not in them yet,
   or changed since: their old codes are left out), compared exactly, so a search never
   misses a committed vector nor reads a stale code; with more than
   :data:`BACKLOG_MAX` of them, or cells no reader can use (none yet, another
   dimension, a log trimmed past them), the search falls back to the RAM copy
   (:class:`~persistence.sqlite.mirror_vectors.MirrorVectors`, loaded only then);
4. re-ranks the best candidates by exact cosine over the float32 BLOBs, in SQL with
   sqlite-vec's ``vec_distance_cosine`` where the extension loads
   (:mod:`persistence.sqlite.vec_extension`), else in numpy.

Filters are applied as by the RAM copy, by the same loop
(:func:`~persistence.sqlite.vector_deepen.filtered_nearest`): a filter an index serves
that accepts at most ``exact_scan_max`` memories (a session, a narrow time range; a
tier alone here too) is compared exactly, in SQL; otherwise the candidates that pass
the filter count (checked in SQL: nothing is read per accepted memory), and too few make
the search probe as many more cells as the share that passed is small (a tenth: ten
times the cells, at least twice the last round's, and at least :data:`FILTERED_SHARE`
of the cells as many times) and keep as many more candidates,
until enough pass (or the share shows an exact comparison is cheaper).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import apsw
import numpy as np

from persistence.records import MemoryFilter, Tier
from persistence.sqlite import cell_scan, cell_sync, vec_extension, vector_deepen, vector_reads
from persistence.sqlite.cell_centroids import Centroids
from persistence.sqlite.cell_packs import DamagedPack
from persistence.sqlite.database import Database
from persistence.sqlite.mirror_vectors import (
    VECTOR_MIN_CANDIDATES,
    VECTOR_OVERSAMPLE,
    MirrorVectors,
)
from persistence.sqlite.sql import cell_sql, index_sql
from persistence.sqlite.sql.cell_sql import CellState
from persistence.sqlite.vector_codes import CodeFit
from persistence.sqlite.vector_mirror import RESORT_AFTER
from persistence.statements import rows, run_all

T = TypeVar("T")
log = logging.getLogger("tiered_memory")

PROBES = 24
"""Cells a search probes (unfiltered): cells of at most ``CELL_SIZE`` (512) vectors hold
a few clusters each, so the query's own stand well above the rest. Clustered vectors,
recall@10 of the probed cells' exact nearest, about 8,300 codes read, in a numpy
simulation: 0.981 at 1M after one Lloyd round, 0.980 at 3M after two; the library at 1M
after two, codes and re-rank included: 0.993 (``docs/benchmarks/scale.md``); cells
trained the old way, ``sqrt(N)`` of ``sqrt(N)`` vectors, read more codes and find less
until ``maintain()``."""
FILTERED_SHARE = 0.08
"""A filter that accepts a share ``s`` of the file, when too few candidates passed, makes
a search probe at least this share of the cells divided by ``s`` (8%/10%: 80% of the
cells). Not a fixed count: a filter's nearest beyond the query's own cluster are near
only by chance and lie in any cell (clustered vectors at 1M, a time filter of a tenth:
recall@10 0.801 from 240 probed cells of 2,931, 0.974 from 80% of them)."""
BACKLOG_MAX = 4_096
"""Vectors logged after the cells' position a search compares exactly; more: RAM copy."""
TOO_LARGE = (
    "the vector cells are behind by more vectors than a write trains or takes in (a file "
    "filled before the cells, or a large import): searches use the RAM copy until "
    "maintain() (`tiered-memory maintain`) trains them"
)
"""Logged once (per handle, until ``maintain()``) when a write cannot bring the cells up."""


@dataclass(frozen=True, slots=True)
class CellView:
    """What one search knows of the cells: their state and fit, the centroids, and the
    ids logged after their position (compared exactly, their codes left out)."""

    state: CellState
    fit: CodeFit
    centroids: Centroids
    backlog: list[str]

    @property
    def cells(self) -> int:
        return len(self.centroids)

    @property
    def probes(self) -> int:
        return min(self.cells, PROBES)

    @property
    def total(self) -> int:
        return self.state.members + len(self.backlog)


class CellVectors:
    """The vector cells as the shared store's vector index (module docstring); the RAM
    copy (:attr:`ram`) answers when the cells cannot."""

    def __init__(self, engine: Database, resort_after: int = RESORT_AFTER) -> None:
        self.ram = MirrorVectors(engine, resort_after)
        """The fallback: loaded only by a search the cells cannot answer."""
        self.engine = engine
        self.last_search = ""
        """``"cells"`` or ``"ram"``: which answered the last search (tests, benchmarks)."""
        self._too_large = False
        self._untrained_at: tuple[int, str | None] | None = None
        """The change-log head at which a sync left the file without cells (too few
        vectors, or too few dimensions): until it moves, a commit changed no vector and
        has nothing to count again."""
        self.current_share = 1.0
        """As :attr:`MirrorVectors.current_share`: where a search of current memories starts."""
        self.engine.before_commit(self.before_commit)

    def reset(self) -> None:
        """Forget what this process knows of the file (it was replaced): whether it is
        too large to train in a write, and the RAM copy."""
        self._too_large = False
        self._untrained_at = None
        self.ram.reset()

    def searching(self, search: Callable[[apsw.Connection, int], T], empty: T) -> T:
        return self.ram.searching(search, empty)

    # --- searching ------------------------------------------------------------------------

    def view(self, conn: apsw.Connection, dim: int) -> CellView | None:
        """The cells as this snapshot sees them, or ``None`` when they cannot answer."""
        state = cell_sync.read_state(conn)
        if state is None or not cell_sync.usable(conn, state, dim):
            return None
        fit = cell_sync.fit_of(state)
        head_seq, _ = vector_reads.change_head(conn)
        backlog = [] if head_seq == state.seq else vector_reads.changed_since(conn, state.seq)
        if fit is None or len(backlog) > BACKLOG_MAX:
            return None
        centroids = cell_sync.cached_centroids(conn, state)
        if len(centroids) != state.cells:
            return None  # damaged: check() reports it
        return CellView(state, fit, centroids, backlog)

    def nearest(
        self, conn: apsw.Connection, query: np.ndarray, limit: int, where: MemoryFilter,
        exact_scan_max: int,
    ) -> list[tuple[str, float]]:  # fmt: skip
        """Like :meth:`MirrorVectors.nearest`, over the probed cells (module docstring)."""
        try:
            view = self.view(conn, len(query))
            if view is not None:
                return self._nearest(conn, view, query, limit, where, exact_scan_max)
        except DamagedPack as exc:  # the next write or maintain() trains them again
            log.warning("the vector cells are damaged (%s): searching the RAM copy", exc)
        self.last_search = "ram"
        return self.ram.nearest(conn, query, limit, where, exact_scan_max)

    def _nearest(
        self, conn: apsw.Connection, view: CellView, query: np.ndarray, limit: int,
        where: MemoryFilter, exact_scan_max: int,
    ) -> list[tuple[str, float]]:  # fmt: skip
        self.last_search = "cells"

        def exact(candidates: vector_deepen.Candidates) -> list[tuple[str, float]]:
            return rerank(conn, candidates, query, limit)

        # few accepted (a session, a small tier: the probed cells may hold few of its
        # codes): compare them all
        few = vector_deepen.exact_if_few(conn, where, exact_scan_max, exact, short_tier=True)
        if few is not None:
            return few
        unit = query / max(float(np.linalg.norm(query)), 1e-12)
        probed = [0]

        def stage(
            count: int, share: float
        ) -> tuple[vector_deepen.Candidates, vector_deepen.Candidates, bool]:
            # as many more cells as the filter is narrow, at least twice the last round's
            probes = max(view.probes, math.ceil(view.probes / share), 2 * probed[0])
            if share < 1.0:  # a share of the cells, as deep as before the fixed size
                probes = max(probes, math.ceil(FILTERED_SHARE * view.cells / share))
            probed[0] = probes = min(view.cells, probes)
            found, extras = self.candidates(conn, view, unit, count, where.tier, probes)
            done = probes >= view.cells and (count >= view.total or len(found) < count)
            return found, extras, done

        wanted = max(limit * VECTOR_OVERSAMPLE, VECTOR_MIN_CANDIDATES)
        found, share = vector_deepen.filtered_nearest(
            conn, where, stage, lambda: view.total, wanted, exact_scan_max, exact,
            start_share=self.current_share, short_tier=True,
        )  # fmt: skip
        if where.narrows and vector_deepen.in_time_only(where):
            self.current_share = share
        return found

    def candidates(
        self, conn: apsw.Connection, view: CellView, unit: np.ndarray, count: int,
        tier: Tier | None, probes: int,
    ) -> tuple[vector_deepen.Candidates, vector_deepen.Candidates]:  # fmt: skip
        """``(id, tier)`` of the ``count`` best codes of the ``probes`` cells nearest to
        the normalised query ``unit``, best first, and apart every memory of the backlog
        (of ``tier``, if given)."""
        similarity = view.centroids.similarities(unit)
        probes = min(probes, view.cells)
        cells = np.argpartition(-similarity, probes - 1)[:probes].tolist()
        size = math.ceil(view.state.members * probes / view.cells)
        found = cell_scan.best_codes(
            conn, cells, view.fit, unit, count, tier, view.backlog, size
        )  # the backlog's codes are old: left out, compared exactly below
        if not view.backlog:
            return found, []
        chosen_tiers = tuple(Tier) if tier is None else (tier,)
        backlog = vector_reads.embeddings_of(conn, view.backlog, chosen_tiers)
        return found, [(i, t) for i, t, _ in backlog]

    # --- the rest of the VectorIndex role -------------------------------------------------

    def distances(
        self, conn: apsw.Connection, query: np.ndarray, memory_ids: list[str]
    ) -> dict[str, float]:
        """Exact, from the float vectors in the file."""
        return self.ram.distances(conn, query, memory_ids)

    def fix_dimension(self, conn: apsw.Connection, dim: int, configured: int | None) -> None:
        self.ram.fix_dimension(conn, dim, configured)

    def written(self, conn: apsw.Connection) -> None:
        """The cells take in the new vectors in the same transaction."""
        self.before_commit(conn)

    def before_commit(self, conn: apsw.Connection) -> None:
        """Every transaction that changed a vector (``remember`` with an embedding, a
        forget, a promotion, the embedding queue) brings the cells to the log's head
        before it commits; one that did not costs two reads. A file too large to train
        here is not counted again by this process until ``maintain()`` (or a reset); one
        log line says so (searches use the RAM copy until then)."""
        if self._too_large:
            state = cell_sync.read_state(conn)
            if state is None or not cell_sync.usable(conn, state, state.dim):
                return
        if self._untrained_at is not None:
            if vector_reads.change_head(conn) == self._untrained_at:
                return  # no vector changed since the file was found too small to train
            self._untrained_at = None
        written = cell_sync.sync(conn, train=not self._too_large)
        if written is None:
            if not self._too_large:
                log.warning(TOO_LARGE)
            self._too_large = True
        elif written == 0 and cell_sync.read_state(conn) is None:
            self._untrained_at = vector_reads.change_head(conn)

    def swapping(self, conn: apsw.Connection) -> None:
        """The cells and codes were made for the old model's vectors: dropped."""
        self.ram.swapping(conn)
        run_all(conn, cell_sql.DROP_ALL)

    def swapped(self, conn: apsw.Connection, dim: int) -> None:
        """The cells are trained again on the new vectors, in the same transaction."""
        cell_sync.sync(conn, rebuild=True)
        self.engine.after_commit(self.reset)

    def maintain(self, conn: apsw.Connection) -> int:
        """``maintain()``'s part: train again if due, fold every tail (own transaction)."""
        self._too_large = False
        self._untrained_at = None
        return cell_sync.sync_alone(conn)


def rerank(
    conn: apsw.Connection, candidates: list[tuple[str, Tier]], query: np.ndarray, limit: int
) -> list[tuple[str, float]]:
    """``(memory_id, cosine distance)`` of the ``limit`` nearest candidates, exactly: by
    ``vec_distance_cosine`` in SQL where sqlite-vec loads, else in numpy."""
    if not vec_extension.loaded(conn):
        return vector_reads.rerank(conn, candidates, query, limit)
    blob = query.astype("<f4").tobytes()
    found: list[tuple[str, float]] = []
    for tier in Tier:
        ids = list(dict.fromkeys(i for i, at in candidates if at is tier))
        for start in range(0, len(ids), 4_096):
            statement = index_sql.cosine_distances_of(ids[start : start + 4_096], tier, blob)
            found += [(str(i), float(d)) for i, d in rows(conn, statement)]
    found.sort(key=lambda pair: pair[1])
    return found[:limit]

"""The vector stage on disk (issue 46): a search that keeps nothing per memory in RAM.

:class:`CellVectors` is the shared store's
:class:`~persistence.stores.indexes.VectorIndex` over the vector cells (migration v019,
kept by :mod:`persistence.sqlite.cell_sync`). A search:

1. ranks the cells' centroids (the only thing kept in RAM: ``sqrt(N)`` of them, read
   once per generation of the cells, :func:`~persistence.sqlite.cell_sync.cached_centroids`)
   and reads the packs and tails of the nearest ``probes`` cells (:data:`PROBE_SHARE`
   of them, at least :data:`MIN_PROBES`);
2. scores their 3-bit codes by the RAM copy's two stages
   (:func:`~persistence.sqlite.vector_codes.two_stages`), the tier byte of each code
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

Filters are applied as by the RAM copy: a filter an index serves that accepts few
memories is compared exactly; otherwise the candidates that pass count, and too few
make the search probe four times as many cells and keep more candidates, until enough
pass (or the share that passed shows an exact comparison is cheaper).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

import apsw
import numpy as np

from persistence.records import MemoryFilter, Tier
from persistence.sqlite import cell_sync, vec_extension, vector_reads
from persistence.sqlite.cell_packs import DamagedPack, pack_keys
from persistence.sqlite.database import Database
from persistence.sqlite.mirror_vectors import (
    VECTOR_MIN_CANDIDATES,
    VECTOR_OVERSAMPLE,
    MirrorVectors,
)
from persistence.sqlite.sql import cell_sql, index_sql
from persistence.sqlite.sql.cell_sql import CellState
from persistence.sqlite.vector_codes import (
    ID_END,
    TIER_BYTE,
    CodeFit,
    split_packed_codes,
    two_stages,
)
from persistence.sqlite.vector_mirror import RESORT_AFTER
from persistence.statements import rows, run_all

T = TypeVar("T")
log = logging.getLogger("tiered_memory")

PROBE_SHARE = 0.08
"""Share of the cells a search probes (clustered vectors at 1M: recall@10 0.969; 0.940 at 6%)."""
MIN_PROBES = 8
ACCEPTED_MAX = 262_144
"""An index-backed filter accepting at most this many: only their codes are scored."""
BACKLOG_MAX = 4_096
"""Vectors logged after the cells' position a search compares exactly; more: RAM copy."""
_TIERS = tuple(Tier)


@dataclass(frozen=True, slots=True)
class CellView:
    """What one search knows of the cells: their state and fit, the centroids, and the
    ids logged after their position (compared exactly, their codes left out)."""

    state: CellState
    fit: CodeFit
    centroids: np.ndarray
    backlog: list[str]

    @property
    def cells(self) -> int:
        return len(self.centroids)

    @property
    def probes(self) -> int:
        return min(self.cells, max(MIN_PROBES, math.ceil(PROBE_SHARE * self.cells)))

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
        self.engine.before_commit(self.before_commit)

    def reset(self) -> None:
        """Forget what this process knows of the file (it was replaced): whether it is
        too large to train in a write, and the RAM copy."""
        self._too_large = False
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
        wanted = count = max(limit * VECTOR_OVERSAMPLE, VECTOR_MIN_CANDIDATES)
        probes = view.probes
        accepted = None
        if where.narrows and index_sql.index_backed(where):
            ids = vector_reads.accepted_ids(conn, where, ACCEPTED_MAX)
            if ids is not None and len(ids) <= exact_scan_max:  # few: compare them all
                found = vector_reads.embeddings_of(
                    conn, ids, (where.tier,) if where.tier else tuple(Tier)
                )
                return vector_reads.nearest(found, query, limit)
            if ids is not None:  # only they are scored, in more cells the fewer they are
                accepted = np.array([i.encode() + ID_END for i in ids])
                share = max(len(ids), 1) / max(view.total, 1)
                probes = min(view.cells, math.ceil(probes / share))
        in_time_only = replace(where, tier=None, current=False, as_of=None) == MemoryFilter()
        # A tier alone does not narrow the RAM copy's search (its first stage is by tier),
        # but here it does: the probed cells may hold few codes of a small tier.
        tier_only = not where.narrows and where.tier is not None
        if tier_only and where.tier is not None:  # a small tier is compared exactly
            ids = vector_reads.accepted_ids(conn, where, exact_scan_max)  # one capped read
            if ids is not None:
                found = vector_reads.embeddings_of(conn, ids, (where.tier,))
                return vector_reads.nearest(found, query, limit)
        while True:
            candidates = self.candidates(conn, view, query, count, where.tier, probes, accepted)
            if not where.narrows and not tier_only:
                break
            passed = (
                candidates if tier_only else vector_reads.accepted_among(conn, where, candidates)
            )
            deepest = probes >= view.cells and count >= view.total
            if len(passed) >= wanted or deepest:
                candidates = passed[:wanted]
                break
            share = max(len(passed), 1) / max(len(candidates), 1)
            if not in_time_only and share * view.total <= exact_scan_max:
                everything = vector_reads.accepted_embeddings(conn, where, exact_scan_max)
                if everything is not None:
                    return vector_reads.nearest(everything, query, limit)
            count = min(max(count * 4, int(2 * wanted / share)), view.total)
            probes = min(view.cells, probes * 4)
        return rerank(conn, candidates, query, limit)

    def candidates(
        self, conn: apsw.Connection, view: CellView, query: np.ndarray, count: int,
        tier: Tier | None, probes: int, accepted: np.ndarray | None = None,
    ) -> list[tuple[str, Tier]]:  # fmt: skip
        """``(id, tier)`` of the ``count`` best codes of the ``probes`` cells nearest to
        ``query`` (among the ``accepted`` keys, if given), then every memory of the
        backlog (of ``tier``, if given)."""
        unit = query / max(float(np.linalg.norm(query)), 1e-12)
        similarity = view.centroids @ unit
        probes = min(probes, view.cells)
        cells = np.argpartition(-similarity, probes - 1)[:probes].tolist()
        keys, raw = read_cells(conn, cells, view.fit.code_bytes)
        found: list[tuple[str, Tier]] = []
        if len(keys):
            tiers, bits, low = split_packed_codes(raw, len(keys), view.fit.words)
            excluded = np.zeros(len(keys), dtype=bool) if tier is None else tiers != TIER_BYTE[tier]
            if view.backlog:
                excluded |= np.isin(keys, [i.encode() + ID_END for i in view.backlog])
            if accepted is not None:
                excluded |= ~np.isin(keys, accepted)
            chosen = two_stages(view.fit, bits, low, unit.astype(np.float32), excluded, count)
            found = [(bytes(keys[i])[:-1].decode(), _TIERS[tiers[i]]) for i in chosen.tolist()]
        if view.backlog:
            chosen_tiers = tuple(Tier) if tier is None else (tier,)
            found += [
                (i, t) for i, t, _ in vector_reads.embeddings_of(conn, view.backlog, chosen_tiers)
            ]
        return found

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
        here is not counted again by this process until ``maintain()`` (or a reset)."""
        if self._too_large:
            state = cell_sync.read_state(conn)
            if state is None or not cell_sync.usable(conn, state, state.dim):
                return
        if cell_sync.sync(conn, train=not self._too_large) is None:
            self._too_large = True

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
        return cell_sync.sync_alone(conn)


def read_cells(
    conn: apsw.Connection, cells: list[int], code_bytes: int
) -> tuple[np.ndarray, bytes]:
    """The keys (id + end byte, fixed width) and codes (end to end) of ``cells``' packs
    and tails; :class:`DamagedPack` when they do not add up to codes of ``code_bytes``."""
    keys: list[np.ndarray] = []
    codes: list[bytes] = []
    for cell, size, width, ids, packed in rows(conn, cell_sql.packs_of(cells)):
        if width != code_bytes:
            raise DamagedPack(f"cell {cell}'s pack holds codes of {width} bytes, not {code_bytes}")
        keys.append(pack_keys(cell, size, width, bytes(ids), bytes(packed)))
        codes.append(packed)
    tail = rows(conn, cell_sql.tails_of(cells, ID_END))
    if any(len(c) != code_bytes for _, c in tail):
        raise DamagedPack(f"a tail of cells {cells} holds a code that is not {code_bytes} bytes")
    if tail:
        keys.append(np.array([bytes(k) for k, _ in tail]))
        codes.append(b"".join(c for _, c in tail))
    if not keys:
        return np.zeros(0, dtype="S1"), b""
    return np.concatenate(keys), b"".join(codes)


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

"""Cells of a fixed size (issue 46): coarse k-means cells bisected into leaves of at most
:data:`CELL_SIZE` vectors, and every vector assigned to its nearest leaf.

Why small cells: on clustered vectors a memory's similarity to the centroid of a cell
holding ``c`` clusters falls as ``1/sqrt(c)``, while the best of ``K`` unrelated centroids
rises only as ``sqrt(2 ln K)``: cells of a few clusters leave a query's cell (and each
member's) well above the rest, so a fixed number of probes finds the nearest at any size
(``sqrt(N)`` cells of ``sqrt(N)`` vectors needed a share of them: scanned codes grew
linearly with the file). Why the reassignment: coarse cells hold 20-35 clusters at 1M,
so their k-means scatters a cluster's members over several cells (recall 0.87 at 8
probes however small the leaves); Lloyd rounds against the leaves' centroids gather
them (:data:`LLOYD_ROUNDS`; 0.97 at 8 probes, 1M clustered vectors, after one;
``docs/benchmarks/scale.md``).

Cost: the leaves of a coarse cell are made from its own vectors (read by id, at most
:data:`LEAF_READ` of them evenly spread: a bounded amount of floats in memory however
large the cell); each Lloyd round compares every vector with every leaf, ``N * N / 340``
multiply-adds (leaves average about two thirds of ``CELL_SIZE``): about 80 s at 1M on
this machine, growing as the square of the file (comparing with the leaves of a
vector's 4 nearest coarse cells only was slower in numpy, its loop over cells, and found
less: recall 0.959 at 24 probes for 0.981).
"""

from __future__ import annotations

import numpy as np

from persistence.sqlite.cell_kmeans import kmeans, nearest_cells

CELL_SIZE = 512
"""Most vectors a trained cell holds (bisection stops at or below it: cells average about
two thirds of it); writes split a cell past it (:mod:`persistence.sqlite.cell_split`)."""
LLOYD_ROUNDS = 2
"""Lloyd rounds over every vector after the bisection (the last one writes the codes).
Clustered vectors, recall@10 of the probed cells at 24 probes: 3M 0.949 after one round,
0.980 after two (1M: 0.981 after one; the library at 1M after two: 0.993); each round
costs about ``N * N / 340`` multiply-adds."""
LEAF_READ = 16 * CELL_SIZE
"""Most of a coarse cell's vectors read to bisect it: a larger cell is bisected on this
many of its members, evenly spread, into leaves as much smaller (a coarse cell of alike
vectors can hold most of the file)."""
BISECT_SAMPLE = 4_096
"""Each 2-means of a bisection is trained on at most about this many vectors."""


def bisect(vectors: np.ndarray, bound: int = CELL_SIZE, seed: int = 1) -> list[np.ndarray]:
    """Centroids of leaves of at most ``bound`` of the normalised ``vectors``, made by
    2-means splits. Vectors 2-means does not divide (all alike: one text remembered again
    and again) stay one leaf, however many: halves of them would have the same centroid,
    so the assignment would put them all in one and leave its twins empty, probed for
    nothing (writes halve such a cell by key order, :mod:`persistence.sqlite.cell_split`)."""
    out: list[np.ndarray] = []
    pending = [np.arange(len(vectors))]
    while pending:
        members = pending.pop()
        if len(members) <= bound:
            if len(members):
                out.append(kmeans(vectors[members], 1)[0])
            continue
        own = vectors[members]
        sample = own[:: max(1, len(own) // BISECT_SAMPLE)]
        two = kmeans(np.ascontiguousarray(sample), 2, seed=seed + len(out))
        moving = nearest_cells(own, two) == 1
        if moving.all() or not moving.any():
            out.append(kmeans(own, 1)[0])
            continue
        pending += [members[~moving], members[moving]]
    return out


class Leaves:
    """The leaves of every coarse cell: :meth:`nearest` assigns vectors to them."""

    def __init__(self, centroids: np.ndarray) -> None:
        self.centroids = centroids

    @classmethod
    def of(cls, leaves_of: list[list[np.ndarray]]) -> Leaves:
        """The leaves of each coarse cell, end to end."""
        return cls(np.array([c for leaves in leaves_of for c in leaves], dtype=np.float32))

    def __len__(self) -> int:
        return len(self.centroids)

    def nearest(self, vectors: np.ndarray) -> np.ndarray:
        """The leaf nearest each normalised vector, among every leaf (one Lloyd round)."""
        return nearest_cells(vectors, self.centroids)

"""Spherical k-means for the vector cells (:mod:`persistence.sqlite.cell_sync` trains
them, :mod:`persistence.sqlite.cell_split` splits one in two; ``benchmarks/disk_vectors.py``
trains its candidates with it too)."""

from __future__ import annotations

import numpy as np

from persistence.sqlite.cell_centroids import Centroids

KMEANS_ROUNDS = 10
_MATRIX = 1 << 22
"""Most similarities :func:`nearest_cells` holds at once (16 MB of float32): its rows per
step shrink as the centroids grow (thousands of cells at a million vectors)."""


def normalised(blobs: list[bytes], dim: int) -> np.ndarray:
    vectors = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dim)
    norms = np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
    out: np.ndarray = (vectors / norms).astype(np.float32)
    return out


def nearest_cells(vectors: np.ndarray, centroids: np.ndarray | Centroids) -> np.ndarray:
    """The cell each normalised vector belongs to (its most similar centroid): against
    float32 centroids (training) or the form RAM keeps (:class:`Centroids`, writes)."""
    out = np.empty(len(vectors), dtype=np.int64)
    step = max(256, _MATRIX // max(len(centroids), 1))
    for start in range(0, len(vectors), step):
        block = vectors[start : start + step]
        if isinstance(centroids, Centroids):
            out[start : start + step] = np.argmax(centroids.similarities(block), 1)
        else:
            out[start : start + step] = np.argmax(block @ centroids.T, 1)
    return out


def kmeans(sample: np.ndarray, cells: int, seed: int = 1) -> np.ndarray:
    """Spherical k-means centroids ``[cells, dim]`` of a normalised sample."""
    rng = np.random.default_rng(seed)
    if cells == 1:
        mean = sample.mean(axis=0)
        norm = float(np.linalg.norm(mean))
        single: np.ndarray = (mean / norm if norm > 1e-12 else sample[0]).astype(np.float32)
        return single[None, :]
    centroids = sample[rng.choice(len(sample), cells, replace=False)].copy()
    for _ in range(KMEANS_ROUNDS):
        sums = cell_sums(sample, nearest_cells(sample, centroids), len(centroids))
        empty = np.linalg.norm(sums, axis=1) == 0
        sums[empty] = sample[rng.choice(len(sample), int(empty.sum()), replace=False)]
        centroids = sums / np.linalg.norm(sums, axis=1, keepdims=True)
    return centroids.astype(np.float32)


def cell_sums(vectors: np.ndarray, assigned: np.ndarray, cells: int) -> np.ndarray:
    """The sum of the ``vectors`` assigned to each of ``cells`` (zeros for an empty one):
    sorted by cell and summed per run (``np.add.at`` took 0.3 s for 20k vectors)."""
    order = np.argsort(assigned, kind="stable")
    present, starts = np.unique(assigned[order], return_index=True)
    sums = np.zeros((cells, vectors.shape[1]), dtype=vectors.dtype)
    if len(order):
        sums[present] = np.add.reduceat(vectors[order], starts, axis=0)
    return sums

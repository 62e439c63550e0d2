"""Spherical k-means for the vector cells (:mod:`persistence.sqlite.cell_sync` trains
them, :mod:`persistence.sqlite.cell_split` splits one in two; ``benchmarks/disk_vectors.py``
trains its candidates with it too)."""

from __future__ import annotations

import numpy as np

KMEANS_ROUNDS = 10
_CHUNK = 4_096


def normalised(blobs: list[bytes], dim: int) -> np.ndarray:
    vectors = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dim)
    norms = np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
    out: np.ndarray = (vectors / norms).astype(np.float32)
    return out


def nearest_cells(vectors: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """The cell each normalised vector belongs to (its most similar centroid)."""
    out = np.empty(len(vectors), dtype=np.int64)
    for start in range(0, len(vectors), _CHUNK):
        out[start : start + _CHUNK] = np.argmax(vectors[start : start + _CHUNK] @ centroids.T, 1)
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
        assigned = nearest_cells(sample, centroids)
        sums = np.zeros_like(centroids)
        np.add.at(sums, assigned, sample)
        empty = np.linalg.norm(sums, axis=1) == 0
        sums[empty] = sample[rng.choice(len(sample), int(empty.sum()), replace=False)]
        centroids = sums / np.linalg.norm(sums, axis=1, keepdims=True)
    return centroids.astype(np.float32)

"""The centroids as RAM keeps them (:class:`~persistence.sqlite.cell_centroids.Centroids`,
issue 46's RSS budget): half of float32's bytes, and the same probed cells and
assignments as float32 except where similarities tie within the int16 precision."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from persistence.sqlite import SQLiteStore, cell_sync, cell_vectors
from persistence.sqlite.cell_centroids import WIDEN_ROWS, Centroids
from persistence.sqlite.cell_kmeans import nearest_cells
from tests.engines.sqlite.test_cell_vectors import DIM, clustered, put, state, unit

TIE = 1e-5
"""A similarity gap within which the compact form may order two cells either way (its
error is about 1e-6 on unit vectors; float16 storage would be about 5e-5)."""


def centroids(seed: int, cells: int, dim: int = 384) -> np.ndarray:
    """Unit centroids near each other (a few per topic), as trained cells' are."""
    rng = np.random.default_rng(seed)
    topics = unit(rng, max(cells // 8, 1), dim)
    near = topics[rng.integers(len(topics), size=cells)] + 0.6 * unit(rng, cells, dim)
    out: np.ndarray = near / np.linalg.norm(near, axis=1, keepdims=True)
    return out.astype(np.float32)


@pytest.mark.parametrize("cells", [300, 2 * WIDEN_ROWS + 37])
def test_the_probed_cells_are_float32s_except_where_similarities_tie(cells: int) -> None:
    floats = centroids(1, cells)
    compact = Centroids.of(floats)
    rng = np.random.default_rng(2)
    queries = floats[rng.integers(cells, size=100)] + 0.8 * unit(rng, 100, 384)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    probes = 24
    differed = 0
    for query in queries:
        exact = floats.astype(np.float64) @ query.astype(np.float64)
        ranked = compact.similarities(query)
        assert ranked.shape == (cells,) and ranked.dtype == np.float32
        assert np.abs(ranked - exact).max() < TIE
        want = set(np.argpartition(-exact, probes - 1)[:probes].tolist())
        got = set(np.argpartition(-ranked, probes - 1)[:probes].tolist())
        kth = np.sort(exact)[-probes]
        assert all(abs(exact[c] - kth) < TIE for c in want ^ got)
        differed += want != got
    assert differed <= 2  # a tie within 1e-5 among thousands of cells is rare
    # the assignment of writes: the nearest cell, as against float32
    vectors = queries.astype(np.float32)
    exact_all = vectors.astype(np.float64) @ floats.T.astype(np.float64)
    assigned = nearest_cells(vectors, compact)
    best = exact_all.max(axis=1)
    assert np.all(best - exact_all[np.arange(len(vectors)), assigned] < TIE)
    assert (assigned == nearest_cells(vectors, floats)).mean() >= 0.98


def test_the_compact_form_holds_half_of_float32s_bytes_and_their_values() -> None:
    floats = centroids(3, 3_000)
    compact = Centroids.of(floats)
    assert compact.codes.dtype == np.int16 and compact.scales.dtype == np.float32
    assert compact.nbytes == 3_000 * (2 * 384 + 4)  # 2.2 MiB for float32's 4.4 MiB
    assert compact.nbytes <= 0.51 * floats.nbytes
    # each component within half a step of its centroid's scale (largest -> 32,767),
    # give or take float32's rounding of the product
    error = np.abs(compact.floats() - floats)
    assert np.all(error <= compact.scales[:, None] * 0.5 + np.abs(floats) * 2**-22)
    assert np.allclose(compact.scales, np.abs(floats).max(axis=1) / 32_767)


def test_read_a_chunk_at_a_time_equals_the_whole_and_keeps_a_damaged_count() -> None:
    floats = centroids(4, 50, dim=16)
    whole = Centroids.of(floats)
    chunks = [floats[start : start + 7] for start in range(0, 50, 7)]
    read = Centroids.read(iter(chunks), 50, 16)
    assert np.array_equal(read.codes, whole.codes) and np.array_equal(read.scales, whole.scales)
    # more rows than the state counts, or fewer (damaged): all that were read, in order
    assert np.array_equal(Centroids.read(iter(chunks), 30, 16).codes, whole.codes)
    assert np.array_equal(Centroids.read(iter(chunks[:2]), 50, 16).codes, whole.codes[:14])


def test_a_zero_or_non_finite_centroid_ranks_as_zero_without_a_warning() -> None:
    floats = centroids(5, 4, dim=8)
    floats[1] = 0
    floats[2, 3] = np.nan
    floats[3, 0] = np.inf
    with np.errstate(all="raise"):
        compact = Centroids.of(floats)
    assert np.isfinite(compact.scales).all() and compact.scales[1] == 1
    ranked = compact.similarities(floats[0])
    assert np.isfinite(ranked).all() and ranked[1] == 0
    assert ranked[0] == pytest.approx(1, abs=TIE)


def test_a_store_keeps_its_centroids_compact_and_searches_with_them(
    db_path: Path, small_cells: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a reader caches is the int16 form (its bytes as claimed), read across chunks
    equal to the float32 centroids in the file, and a search through it finds the nearest."""
    monkeypatch.setattr(cell_sync, "_CENTROID_ROWS", 7)  # many chunks
    cell_sync.forget_cached_centroids()
    vectors = clustered(np.random.default_rng(6), 600)
    with SQLiteStore(str(db_path), vector_index="cells") as cells:
        ids = put(cells, vectors)
        trained = state(cells)
        assert trained.cells > 7
        with cells.engine.snapshot() as conn:
            view = cells.indexes.vectors.view(conn, DIM)
            floats = cell_sync.centroids_of(conn, DIM)
        assert view is not None and isinstance(view.centroids, Centroids)
        assert view.centroids.nbytes == trained.cells * (2 * DIM + 4)
        assert np.abs(view.centroids.floats() - floats).max() < 1e-4
        monkeypatch.setattr(cell_vectors, "PROBES", 4)
        found = [cells.indexes.vector_search(vectors[i], 1)[0][0] for i in range(0, 600, 60)]
        assert found == ids[0:600:60]
        assert cells.indexes.vectors.last_search == "cells"

"""Cells of a fixed size (:mod:`persistence.sqlite.cell_train`, issue 46): training bisects
coarse cells to at most ``CELL_SIZE``, writes keep them there, old (``sqrt(N)``) cells
are trained again by ``maintain()``, and searches stay exact where they must."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from persistence import Memory, MemoryFilter, Tier
from persistence.sqlite import SQLiteStore, cell_packs, cell_sync, cell_train, cell_vectors
from persistence.sqlite.cell_kmeans import nearest_cells
from persistence.sqlite.sql import cell_sql
from persistence.statements import run_all
from tests.engines.sqlite.test_cell_vectors import (
    clustered,
    exact,
    maintain,
    nearest,
    problems,
    put,
    state,
    unit,
)


def sizes(store: SQLiteStore) -> list[int]:
    with store.engine.snapshot() as conn:
        return [cell_packs.held(conn, c) for c in range(state(store).cells)]


@pytest.fixture
def scaled(monkeypatch: pytest.MonkeyPatch) -> None:
    """A million memories' shape on a few thousand: cells of at most 32, coarse cells of
    ``sqrt(N)`` (about 50) bisected, 8 probes; many cells from 200 vectors."""
    monkeypatch.setattr(cell_sync, "TRAIN_MIN", 64)
    monkeypatch.setattr(cell_sync, "CELLS_FROM", 200)
    monkeypatch.setattr(cell_sync, "TAIL_MIN", 8)
    monkeypatch.setattr(cell_train, "CELL_SIZE", 32)
    monkeypatch.setattr(cell_vectors, "PROBES", 8)


def test_bisect_makes_leaves_of_at_most_the_bound_that_cover_every_vector() -> None:
    rng = np.random.default_rng(1)
    vectors = clustered(rng, 3_000, centres=60).astype(np.float32)
    leaves = cell_train.bisect(vectors, 100)
    assert len(leaves) >= 30
    counts = np.bincount(nearest_cells(vectors, np.array(leaves)), minlength=len(leaves))
    assert counts.sum() == 3_000 and np.median(counts) <= 100
    same = np.repeat(vectors[:1], 250, axis=0)  # all alike: one leaf, not looped on
    assert len(cell_train.bisect(same, 100)) == 1


@pytest.mark.parametrize("rounds", [1, 2])
def test_training_makes_cells_of_at_most_cell_size_and_finds_the_nearest(
    db_path: Path, scaled: None, monkeypatch: pytest.MonkeyPatch, rounds: int
) -> None:
    monkeypatch.setattr(cell_train, "LLOYD_ROUNDS", rounds)
    rng = np.random.default_rng(3)
    vectors = clustered(rng, 2_500, centres=50)
    with SQLiteStore(str(db_path), vector_index="cells") as store:
        ids = put(store, vectors)
        maintain(store)
        trained = state(store)
        held = sizes(store)
        assert trained.cells > cell_sync.coarse_cells_for(2_500)  # bisected
        assert sum(held) == 2_500 and np.mean(held) <= 32
        assert not cell_sync.oversized(trained)
        assert problems(store) == []
        hits = []
        for n in range(0, 2_500, 100):  # a member's neighbour: itself first
            query = vectors[n] + 0.3 * unit(rng, 1)[0]
            query /= np.linalg.norm(query)
            found = nearest(store, query, 10)
            hits.append(len(set(found) & set(exact(ids, vectors, query, 10))) / 10)
        assert store.indexes.vectors.last_search == "cells"
        assert np.mean(hits) >= 0.9


def test_a_wide_filter_on_many_small_cells_finds_what_exhaustive_search_finds(
    db_path: Path, scaled: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tag on a tenth, too many to compare exactly, queries away from the clusters, 2
    cells probed unfiltered: the filtered search probes deeper until it finds them."""
    monkeypatch.setattr(cell_vectors, "PROBES", 2)
    rng = np.random.default_rng(6)
    vectors = clustered(rng, 2_500, centres=50)
    tags = [("tenth",) if i % 10 == 0 else () for i in range(len(vectors))]
    with SQLiteStore(str(db_path), vector_index="cells") as store:
        ids = put(store, vectors, tags=tags)
        maintain(store)
        assert state(store).cells > 100
        store.indexes.exact_scan_max = 16
        tenth = np.arange(len(vectors)) % 10 == 0
        kept = [i for i, t in zip(ids, tenth, strict=True) if t]
        overlap = []
        for query in clustered(rng, 12, centres=50):
            found = nearest(store, query, 10, where=MemoryFilter(tags=("tenth",)))
            assert set(found) <= set(kept)
            overlap.append(len(set(found) & set(exact(kept, vectors[tenth], query, 10))) / 10)
        assert store.indexes.vectors.last_search == "cells"
        assert np.mean(overlap) >= 0.95


def test_a_file_grown_by_writes_keeps_its_cells_near_cell_size(
    db_path: Path, scaled: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No training past FIRST_TRAIN_MAX: splits in the writes keep every cell at most
    CELL_SIZE (and a write's worth), the average near it; the check stays clean, a filter
    of few memories is compared exactly, and the nearest is found."""
    monkeypatch.setattr(cell_sync, "FIRST_TRAIN_MAX", 128)
    rng = np.random.default_rng(4)
    vectors = clustered(rng, 2_000, centres=50)
    ids = [f"g{i:05d}" for i in range(len(vectors))]
    with SQLiteStore(str(db_path), vector_index="cells") as store:
        for start in range(0, len(vectors), 20):
            with store.transaction():
                for i in range(start, start + 20):
                    store.memories.put_memory(Memory.create(
                        f"t {i}", Tier.EPISODIC, id=ids[i], embedding=vectors[i],
                        tags=("rare",) if i % 50 == 0 else ()))  # fmt: skip
        grown = state(store)
        held = sizes(store)
        assert grown.trained_on <= 128 and grown.members == 2_000
        assert max(held) <= 32 + 20 and 8 <= np.mean(held) <= 32
        assert not cell_sync.oversized(grown)
        assert problems(store) == []
        rare = np.arange(len(vectors)) % 50 == 0
        rare_ids = [i for i, r in zip(ids, rare, strict=True) if r]
        store.indexes.exact_scan_max = 64  # 40 rare memories: compared exactly
        hits = []
        for n in range(5, 2_000, 97):
            query = vectors[n]
            found = nearest(store, query, 5, where=MemoryFilter(tags=("rare",)))
            assert found == exact(rare_ids, vectors[rare], query, 5)
            hits.append(nearest(store, query, 1) == [ids[n]])
        assert store.indexes.vectors.last_search == "cells"
        assert np.mean(hits) >= 0.95


def test_maintain_trains_again_cells_trained_the_old_way(
    db_path: Path, scaled: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cells of ``sqrt(N)`` (a file trained before issue 46) still answer, and
    ``maintain()`` trains them again to the fixed size (once: not again after)."""
    rng = np.random.default_rng(5)
    vectors = clustered(rng, 2_500, centres=50)
    with SQLiteStore(str(db_path), vector_index="cells") as store:
        ids = put(store, vectors)
        monkeypatch.setattr(cell_train, "CELL_SIZE", 10_000)  # the old way: no bisection
        with store.transaction() as conn:  # dropped: trained again as this write commits
            run_all(conn, cell_sql.DROP_ALL)
        old = state(store)
        assert old.cells == round(2_500**0.5)
        monkeypatch.setattr(cell_train, "CELL_SIZE", 32)
        assert cell_sync.oversized(old)
        assert nearest(store, vectors[7], 1) == [ids[7]]
        maintain(store)
        new = state(store)
        assert new.generation != old.generation and new.cells > 2_500 // 32
        assert not cell_sync.oversized(new) and problems(store) == []
        maintain(store)
        assert state(store).generation == new.generation
        assert nearest(store, vectors[7], 1) == [ids[7]]


def _centroids(store: SQLiteStore) -> np.ndarray:
    with store.engine.snapshot() as conn:
        return cell_sync.centroids_of(conn, state(store).dim)


def test_alike_vectors_train_into_one_cell_and_leave_no_cell_empty(
    db_path: Path, scaled: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One text remembered 500 times: halves of it would share one centroid, the training
    put them all in one and left the twins empty (probed for nothing); now one cell holds
    them, every centroid is finite and no cell is empty. The coarse cell that holds them
    is bisected on at most LEAF_READ of its vectors."""
    monkeypatch.setattr(cell_train, "LEAF_READ", 128)
    read: list[int] = []
    real = cell_train.bisect

    def spy(vectors: np.ndarray, *args: object, **kwargs: object) -> list[np.ndarray]:
        read.append(len(vectors))
        return real(vectors, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cell_train, "bisect", spy)
    rng = np.random.default_rng(1)
    same = unit(rng, 1)
    vectors = np.concatenate([clustered(rng, 2_000, centres=50), np.repeat(same, 500, axis=0)])
    with SQLiteStore(str(db_path), vector_index="cells") as store:
        ids = put(store, vectors)
        maintain(store)
        assert problems(store) == []
        assert read and max(read) <= 128  # the alike coarse cell was read in part
        held = sizes(store)
        assert 0 not in held and sum(held) == 2_500
        assert np.isfinite(_centroids(store)).all()
        assert max(held) >= 500  # the alike ones together
        assert set(nearest(store, same[0], 10)) <= set(ids[2_000:])


def test_a_second_lloyd_round_moves_the_centroids(
    db_path: Path, tmp_path: Path, scaled: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rounds before the last move the centroids to their members' mean: training
    with two rounds ends elsewhere than with one (vectors without clusters: on tight
    clusters one round may already be where Lloyd settles)."""
    vectors = unit(np.random.default_rng(4), 2_500)
    found = []
    for rounds in (1, 2):
        monkeypatch.setattr(cell_train, "LLOYD_ROUNDS", rounds)
        with SQLiteStore(str(tmp_path / f"r{rounds}.db"), vector_index="cells") as store:
            put(store, vectors)
            maintain(store)
            assert problems(store) == []
            centroids = _centroids(store)
            fit = (vectors @ centroids.T).max(axis=1).mean()
            found.append((centroids, fit))
    (one, fit_one), (two, fit_two) = found
    assert one.shape != two.shape or not np.allclose(one, two)
    assert fit_two >= fit_one - 1e-4  # a Lloyd round never moves vectors farther on average


def test_a_wide_filter_probes_a_share_of_the_cells(
    db_path: Path, scaled: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filter accepting a tenth that needs a second round probes at least
    FILTERED_SHARE of the cells over its share (its nearest lie in any cell)."""
    monkeypatch.setattr(cell_vectors, "PROBES", 2)
    rng = np.random.default_rng(6)
    vectors = clustered(rng, 2_500, centres=50)
    tags = [("tenth",) if i % 10 == 0 else () for i in range(len(vectors))]
    probes: list[int] = []
    real = cell_vectors.CellVectors.candidates

    def spy(self: cell_vectors.CellVectors, *args: object) -> object:
        probes.append(int(args[-1]))  # type: ignore[call-overload]
        return real(self, *args)  # type: ignore[arg-type]

    with SQLiteStore(str(db_path), vector_index="cells") as store:
        put(store, vectors, tags=tags)
        maintain(store)
        store.indexes.exact_scan_max = 16
        cells = state(store).cells
        monkeypatch.setattr(cell_vectors.CellVectors, "candidates", spy)
        nearest(store, clustered(rng, 1, centres=50)[0], 10, where=MemoryFilter(tags=("tenth",)))
    assert len(probes) >= 2 and probes[0] == 2
    share = 0.08 * cells / 0.1
    assert max(probes) >= min(cells, int(share) - 1)

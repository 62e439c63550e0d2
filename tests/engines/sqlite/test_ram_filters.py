"""Filtered searches of the RAM copy (the default ``vector_index="ram"``): a fresh handle's
first one ends, and a filter deepened to the whole copy keeps the best that pass."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from persistence import Memory, MemoryFilter, Tier
from persistence.sqlite import SQLiteStore
from tests.engines.sqlite.test_cell_vectors import clustered, nearest


@contextmanager
def ends_within(seconds: int) -> Iterator[None]:
    """Fails (``TimeoutError``) instead of hanging when the block runs past ``seconds``."""

    def hung(*_: object) -> None:
        raise TimeoutError(f"the search did not end in {seconds} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(
    ("size", "agents", "exact_scan_max", "seconds"),
    [(10_000, 2, None, 60), (3_000, 4, 64, 30)],
    ids=["a large agent", "a wide filter"],  # the agent: 750 accepted, not compared at once
)
def test_a_fresh_handles_first_filtered_search_ends(
    tmp_path: Path, size: int, agents: int, exact_scan_max: int | None, seconds: int
) -> None:
    path = str(tmp_path / "f.db")
    vectors = clustered(np.random.default_rng(1), size)
    with SQLiteStore(path) as store, store.transaction():
        for i, v in enumerate(vectors):
            store.memories.put_memory(Memory.create(
                f"t {i}", Tier.EPISODIC, id=f"m{i:05d}", agent_id=f"a{i % agents}",
                embedding=v))  # fmt: skip
    kept = np.arange(1, size, agents)  # agent a1's
    truth = [f"m{i:05d}" for i in kept[np.argsort(-(vectors[kept] @ vectors[1]))[:10]]]
    with ends_within(seconds), SQLiteStore(path) as store:  # the RAM copy not loaded yet
        if exact_scan_max is not None:
            store.indexes.exact_scan_max = exact_scan_max
        found = nearest(store, vectors[1], 10, where=MemoryFilter(agent_id="a1"))
    assert found[0] == "m00001"
    assert len(set(truth) - set(found)) <= 1


def test_a_filter_deepened_to_the_whole_copy_keeps_the_best_that_pass(tmp_path: Path) -> None:
    vectors = clustered(np.random.default_rng(3), 3_000)
    with SQLiteStore(str(tmp_path / "f.db")) as store:
        with store.transaction():
            for i, v in enumerate(vectors):
                store.memories.put_memory(Memory.create(
                    f"t {i}", Tier.EPISODIC, id=f"m{i:05d}",
                    tags=("twentieth",) if i % 20 == 0 else (), embedding=v))  # fmt: skip
        nearest(store, vectors[0], 1)  # the copy loaded
        store.indexes.exact_scan_max = 64  # 150 accepted: searched, not compared at once
        kept = np.flatnonzero(np.arange(3_000) % 20 == 0)
        misses = 0
        for q in np.random.default_rng(5).choice(3_000, 20, replace=False):
            truth = [f"m{i:05d}" for i in kept[np.argsort(-(vectors[kept] @ vectors[q]))[:10]]]
            found = nearest(store, vectors[q], 10, where=MemoryFilter(tags=("twentieth",)))
            misses += len(set(truth) - set(found))
        assert misses == 0


def test_current_memories_of_a_small_tier_are_the_ten_nearest(tmp_path: Path) -> None:
    vectors = clustered(np.random.default_rng(4), 3_150)
    with SQLiteStore(str(tmp_path / "f.db")) as store:
        with store.transaction():
            for i, v in enumerate(vectors):
                tier = Tier.SEMANTIC if i < 150 else Tier.EPISODIC
                store.memories.put_memory(
                    Memory.create(f"t {i}", tier, id=f"m{i:05d}", embedding=v)
                )
        semantic = vectors[:150]
        where = MemoryFilter(tier=Tier.SEMANTIC, current=True)
        misses = 0
        for q in range(150, 170):
            truth = [f"m{i:05d}" for i in np.argsort(-(semantic @ vectors[q]))[:10]]
            misses += len(set(truth) - set(nearest(store, vectors[q], 10, where=where)))
        assert misses == 0

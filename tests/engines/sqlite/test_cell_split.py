"""Splits of vector cells inside writes (:mod:`persistence.sqlite.cell_split`): a cell past
SQLite's host-parameter limit, a cell 2-means cannot divide."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from persistence import Memory, Tier
from persistence.sqlite import SQLiteStore, cell_split, cell_sync, vector_reads
from tests.engines.sqlite.test_cell_vectors import (
    clustered,
    maintain,
    nearest,
    problems,
    put,
    state,
    unit,
)


def _put(store: SQLiteStore, vectors: np.ndarray, start: int, stop: int) -> None:
    with store.transaction():
        for i in range(start, stop):
            store.memories.put_memory(
                Memory.create(f"t {i}", Tier.EPISODIC, id=f"m{i:05d}", embedding=vectors[i])
            )


def test_a_write_that_splits_a_cell_of_33k_codes_commits(tmp_path: Path) -> None:
    vectors = unit(np.random.default_rng(9), 33_000, 128)
    with SQLiteStore(str(tmp_path / "f.db"), vector_index="cells") as store:
        _put(store, vectors, 0, 16_000)  # trained in the write: one cell (below CELLS_FROM)
        _put(store, vectors, 16_000, 19_000)  # 19,000 in one cell: no split yet
        assert state(store).cells == 1
        _put(store, vectors, 19_000, 33_000)  # 14,000 more: one cell of 33,000 splits
        assert state(store).cells > 1 and state(store).members == 33_000
        assert problems(store) == []
        assert nearest(store, vectors[32_999], 1) == ["m32999"]

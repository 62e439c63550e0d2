"""Splits of vector cells inside writes (:mod:`persistence.sqlite.cell_split`): a cell past
SQLite's host-parameter limit, a cell 2-means cannot divide."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from persistence import Memory, Tier
from persistence.sqlite import SQLiteStore, cell_train, vector_reads
from tests.engines.sqlite.conftest import CellsFile
from tests.engines.sqlite.test_cell_vectors import maintain, nearest, problems, state, unit


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


def test_a_cell_of_alike_vectors_is_halved_and_not_read_again_by_every_write(
    cells_file: Callable[[int], CellsFile], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cell_train, "CELL_SIZE", 64)
    f = cells_file(11)
    same = f.vectors[0]  # one text remembered again and again ("ok", "thanks")
    store = f.store
    maintain(store)
    with store.transaction():
        for n in range(300):
            store.memories.put_memory(
                Memory.create(f"ok {n}", Tier.EPISODIC, id=f"d{n:04d}", embedding=same)
            )
    read: list[int] = []
    original = vector_reads.embeddings_of

    def spy(conn: object, ids: list[str], *rest: object) -> object:
        read.append(len(ids))
        return original(conn, ids, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(vector_reads, "embeddings_of", spy)
    for n in range(20):  # 20 more single writes of it
        store.memories.put_memory(
            Memory.create(f"ok again {n}", Tier.EPISODIC, id=f"e{n:04d}", embedding=same)
        )
    assert problems(store) == []
    # halved (302 codes: two of 151, past 4·√900 = 120), each half the writes reach
    # halved once more, then under the bound: not read again (20 times before). Which
    # half a write reaches is a tie (their centroids equal but for rounding, and the
    # int16 centroids RAM keeps round differently from float32): one half or both.
    assert len([r for r in read if r > 100]) <= 3
    assert nearest(store, same, 1)[0].startswith(("d", "e", "m00000"))

"""Fixtures of the SQLite engine's vector cell tests: cells on a few hundred vectors, and a
file of them searched, damaged and written by the tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from persistence.sqlite import SQLiteStore, cell_sync, cell_train
from tests.engines.sqlite.test_cell_vectors import clustered, put


@pytest.fixture
def small_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cells on a few hundred vectors: trained from 64, many cells from 200 (of at most 16
    vectors: coarse cells of ``sqrt(N)`` are bisected), small tails."""
    monkeypatch.setattr(cell_sync, "TRAIN_MIN", 64)
    monkeypatch.setattr(cell_sync, "CELLS_FROM", 200)
    monkeypatch.setattr(cell_sync, "TAIL_MIN", 8)
    monkeypatch.setattr(cell_train, "CELL_SIZE", 16)


@dataclass(slots=True)
class CellsFile:
    """A store on a file, searched by its vector cells, and the vectors put in it."""

    store: SQLiteStore
    vectors: np.ndarray
    ids: list[str]


@pytest.fixture
def cells_file(db_path: Path, small_cells: None) -> Iterator[Callable[[int], CellsFile]]:
    """Opens the file at ``db_path`` (``vector_index="cells"``, small cells) holding 600
    clustered vectors drawn with the given seed; closed when the test ends."""
    with ExitStack() as stack:

        def make(seed: int) -> CellsFile:
            vectors = clustered(np.random.default_rng(seed), 600)
            store = stack.enter_context(SQLiteStore(str(db_path), vector_index="cells"))
            return CellsFile(store, vectors, put(store, vectors))

        yield make

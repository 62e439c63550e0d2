"""The vector cells as the default vector index (issue 46): a default file is searched by
its cells from the first memories on, kept up by ``remember()`` alone (no
``maintain()``), and opened read-only where sqlite-vec cannot load it still answers,
says so once and changes no byte."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import sqlite_vec

from persistence.sqlite import SQLiteStore, cell_sync, cell_vectors, vec_extension
from persistence.sqlite.cell_vectors import CellVectors
from tests.conftest import file_digest
from tests.engines.sqlite.test_cell_vectors import clustered, put
from tests.support.worker import HashEmbedder
from tiered_memory import AgentMemoryManager, MemoryConfig


def test_every_entry_defaults_to_the_cells(db_path: Path) -> None:
    assert MemoryConfig().vector_index == "cells"
    with SQLiteStore(db_path) as store:
        assert isinstance(store.indexes.vectors, CellVectors)
    with AgentMemoryManager.open(db_path, embedder=None) as memory:
        assert isinstance(memory.store, SQLiteStore)
        assert isinstance(memory.store.indexes.vectors, CellVectors)


def grow_by_remember(memory: AgentMemoryManager, count: int, every: int) -> list[str]:
    """``count`` memories remembered one by one, a search every ``every`` of them (for
    the last one's vector: found at distance 0); which index answered each search."""
    store = memory.store
    assert isinstance(store, SQLiteStore)
    answered = []
    for n in range(count):
        memory.remember(f"fact number {n}")
        if (n + 1) % every == 0:
            memory.flush()
            query = HashEmbedder("test-grow", 256).embed([f"fact number {n}"])[0]
            found = store.indexes.vector_search(query, 1)
            assert found[0][1] == pytest.approx(0.0, abs=1e-5)  # the memory itself
            answered.append(store.indexes.vectors.last_search)
    return answered


def test_a_file_grown_by_remember_alone_is_searched_by_its_cells(
    db_path: Path, small_cells: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cell_vectors, "BACKLOG_MAX", 40)  # more: the RAM copy would answer
    monkeypatch.setattr(cell_sync, "FIRST_TRAIN_MAX", 100)  # writes train no larger file
    with AgentMemoryManager.open(
        db_path, embedder=HashEmbedder("test-grow", 256), embed_in_background=False,
        recall_review_quality=None,
    ) as memory:  # fmt: skip
        answered = grow_by_remember(memory, 400, every=50)  # each write its own vector
        store = memory.store
        assert isinstance(store, SQLiteStore)
        with store.engine.snapshot() as conn:
            state = cell_sync.read_state(conn)
        assert state is not None and state.members == 400 and state.cells > 1
    # below TRAIN_MIN (64) the RAM copy of so few answers; from then on the cells, though
    # the file grew to ten times BACKLOG_MAX and four times what writes train
    assert answered == ["ram"] + ["cells"] * 7


@pytest.mark.slow
def test_at_the_shipped_sizes_remember_alone_keeps_the_cells_answering(db_path: Path) -> None:
    count = cell_vectors.BACKLOG_MAX + 200
    assert count // 4 > cell_sync.TRAIN_MIN  # the first search finds cells trained
    with AgentMemoryManager.open(
        db_path, embedder=HashEmbedder("test-grow", 256), recall_review_quality=None
    ) as memory:
        answered = grow_by_remember(memory, count, every=count // 4)  # embedded in the background
    assert answered == ["cells"] * 4


def test_a_write_that_cannot_bring_the_cells_up_says_to_maintain(
    db_path: Path, small_cells: None, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    rng = np.random.default_rng(3)
    with SQLiteStore(db_path, vector_index="ram") as store:  # a file filled before the cells
        put(store, clustered(rng, 300))
    monkeypatch.setattr(cell_sync, "FIRST_TRAIN_MAX", 100)
    with (
        caplog.at_level(logging.WARNING, "tiered_memory"),
        AgentMemoryManager.open(db_path, embedder=None, recall_review_quality=None) as memory,
    ):
        for n in range(3):
            memory.remember(f"more {n}", embedding=clustered(rng, 1)[0].tolist())
        store = memory.store
        assert isinstance(store, SQLiteStore)
        store.indexes.vector_search(clustered(rng, 1)[0], 3)
        assert store.indexes.vectors.last_search == "ram"
        told = [r for r in caplog.records if r.message == cell_vectors.TOO_LARGE]
        assert len(told) == 1  # once, not per write
        memory.maintain()
        store.indexes.vector_search(clustered(rng, 1)[0], 3)
        assert store.indexes.vectors.last_search == "cells"


def test_read_only_without_sqlite_vec_answers_warns_once_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "agent.db"
    embedder = HashEmbedder("test-ro", 256)
    texts = [f"note {n} about topic {n % 37}" for n in range(cell_sync.TRAIN_MIN + 100)]
    with AgentMemoryManager.open(db, embedder=embedder, embed_in_background=False) as memory:
        memory.remember_many(texts)
        memory.flush()
        store = memory.store
        assert isinstance(store, SQLiteStore)
        with store.engine.snapshot() as conn:
            assert cell_sync.read_state(conn) is not None  # the default file has cells
    files = sorted(tmp_path.iterdir())
    before = {p.name: file_digest(p) for p in files}
    monkeypatch.setattr(sqlite_vec, "loadable_path", lambda: str(tmp_path / "no-vec0.so"))
    monkeypatch.setattr(vec_extension, "_warned", False)
    with (
        caplog.at_level(logging.WARNING, "tiered_memory"),
        AgentMemoryManager.open(db, embedder=embedder, read_only=True) as memory,
    ):
        hits = memory.recall(texts[123], k=3)
        assert hits[0].memory.content == texts[123]
        assert "vector" in [s.signal for s in hits[0].explanation.signals]
        assert memory.recall(texts[777], k=1)[0].memory.content == texts[777]
        store = memory.store
        assert isinstance(store, SQLiteStore)
        assert store.indexes.vectors.last_search == "cells"
    warnings = [r.message for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "sqlite-vec" in warnings[0], warnings
    assert sorted(tmp_path.iterdir()) == files
    assert {p.name: file_digest(p) for p in files} == before

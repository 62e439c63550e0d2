"""The cells as the default vector index, where review 10 found them wanting: a damaged
count of cells, commits that change no vector, several files or generations in one
process, a tiny centroid in int16. Each test failed before its fix."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from persistence import Memory, Tier
from persistence.records import TracedStatement
from persistence.sqlite import SQLiteStore, cell_sync
from persistence.sqlite.cell_centroids import Centroids
from persistence.statements import Statement, run
from tests.engines.sqlite.test_cell_vectors import (
    clustered,
    maintain,
    nearest,
    problems,
    put,
    state,
)


@pytest.mark.parametrize("damaged", [-1, 10**10])
def test_a_damaged_count_of_cells_is_searched_around_not_raised(
    db_path: Path, small_cells: None, monkeypatch: pytest.MonkeyPatch, damaged: int
) -> None:
    """``Centroids.read`` allocates ``state.cells`` rows before it reads any: a damaged
    count raises ValueError (negative) or MemoryError (huge) out of a search, where
    main's ``centroids_of`` read what was there and the view fell back to the RAM copy."""
    cell_sync.forget_cached_centroids()
    vectors = clustered(np.random.default_rng(21), 600)
    with SQLiteStore(db_path) as store:
        ids = put(store, vectors)
        with store.transaction() as conn:
            run(conn, Statement("UPDATE vector_cell_state SET cells = ?", (damaged,)))
        assert nearest(store, vectors[0], 1) == [ids[0]]  # raises on the merge branch
        assert store.indexes.vectors.last_search == "ram"
        store.memories.put_memory(  # a write that reaches the cells is not blocked either
            Memory.create("new", Tier.EPISODIC, id="new", embedding=vectors[1].tolist())
        )


def test_a_write_that_changes_no_vector_does_not_count_the_file(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``CellVectors.before_commit``: 'one that did not [change a vector] costs two
    reads'. A default file with a few vectors (fewer than TRAIN_MIN: no cells) and many
    memories without one counts every memory and every unembedded one at each commit
    (9.7 ms a remember() at 100k memories against 0.2 ms with vector_index='ram')."""
    traced: list[str] = []
    with SQLiteStore(db_path, vector_index="ram") as store:
        with store.transaction():
            for n in range(2_000):
                store.memories.put_memory(Memory.create(f"t {n}", Tier.EPISODIC))
        vector = np.ones(256, dtype=np.float32).tolist()
        store.memories.put_memory(Memory.create("v", Tier.EPISODIC, embedding=vector))

    def trace(statement: TracedStatement) -> None:
        traced.append(statement.sql)

    with SQLiteStore(db_path, trace=trace) as store:
        store.memories.put_memory(Memory.create("first", Tier.EPISODIC))
        traced.clear()
        store.memories.put_memory(Memory.create("second", Tier.EPISODIC))
    counts = [s for s in traced if "FROM memory_index LIMIT" in s or "embedding IS NULL)" in s]
    assert counts == []  # the merge branch: both counts, at every commit


def test_a_tiny_nonzero_centroid_keeps_its_sign() -> None:
    """``Centroids.of``: a row whose largest component is subnormal gets a scale that
    rounds down (largest / 32,767 is below float32's resolution there), so a code
    passes 32,767 and wraps around in int16: a damaged row ranks as its opposite
    (the fix floors the scale at float32's smallest normal: such a row reads as 0)."""
    floats = np.zeros((1, 4), dtype=np.float32)
    floats[0, 0] = np.float32(1e-40)
    with np.errstate(all="ignore"):
        compact = Centroids.of(floats)
    assert compact.codes[0, 0] >= 0  # -29,855 on the merge branch (wrapped)


def test_alternate_searches_of_two_files_read_each_ones_centroids_once(
    tmp_path: Path, small_cells: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The centroid cache held one generation for the process: two default files
    searched in turn (a server with a file per user, copy_memory's two ends) read all of
    one file's centroids at every search (19-35 ms at 3,000 cells, 220-260 ms at 30,000,
    measured with /tmp/r10/reload_cost.py)."""
    cell_sync.forget_cached_centroids()
    loads: list[int] = []
    chunks = cell_sync._centroid_chunks

    def counted(conn: object, dim: int):  # type: ignore[no-untyped-def]
        loads.append(dim)
        return chunks(conn, dim)  # type: ignore[arg-type]

    rng = np.random.default_rng(22)
    va, vb = clustered(rng, 600), clustered(rng, 600)
    with SQLiteStore(tmp_path / "a.db") as a, SQLiteStore(tmp_path / "b.db") as b:
        ids_a, ids_b = put(a, va), put(b, vb)
        monkeypatch.setattr(cell_sync, "_centroid_chunks", counted)
        for i in range(10):
            assert nearest(a, va[i], 1) == [ids_a[i]] and nearest(b, vb[i], 1) == [ids_b[i]]
        assert a.indexes.vectors.last_search == b.indexes.vectors.last_search == "cells"
    assert len(loads) == 2  # 20 on the merge branch


def test_a_count_of_cells_that_disagrees_is_reported_and_trained_again(
    db_path: Path, small_cells: None
) -> None:
    """``CellVectors.view`` answers by the RAM copy when the centroids held are not the
    state's count ("damaged: check() reports it"), but check_integrity did not report it
    and maintain() kept it: the file was searched by the RAM copy for good."""
    vectors = clustered(np.random.default_rng(23), 600)
    with SQLiteStore(db_path) as store:
        ids = put(store, vectors)
        generation = state(store).generation
        with store.transaction() as conn:
            run(conn, Statement("UPDATE vector_cell_state SET cells = cells + 1"))
        assert any("centroids" in p for p in problems(store))  # [] on the merge branch
        maintain(store)
        assert state(store).generation != generation and problems(store) == []
        assert nearest(store, vectors[0], 1) == [ids[0]]
        assert store.indexes.vectors.last_search == "cells"


def test_a_file_keeps_one_generation_of_centroids_cached(db_path: Path, small_cells: None) -> None:
    """A split makes a new generation: the file's older copy is dropped when the new one
    is read, not kept beside it until the cache's bound (a 1M file would hold 14 copies
    of its 2.2 MiB)."""
    from dataclasses import replace

    cell_sync.forget_cached_centroids()
    vectors = clustered(np.random.default_rng(24), 600)
    with SQLiteStore(db_path) as store:
        put(store, vectors)
        now = state(store)
        with store.engine.reading() as conn:
            first = cell_sync.cached_centroids(conn, now)
            again = cell_sync.cached_centroids(conn, replace(now, generation=now.generation + 1))
        assert first is not again  # another generation is read again
        assert len(cell_sync._cached) == 1
        assert cell_sync._cached[db_path.as_posix()][0] == now.generation + 1

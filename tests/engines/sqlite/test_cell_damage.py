"""Damaged vector cells (a bad disk, a bit flip, a hand edit): no raw error from a search,
a write, ``check_integrity`` or ``maintain()``; searches answer by the RAM copy meanwhile,
the check reports the damage, and a write reaching it or ``maintain()`` trains the cells
again. Also: a small tier is compared exactly, not by reading every cell."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from persistence import Memory, Tier
from persistence.sqlite import SQLiteStore, cell_scan, cell_sync, cell_train
from persistence.sqlite.sql import cell_sql
from persistence.statements import Statement, rows, run
from tests.engines.sqlite.conftest import CellsFile
from tests.engines.sqlite.test_cell_vectors import (
    clustered,
    maintain,
    nearest,
    problems,
    put,
    state,
    unit,
)

CellsFiles = Callable[[int], CellsFile]


def _damage(store: SQLiteStore, sql: str, params: tuple[Any, ...] = ()) -> None:
    with store.transaction() as conn:
        run(conn, Statement(sql, params))


def _cell_of(store: SQLiteStore, memory_id: str) -> int:
    with store.engine.snapshot() as conn:
        return int(rows(conn, cell_sql.members_of([memory_id]))[0][1])


def _ids_not_text(store: SQLiteStore, cell: int) -> None:
    _damage(store, "UPDATE vector_cell_packs SET ids = x'ff' || substr(ids, 2) WHERE cell = ?",
            (cell,))  # fmt: skip


def _ids_empty(store: SQLiteStore, cell: int) -> None:
    _damage(store, "UPDATE vector_cell_packs SET ids = x'' WHERE cell = ?", (cell,))


def _tier_bytes_past_the_tiers(store: SQLiteStore, cell: int) -> None:
    with store.engine.snapshot() as conn:
        sql = "SELECT size, width, codes FROM vector_cell_packs WHERE cell = ?"
        size, width, codes = rows(conn, Statement(sql, (cell,)))[0]
    damaged = bytearray(codes)
    for n in range(size):  # every code of the cell: tier byte 0xff
        damaged[n * width] = 0xFF
    _damage(store, "UPDATE vector_cell_packs SET codes = ? WHERE cell = ?", (bytes(damaged), cell))


@pytest.mark.parametrize(
    ("damage", "seed"),
    [(_ids_not_text, 21), (_ids_empty, 23), (_tier_bytes_past_the_tiers, 21)],
    ids=["an id that is not text", "an empty ids blob", "tier bytes past the tiers"],
)
def test_a_damaged_pack_is_reported_and_searched_around_in_the_ram_copy(
    cells_file: CellsFiles, damage: Callable[[SQLiteStore, int], None], seed: int
) -> None:
    f = cells_file(seed)
    damage(f.store, _cell_of(f.store, f.ids[0]))
    assert nearest(f.store, f.vectors[0], 10)[0] == f.ids[0]  # no raw error
    assert f.store.indexes.vectors.last_search == "ram"
    assert problems(f.store) != []


def test_a_pack_of_the_wrong_width_is_reported_and_trained_again_by_maintain(
    cells_file: CellsFiles,
) -> None:
    f = cells_file(22)
    cells = f.store
    with cells.engine.snapshot() as conn:
        (cell,) = rows(conn, Statement(
            "SELECT cell FROM vector_cell_packs WHERE size % 2 = 0 LIMIT 1"))[0]  # fmt: skip
    _damage(cells, "UPDATE vector_cell_packs SET size = size / 2, width = width * 2 "
            "WHERE cell = ?", (cell,))  # fmt: skip
    assert problems(cells) != []
    maintain(cells)
    assert problems(cells) == []
    assert nearest(cells, f.vectors[5], 1) == [f.ids[5]]


def test_a_damaged_centroid_blocks_no_search_and_no_write(db_path: Path, small_cells: None) -> None:
    vectors = clustered(np.random.default_rng(24), 600)
    with SQLiteStore(str(db_path), vector_index="cells") as cells:
        ids = put(cells, vectors)
    cell_sync.forget_cached_centroids()  # the centroid cache is per process
    with SQLiteStore(str(db_path), vector_index="cells") as cells:
        _damage(cells, "UPDATE vector_cells SET centroid = "
                "substr(centroid, 1, length(centroid) - 4) WHERE cell = 0")  # fmt: skip
        assert problems(cells) != []
        assert nearest(cells, vectors[0], 1) == [ids[0]]
        cells.memories.put_memory(
            Memory.create("new", Tier.EPISODIC, id="new1", embedding=vectors[1])
        )  # the write drops the cells and trains them again (a small file)
        assert problems(cells) == []
        assert set(nearest(cells, vectors[1], 2)) == {ids[1], "new1"}
        assert cells.indexes.vectors.last_search == "cells"


def test_a_small_tier_is_compared_exactly_without_reading_the_cells(
    db_path: Path, small_cells: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    vectors = clustered(np.random.default_rng(5), 2_000)
    read: list[int] = []
    original = cell_scan.best_codes

    def counting(conn: Any, chosen: list[int], *args: Any) -> Any:
        read.append(len(chosen))
        return original(conn, chosen, *args)

    monkeypatch.setattr(cell_scan, "best_codes", counting)
    with SQLiteStore(str(db_path), vector_index="cells") as store:
        ids = put(store, vectors)
        for memory_id in ids[:30]:
            store.promote_memory(memory_id, Tier.EPISODIC, Tier.SEMANTIC, reason="t")
        read.clear()
        found = nearest(store, vectors[3], 10, tier=Tier.SEMANTIC)
        assert read == []  # 8%, 32%, then every cell before
        semantic = vectors[:30]
        assert found == [ids[i] for i in np.argsort(-(semantic @ vectors[3]))[:10]]


def test_a_retrain_inside_a_rolled_back_savepoint_rolls_back_with_it(
    cells_file: CellsFiles,
) -> None:
    f = cells_file(26)
    cells, vectors, ids = f.store, f.vectors, f.ids
    expected = nearest(cells, vectors[0], 10)
    generation = state(cells).generation
    _damage(cells, "UPDATE vector_cell_packs SET codes = substr(codes, 1, length(codes) - 7) "
            "WHERE cell = ?", (_cell_of(cells, ids[0]),))  # fmt: skip
    with cells.transaction():
        with pytest.raises(RuntimeError), cells.transaction() as conn:  # a savepoint
            cells.memories.put_memory(
                Memory.create("x", Tier.EPISODIC, id=ids[0], embedding=vectors[1])
            )
            cells.indexes.vectors.written(conn)
            assert state(cells).generation != generation  # dropped and trained again
            raise RuntimeError
        assert state(cells).generation == generation  # rolled back with the savepoint
    assert nearest(cells, vectors[0], 10) == expected
    cells.memories.forget_memory(ids[0], reason="t")
    assert problems(cells) == []
    assert nearest(cells, vectors[0], 9) == expected[1:]


def test_a_split_over_an_id_that_is_not_text_does_not_fail_the_write(
    cells_file: CellsFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cell_train, "CELL_SIZE", 64)
    f = cells_file(21)
    store = f.store
    _ids_not_text(store, _cell_of(store, f.ids[0]))
    near = f.vectors[0] + 0.05 * unit(np.random.default_rng(2), 150)
    with store.transaction():  # 150 vectors into that cell: it splits
        for n, v in enumerate(near):
            store.memories.put_memory(
                Memory.create(f"near {n}", Tier.EPISODIC, id=f"n{n:03d}", embedding=v)
            )
    assert problems(store) == []  # dropped and trained again in that write
    assert nearest(store, f.vectors[5], 1) == [f.ids[5]]

"""The vector cells kept in the file (``vector_index="cells"``): same answers as the RAM
copy where it is exact, close to exhaustive search otherwise, in step with every write."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from persistence import Memory, MemoryFilter, Tier
from persistence.sqlite import (
    SQLiteStore,
    bulk_index,
    cell_sync,
    cell_vectors,
    integrity,
    memory_steps,
    vec_extension,
    vector_reads,
)
from persistence.sqlite.sql import cell_sql, memory_sql
from persistence.statements import Statement, rows, run
from tests.conftest import FakeClock
from tiered_memory import AgentMemoryManager

DIM = 256


def unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def clustered(rng: np.random.Generator, n: int, centres: int = 40) -> np.ndarray:
    middle = unit(rng, centres)
    vectors = middle[rng.integers(centres, size=n)] + 0.6 * unit(rng, n)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def put(store: SQLiteStore, vectors: np.ndarray, prefix: str = "m", tags=None) -> list[str]:
    """Memories, then their vectors through the embedding path (``set_embeddings``)."""
    ids = [f"{prefix}{i:05d}" for i in range(len(vectors))]
    with store.transaction():
        for i, memory_id in enumerate(ids):
            tag = () if tags is None else tags[i]
            store.memories.put_memory(
                Memory.create(f"text {i}", Tier.EPISODIC, id=memory_id, tags=tag)
            )
    for start in range(0, len(ids), 500):
        part = range(start, min(start + 500, len(ids)))
        store.indexes.set_embeddings([(Tier.EPISODIC, ids[i], vectors[i]) for i in part])
    return ids


def exact(ids: list[str], vectors: np.ndarray, query: np.ndarray, k: int) -> list[str]:
    return [ids[i] for i in np.argsort(-(vectors @ query), kind="stable")[:k]]


def nearest(store: SQLiteStore, query: np.ndarray, k: int = 10, **kwargs) -> list[str]:
    return [m for m, _ in store.indexes.vector_search(query, k, **kwargs)]


def problems(store: SQLiteStore) -> list[str]:
    with store.engine.fresh_read_connection() as conn:
        return [p.detail for p in integrity.check(conn, ["vector_cells_match"])]


def state(store: SQLiteStore) -> cell_sql.CellState:
    with store.engine.snapshot() as conn:
        found = cell_sync.read_state(conn)
    assert found is not None
    return found


def maintain(store: SQLiteStore) -> None:
    with store.engine.exclusive_connection() as conn:
        store.indexes.vectors.maintain(conn)


@pytest.fixture(params=["file", "memory"])
def cells(request: pytest.FixtureRequest, db_path: Path, clock: FakeClock) -> Iterator[SQLiteStore]:
    path = str(db_path) if request.param == "file" else ":memory:"
    with SQLiteStore(path, clock=clock, vector_index="cells") as opened:
        yield opened


def test_a_small_file_is_one_cell_and_answers_as_exhaustive_search(cells: SQLiteStore) -> None:
    rng = np.random.default_rng(1)
    vectors = clustered(rng, 1_500)
    ids = put(cells, vectors)
    assert state(cells).cells == 1 and state(cells).members == 1_500
    overlap = []
    for query in clustered(rng, 20):
        found = cells.indexes.vector_search(query, 10)
        assert cells.indexes.vectors.last_search == "cells"
        for memory_id, distance in found:
            assert distance == pytest.approx(
                1 - float(vectors[ids.index(memory_id)] @ query), abs=1e-5
            )
        overlap.append(len(set(nearest(cells, query)) & set(exact(ids, vectors, query, 10))) / 10)
    assert np.mean(overlap) >= 0.95
    assert problems(cells) == []


def test_cells_follow_writes_forgets_promotions_and_updates(
    cells: SQLiteStore, small_cells: None
) -> None:
    rng = np.random.default_rng(2)
    vectors = clustered(rng, 600)
    ids = put(cells, vectors)
    trained = state(cells)  # coarse cells bisected into more than a search probes
    assert trained.cells > cell_sync.coarse_cells_for(trained.trained_on)
    assert trained.cells > cell_vectors.PROBES and trained.members <= 16 * trained.cells
    assert nearest(cells, vectors[7], 1) == [ids[7]]
    cells.memories.forget_memory(ids[7], reason="test")
    assert ids[7] not in nearest(cells, vectors[7], 50)
    cells.promote_memory(ids[8], Tier.EPISODIC, Tier.SEMANTIC, reason="test")
    assert nearest(cells, vectors[8], 1, tier=Tier.SEMANTIC) == [ids[8]]
    assert ids[8] not in nearest(cells, vectors[8], 50, tier=Tier.EPISODIC)
    moved = clustered(rng, 1)[0]
    cells.memories.put_memory(Memory.create("changed", Tier.EPISODIC, id=ids[9], embedding=moved))
    assert nearest(cells, moved, 1) == [ids[9]]
    assert ids[9] not in nearest(cells, vectors[9], 3)
    assert cells.indexes.vectors.last_search == "cells"
    with cells.engine.snapshot() as conn:  # every write brought the cells to the log's head
        view = cells.indexes.vectors.view(conn, DIM)
        assert view is not None and view.backlog == []
        held = {i for i, _ in rows(conn, cell_sql.MEMBERS)}
    assert ids[7] not in held and {ids[8], ids[9]} <= held
    assert problems(cells) == []


def test_random_operations_keep_the_cells_equal_to_the_file(
    cells: SQLiteStore, small_cells: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes, re-embeddings, forgets and promotions in random order: every search that
    probes every cell sees exactly the embedded memories of the file, in the right tier,
    and the check finds nothing wrong."""
    monkeypatch.setattr(cell_vectors, "PROBES", 1_000)
    rng = np.random.default_rng(9)
    alive: dict[str, tuple[Tier, np.ndarray]] = {}
    for step in range(900):
        action = rng.random()
        if action < 0.55 or len(alive) < 100:
            memory_id = f"id{int(rng.integers(400))}"
            vector = unit(rng, 1)[0]
            tier = alive[memory_id][0] if memory_id in alive else Tier.SCRATCHPAD
            key = memory_id if tier is Tier.SCRATCHPAD else None
            cells.memories.put_memory(
                Memory.create("t", tier, id=memory_id, key=key, embedding=vector)
            )
            alive[memory_id] = (tier, vector)
        elif action < 0.8:
            memory_id = str(rng.choice(sorted(alive)))
            cells.memories.forget_memory(memory_id, reason="test")
            del alive[memory_id]
        else:
            memory_id = str(rng.choice(sorted(alive)))
            tier, vector = alive[memory_id]
            if tier is Tier.SEMANTIC:
                continue
            target = Tier.EPISODIC if tier is Tier.SCRATCHPAD else Tier.SEMANTIC
            cells.promote_memory(memory_id, tier, target, reason="test")
            alive[memory_id] = (target, vector)
        if step >= 150 and step % 61 == 0:
            for tier in Tier:
                expected = {m for m, (t, _) in alive.items() if t is tier}
                assert set(nearest(cells, unit(rng, 1)[0], 1_000, tier=tier)) == expected
            assert cells.indexes.vectors.last_search == "cells"
            assert problems(cells) == []
    assert state(cells).members == len(alive)


def test_a_filter_probes_deeper_until_enough_pass(cells: SQLiteStore, small_cells: None) -> None:
    rng = np.random.default_rng(3)
    vectors = clustered(rng, 1_200)
    tags = [("rare",) if i % 10 == 0 else () for i in range(1_200)]
    ids = put(cells, vectors, tags=tags)
    kept = np.array([i % 10 == 0 for i in range(1_200)])
    rare_ids = [i for i, k in zip(ids, kept, strict=True) if k]
    where = MemoryFilter(tags=("rare",))
    overlap = []
    cells.indexes.exact_scan_max = 16  # not compared exactly at once: the cells are searched
    for query in clustered(rng, 10):
        found = nearest(cells, query, 10, where=where)
        assert set(found) <= set(rare_ids) and len(found) == 10
        truth = exact(rare_ids, vectors[kept], query, 10)
        overlap.append(len(set(found) & set(truth)) / 10)
    assert cells.indexes.vectors.last_search == "cells"
    assert np.mean(overlap) >= 0.9


def test_maintain_trains_again_once_the_file_grew_fourfold(
    cells: SQLiteStore, small_cells: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cell_sync, "FIRST_TRAIN_MAX", 100)  # writes may not train these
    rng = np.random.default_rng(4)
    put(cells, clustered(rng, 90), prefix="a")
    first = state(cells)
    put(cells, clustered(rng, 400), prefix="b")
    grown = state(cells)  # too large to train in a write (its over-full cells split)
    assert grown.trained_on == first.trained_on and grown.members == 490
    maintain(cells)
    again = state(cells)
    assert again.generation != grown.generation
    assert (again.trained_on, again.members) == (490, 490)
    assert again.cells > cell_sync.coarse_cells_for(490) and 16 * again.cells >= 490
    with cells.engine.snapshot() as conn:  # every tail folded into its pack
        assert rows(conn, cell_sql.ALL_TAILS) == []
    assert problems(cells) == []


def test_a_swapped_model_drops_the_cells_and_trains_them_on_the_new_vectors(
    cells: SQLiteStore,
) -> None:
    rng = np.random.default_rng(5)
    put(cells, clustered(rng, 1_100))
    cells.indexes.begin_rebuild("other", 384)
    fresh = unit(rng, 1_100, 384)
    staged = cells.indexes.unstaged_for_rebuild(2_000)
    cells.indexes.stage_rebuild([(i, c, fresh[n]) for n, (i, c) in enumerate(staged)])
    cells.indexes.finish_rebuild(lambda texts: unit(rng, len(texts), 384))
    assert state(cells).dim == 384 and state(cells).members == 1_100
    memory_id = staged[3][0]
    assert nearest(cells, fresh[3], 1) == [memory_id]
    assert cells.indexes.vectors.last_search == "cells"
    assert problems(cells) == []


def test_another_connections_commits_are_seen_before_it_syncs_the_cells(db_path: Path) -> None:
    rng = np.random.default_rng(6)
    with (
        SQLiteStore(db_path, vector_index="cells") as writer,
        SQLiteStore(db_path, vector_index="cells") as reader,
    ):
        vectors = clustered(rng, 1_100)
        put(writer, vectors)
        assert nearest(reader, vectors[0], 1) == ["m00000"]
        fresh = clustered(rng, 1)[0]
        with writer.engine.exclusive_connection() as conn:  # written around the cells
            conn.execute(
                "UPDATE episodic SET embedding = ? WHERE id = 'm00001'", (fresh.tobytes(),)
            )
        assert nearest(reader, fresh, 1) == ["m00001"]  # from the backlog, exactly
        assert "m00001" not in nearest(reader, vectors[1], 3)  # its old code is left out
        assert reader.indexes.vectors.last_search == "cells"
        assert problems(reader) == []


def test_cells_no_reader_can_use_fall_back_to_the_ram_copy(
    cells: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(7)
    vectors = clustered(rng, 1_100)
    put(cells, vectors)
    monkeypatch.setattr(cell_vectors, "BACKLOG_MAX", 2)
    with cells.engine.exclusive_connection() as conn:  # a backlog larger than a search takes
        for n in range(3):
            conn.execute(f"UPDATE episodic SET embedding = ? WHERE id = 'm{n:05d}'",
                         (vectors[n + 10].tobytes(),))  # fmt: skip
    assert set(nearest(cells, vectors[10], 2)) == {"m00000", "m00010"}
    assert cells.indexes.vectors.last_search == "ram"


def test_a_rolled_back_write_leaves_no_code_in_a_cell(cells: SQLiteStore) -> None:
    rng = np.random.default_rng(8)
    put(cells, clustered(rng, 1_100))
    fresh = clustered(rng, 1)[0]
    with pytest.raises(RuntimeError), cells.transaction():
        cells.memories.put_memory(Memory.create("x", Tier.EPISODIC, id="gone", embedding=fresh))
        assert nearest(cells, fresh, 1) == ["gone"]  # seen inside its transaction
        raise RuntimeError("roll back")
    assert "gone" not in nearest(cells, fresh, 5)
    with cells.engine.snapshot() as conn:
        assert "gone" not in {i for i, _ in rows(conn, cell_sql.MEMBERS)}
    assert problems(cells) == []


def test_the_check_reports_a_wrong_code_and_a_missing_member(cells: SQLiteStore) -> None:
    rng = np.random.default_rng(10)
    put(cells, clustered(rng, 1_100))
    with cells.engine.exclusive_connection() as conn:
        cell, size, width, ids, codes = rows(conn, cell_sql.packs_of([0]))[0]
        broken = bytes([codes[0]]) + bytes(255 - b for b in codes[1:width]) + codes[width:]
        run(conn, cell_sql.put_pack(cell, size, width, ids, broken))
        conn.execute("DELETE FROM vector_cell_members WHERE id = 'm00500'")
    with cells.engine.fresh_read_connection() as conn:
        found = integrity.check(conn, ["vector_cells_match"])
    assert {p.check for p in found} == {"vector_cells_match"}
    details = " | ".join(p.detail for p in found)
    assert "is not its vector's" in details and "m00500" in details


def test_without_sqlite_vec_one_warning_and_numpy_re_ranks_alike(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(11)
    vectors = clustered(rng, 1_100)
    queries = clustered(rng, 5)
    with SQLiteStore(db_path, vector_index="cells") as store:
        put(store, vectors)
        in_sql = [store.indexes.vector_search(q, 10) for q in queries]
    monkeypatch.setitem(sys.modules, "sqlite_vec", None)  # ``import sqlite_vec`` fails
    monkeypatch.setattr(vec_extension, "_warned", False)
    with (
        caplog.at_level(logging.WARNING, "tiered_memory"),
        SQLiteStore(db_path, vector_index="cells") as store,
    ):
        in_numpy = [store.indexes.vector_search(q, 10) for q in queries]
        assert store.indexes.vectors.last_search == "cells"
    warnings = [r for r in caplog.records if "sqlite-vec could not be loaded" in r.message]
    assert len(warnings) == 1
    for ours, theirs in zip(in_numpy, in_sql, strict=True):
        assert [m for m, _ in ours] == [m for m, _ in theirs]
        assert [d for _, d in ours] == pytest.approx([d for _, d in theirs], abs=1e-5)


def test_a_bulk_write_drops_the_cells_and_its_commit_trains_them_again(
    cells: SQLiteStore,
) -> None:
    rng = np.random.default_rng(12)
    put(cells, clustered(rng, 1_100))
    before = state(cells)
    more = clustered(rng, 300)
    with cells.transaction() as conn, bulk_index.triggers_suspended(conn):
        for i, vector in enumerate(more):  # as an import of a large file writes its rows
            memory = Memory.create(f"bulk {i}", Tier.SEMANTIC, id=f"b{i}", embedding=vector)
            memory_steps.write(conn, memory, memory_sql.encode_row(memory, vector.tobytes()))
    after = state(cells)
    assert after.generation != before.generation and after.members == 1_400
    assert nearest(cells, more[5], 1) == ["b5"]
    assert nearest(cells, more[6], 1, tier=Tier.SEMANTIC) == ["b6"]
    assert cells.indexes.vectors.last_search == "cells"
    assert problems(cells) == []


def test_a_manager_with_cells_remembers_recalls_maintains_and_checks(
    db_path: Path, small_cells: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cell_sync, "FIRST_TRAIN_MAX", 100)  # maintain() trains these
    rng = np.random.default_rng(13)
    vectors = clustered(rng, 400)
    with AgentMemoryManager.open(
        db_path, embedder=None, vector_index="cells", recall_review_quality=None
    ) as memory:
        stored = [memory.remember(f"fact {i}", embedding=v.tolist()) for i, v in enumerate(vectors)]
        memory.maintain()
        store = memory.store
        assert isinstance(store, SQLiteStore) and state(store).trained_on == 400
        found = store.indexes.vector_search(vectors[17], 1)
        assert found[0][0] == stored[17].id and store.indexes.vectors.last_search == "cells"
        result = memory.check_integrity()
        assert result.ok and "vector_cells_match" in result.checks


def test_current_only_searches_leave_superseded_memories_out(
    cells: SQLiteStore, small_cells: None
) -> None:
    rng = np.random.default_rng(14)
    vectors = clustered(rng, 600)
    ids = put(cells, vectors)
    superseded = ids[:300]  # half the file: the search must go deeper than one round
    with cells.transaction():
        for memory_id in superseded:
            memory = cells.memories.get_memory(memory_id)
            assert memory is not None
            assert cells.memories.mark_superseded(memory, ids[-1], 5, "newer")
    current = MemoryFilter(current=True)
    for n in (3, 150, 450):
        found = nearest(cells, vectors[n], 10, where=current)
        assert len(found) == 10 and not set(found) & set(superseded)
        assert (found[0] == ids[n]) is (n >= 300)
    assert cells.indexes.vectors.last_search == "cells"
    assert nearest(cells, vectors[3], 1) == [ids[3]]  # without the filter: still there


def test_a_search_of_a_tier_alone_finds_k_of_it(db_path: Path, small_cells: None) -> None:
    rng = np.random.default_rng(5)
    vectors = clustered(rng, 2_000)
    with SQLiteStore(str(db_path), vector_index="cells") as store:
        ids = put(store, vectors)
        for memory_id in ids[:30]:  # 30 semantic memories among 2,000
            store.promote_memory(memory_id, Tier.EPISODIC, Tier.SEMANTIC, reason="t")
        assert state(store).cells > 8  # the probed cells are a share of them
        missed = 0
        for query in clustered(rng, 20):
            found = nearest(store, query, 10, tier=Tier.SEMANTIC)
            assert store.indexes.vectors.last_search == "cells"
            assert len(found) == 10
            missed += len(set(exact(ids[:30], vectors[:30], query, 10)) - set(found))
        assert missed == 0  # 118 of 200 missed when a tier alone did not deepen


def test_a_zero_vector_is_at_distance_one_in_sql_as_in_numpy(
    cells: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(8)
    vectors = unit(rng, 1_500)
    vectors[5] = 0.0
    ids = put(cells, vectors)
    answers = []
    for in_sql in (True, False):  # sqlite-vec's vec_distance_cosine, then numpy
        if not in_sql:
            monkeypatch.setattr(vec_extension, "loaded", lambda conn: False)
        found = dict(cells.indexes.vector_search(vectors[6], 1_500))
        assert cells.indexes.vectors.last_search == "cells"
        assert found[ids[5]] == pytest.approx(1.0)
        answers.append(found)
        zero_query = cells.indexes.vector_search(np.zeros(DIM, dtype=np.float32), 5)
        assert [d for _, d in zero_query] == pytest.approx([1.0] * 5)
    assert answers[0].keys() == answers[1].keys()


def test_a_model_swap_by_a_ram_handle_drops_the_cells(db_path: Path, small_cells: None) -> None:
    rng = np.random.default_rng(10)
    old, new = clustered(rng, 600), clustered(rng, 600)
    with SQLiteStore(str(db_path), vector_index="cells") as cells:
        ids = put(cells, old)
        assert state(cells).members == 600
    with SQLiteStore(str(db_path), vector_index="ram") as ram:  # the RAM copy's handle
        ram.indexes.begin_rebuild("model-2", DIM)
        ram.indexes.stage_rebuild([(i, f"text {n}", new[n]) for n, i in enumerate(ids)])
        ram.indexes.finish_rebuild(lambda texts: np.zeros((len(texts), DIM)))
        with ram.engine.snapshot() as conn:
            assert cell_sync.read_state(conn) is None  # the old model's cells are gone
    with SQLiteStore(str(db_path), vector_index="cells") as cells:
        maintain(cells)
        assert state(cells).members == 600
        assert problems(cells) == []
        assert nearest(cells, new[7], 1) == [ids[7]]


def test_maintain_by_a_ram_handle_keeps_a_files_cells(db_path: Path, small_cells: None) -> None:
    rng = np.random.default_rng(11)
    with SQLiteStore(str(db_path), vector_index="cells") as cells:
        ids = put(cells, clustered(rng, 600))
    with SQLiteStore(str(db_path)) as ram:  # forgets: the cells fall behind this handle
        for memory_id in ids[:50]:
            ram.memories.forget_memory(memory_id, reason="t")
        maintain(ram)  # `tiered-memory maintain` on a cells file
    with SQLiteStore(str(db_path), vector_index="cells") as cells:
        with cells.engine.snapshot() as conn:
            head = vector_reads.change_head(conn)
        assert head == (state(cells).seq, state(cells).seq_id)
        assert state(cells).members == 550
        assert problems(cells) == []


def test_a_damaged_pack_is_reported_searched_around_and_trained_again(
    db_path: Path, small_cells: None, caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(13)
    vectors = clustered(rng, 600)
    with SQLiteStore(str(db_path), vector_index="cells") as cells:
        ids = put(cells, vectors)
        expected = nearest(cells, vectors[0], 10)
        with cells.transaction() as conn:
            (cell,) = rows(conn, cell_sql.members_of([ids[0]]))[0][1:]
            run(conn, Statement(
                "UPDATE vector_cell_packs SET codes = substr(codes, 1, length(codes) - 7) "
                "WHERE cell = ?", (cell,)))  # fmt: skip
        assert any("pack holds" in p for p in problems(cells))
        with caplog.at_level(logging.WARNING, logger="tiered_memory"):
            assert nearest(cells, vectors[0], 10) == expected  # by the RAM copy
        assert cells.indexes.vectors.last_search == "ram"
        assert "damaged" in caplog.text
        # a write that reaches the damaged pack drops the cells and trains them again
        cells.memories.forget_memory(ids[0], reason="t")
        assert problems(cells) == []
        assert nearest(cells, vectors[0], 9) == expected[1:]
        assert cells.indexes.vectors.last_search == "cells"


def test_maintain_trains_again_over_a_damaged_pack_no_write_reached(
    db_path: Path, small_cells: None
) -> None:
    rng = np.random.default_rng(14)
    vectors = clustered(rng, 600)
    with SQLiteStore(str(db_path), vector_index="cells") as cells:
        ids = put(cells, vectors)
        generation = state(cells).generation
        with cells.transaction() as conn:
            run(conn, Statement(
                "UPDATE vector_cell_packs SET ids = substr(ids, 2) "
                "WHERE cell = (SELECT min(cell) FROM vector_cell_packs)"))  # fmt: skip
        assert problems(cells) != []
        maintain(cells)
        assert state(cells).generation != generation  # trained again
        assert problems(cells) == []
        assert nearest(cells, vectors[3], 1) == [ids[3]]

"""The in-RAM copy of the vector index: same answers as exact search, in step with the file."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import apsw
import numpy as np
import pytest

from benchmarks.raw_sql import load_sqlite_vec
from persistence import Memory, Tier
from persistence.sqlite import SQLiteStore, vector_mirror
from persistence.sqlite.vector_mirror import sign_bits
from tests.conftest import FakeClock
from tests.support.data_checks import open_raw

DIM = 32


def unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def put(store: SQLiteStore, vectors: np.ndarray, prefix: str = "m", tier: Tier = Tier.EPISODIC):
    with store.transaction():
        for i, vector in enumerate(vectors):
            store.memories.put_memory(
                Memory.create(f"text {i}", tier, id=f"{prefix}{i}", embedding=vector)
            )


@pytest.fixture(params=[32, 256], ids=["exact-floats", "codes"])
def dim(request: pytest.FixtureRequest) -> int:
    """Both layouts of the RAM copy: floats below EXACT_BELOW dimensions, codes above."""
    return int(request.param)


@pytest.fixture(params=["file", "memory"])
def store(request: pytest.FixtureRequest, db_path: Path, clock: FakeClock) -> Iterator[SQLiteStore]:
    """An open store searched by its RAM copy, once on a file and once in memory."""
    path = str(db_path) if request.param == "file" else ":memory:"
    with SQLiteStore(path, clock=clock, vector_index="ram") as opened:
        yield opened


@pytest.fixture
def file_store(db_path: Path, clock: FakeClock) -> Iterator[SQLiteStore]:
    """A store on a file searched by its RAM copy."""
    with SQLiteStore(db_path, clock=clock, vector_index="ram") as opened:
        yield opened


@pytest.fixture(params=["file", "memory"])
def resorting(
    request: pytest.FixtureRequest, db_path: Path, clock: FakeClock
) -> Iterator[Callable[[int], SQLiteStore]]:
    """Opens a store (on a file, then in memory) whose RAM copy re-sorts after that many
    new ids (``vector_resort_after``)."""
    opened: list[SQLiteStore] = []

    def open_store(resort_after: int) -> SQLiteStore:
        path = str(db_path) if request.param == "file" else ":memory:"
        store = SQLiteStore(
            path, clock=clock, vector_resort_after=resort_after, vector_index="ram"
        ).open()
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


def exact(ids: list[str], vectors: np.ndarray, query: np.ndarray, k: int) -> list[str]:
    return [ids[i] for i in np.argsort(-(vectors @ query), kind="stable")[:k]]


def nearest(
    store: SQLiteStore, query: np.ndarray, k: int = 5, tier: Tier | None = None
) -> list[str]:
    return [memory_id for memory_id, _ in store.indexes.vector_search(query, k, tier)]


@pytest.mark.parametrize("dim", [8, 64, 384])
def test_sign_bits_match_sqlite_vec_quantize_binary(dim: int) -> None:
    vectors = unit(np.random.default_rng(dim), 5, dim)
    conn = apsw.Connection(":memory:")
    load_sqlite_vec(conn)
    ours = sign_bits(vectors, (dim + 63) // 64).T.copy().view(np.uint8)[:, : dim // 8]
    for row, vector in zip(ours, vectors, strict=True):
        (theirs,) = conn.execute("SELECT vec_quantize_binary(?)", (vector.tobytes(),)).fetchone()
        assert bytes(row) == theirs


def test_sign_bits_pad_dimensions_that_are_not_whole_words() -> None:
    vectors = np.array([[1, -1, 2], [-1, -1, -1]], dtype=np.float32)
    bits = sign_bits(vectors, 1)
    assert bits.shape == (1, 2)
    assert bits[0].tolist() == [0b101, 0]


@pytest.mark.slow
def test_search_is_exact_on_the_candidates_and_close_to_exhaustive(
    store: SQLiteStore, dim: int
) -> None:
    rng = np.random.default_rng(1)
    centres = unit(rng, 12, dim)  # clustered, as real embeddings are
    vectors = centres[rng.integers(12, size=600)] + 0.6 * unit(rng, 600, dim)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    put(store, vectors)
    ids = [f"m{i}" for i in range(600)]
    overlap = []
    queries = vectors[:20] + 0.3 * unit(rng, 20, dim)
    for query in queries / np.linalg.norm(queries, axis=1, keepdims=True):
        found = store.indexes.vector_search(query, 10)
        distances = [d for _, d in found]
        assert distances == sorted(distances)
        for memory_id, distance in found:
            assert distance == pytest.approx(
                1 - float(vectors[ids.index(memory_id)] @ query), abs=1e-5
            )
        overlap.append(len({m for m, _ in found} & set(exact(ids, vectors, query, 10))) / 10)
    assert np.mean(overlap) >= 0.95


def test_the_copy_follows_writes_forgets_promotions_and_updates(
    store: SQLiteStore, dim: int
) -> None:
    rng = np.random.default_rng(2)
    vectors = unit(rng, 50, dim)
    put(store, vectors)
    query = vectors[7]
    assert nearest(store, query, 1) == ["m7"]  # the copy is loaded now
    store.memories.forget_memory("m7", reason="test")
    assert "m7" not in nearest(store, query, 50)
    store.promote_memory("m8", Tier.EPISODIC, Tier.SEMANTIC, reason="test")
    assert nearest(store, vectors[8], 1, Tier.SEMANTIC) == ["m8"]
    assert "m8" not in nearest(store, vectors[8], 50, Tier.EPISODIC)
    store.memories.put_memory(
        Memory.create("changed", Tier.EPISODIC, id="m9", embedding=vectors[20])
    )
    assert set(nearest(store, vectors[20], 2)) == {"m9", "m20"}
    fresh = unit(rng, 1, dim)[0]
    put(store, fresh[None, :], prefix="new")
    assert nearest(store, fresh, 1) == ["new0"]


def test_a_rolled_back_write_seen_inside_its_transaction_is_gone_after(store: SQLiteStore) -> None:
    rng = np.random.default_rng(3)
    put(store, unit(rng, 20))
    lost = unit(rng, 1)[0]
    assert nearest(store, lost, 1) != ["lost0"]
    with pytest.raises(RuntimeError), store.transaction():
        put(store, lost[None, :], prefix="lost")
        assert nearest(store, lost, 1) == ["lost0"]
        raise RuntimeError("roll back")
    assert "lost0" not in nearest(store, lost, 21)


def test_a_write_sees_its_own_vectors_without_moving_the_shared_copy(
    file_store: SQLiteStore, dim: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(8)
    vectors = unit(rng, 40, dim)
    put(file_store, vectors[:30])
    assert nearest(file_store, vectors[0], 1) == ["m0"]  # the copy loads here, once
    loads: list[int] = []
    load = vector_mirror.VectorMirror._load
    monkeypatch.setattr(
        vector_mirror.VectorMirror, "_load", lambda self, *a: (loads.append(1), load(self, *a))
    )
    with pytest.raises(RuntimeError), file_store.transaction():
        put(file_store, vectors[30:31], prefix="new")
        file_store.memories.put_memory(
            Memory.create("moved", Tier.EPISODIC, id="m5", embedding=vectors[31])
        )
        file_store.memories.forget_memory("m7", reason="test")
        file_store.promote_memory("m10", Tier.EPISODIC, Tier.SEMANTIC)
        assert nearest(file_store, vectors[30], 1) == ["new0"]
        assert nearest(file_store, vectors[31], 1) == ["m5"]
        assert "m7" not in nearest(file_store, vectors[7], 40)
        assert nearest(file_store, vectors[10], 1, Tier.SEMANTIC) == ["m10"]
        assert "m10" not in nearest(file_store, vectors[10], 40, Tier.EPISODIC)
        with ThreadPoolExecutor(1) as other:  # another thread reads what is committed
            assert other.submit(nearest, file_store, vectors[7], 1).result() == ["m7"]
        assert nearest(file_store, vectors[30], 1) == ["new0"]
        raise RuntimeError("roll back")
    assert "new0" not in nearest(file_store, vectors[30], 40)
    assert nearest(file_store, vectors[7], 1) == ["m7"]
    assert nearest(file_store, vectors[5], 1) == ["m5"]
    assert nearest(file_store, vectors[10], 1, Tier.EPISODIC) == ["m10"]
    assert loads == []  # neither the other thread nor the rollback made the copy reload


def test_another_connections_commits_are_seen(db_path: Path) -> None:
    rng = np.random.default_rng(4)
    vectors = unit(rng, 30)
    with (
        SQLiteStore(db_path, vector_index="ram") as mine,
        SQLiteStore(db_path, vector_index="ram") as theirs,
    ):
        put(mine, vectors[:20])
        assert nearest(mine, vectors[25], 1) != ["t25"]
        with theirs.transaction():
            for i in range(20, 30):
                theirs.memories.put_memory(
                    Memory.create("x", Tier.EPISODIC, id=f"t{i}", embedding=vectors[i])
                )
            theirs.memories.forget_memory("m3", reason="test")
        assert nearest(mine, vectors[25], 1) == ["t25"]
        assert "m3" not in nearest(mine, vectors[3], 30)


def test_a_log_trimmed_past_the_copy_makes_it_reload(db_path: Path) -> None:
    rng = np.random.default_rng(5)
    vectors = unit(rng, 40)
    with SQLiteStore(db_path, vector_index="ram") as store:
        put(store, vectors[:20])
        assert nearest(store, vectors[0], 1) == ["m0"]
        put(store, vectors[20:], prefix="late")
        raw = open_raw(db_path)
        with raw:
            raw.execute("DELETE FROM vector_changes")  # as if trimmed long ago
            raw.execute("INSERT INTO vector_changes (memory_id) VALUES ('unrelated')")
        raw.close()
        assert nearest(store, vectors[30], 1) == ["late10"]


@pytest.mark.slow
def test_many_forgets_compact_the_copy_and_answers_stay_right(
    file_store: SQLiteStore, dim: int
) -> None:
    rng = np.random.default_rng(6)
    vectors = unit(rng, 3000, dim)
    put(file_store, vectors)
    assert nearest(file_store, vectors[0], 1) == ["m0"]
    with file_store.transaction():
        for i in range(0, 3000, 3):
            if i % 2 == 0 or i < 2400:
                file_store.memories.forget_memory(f"m{i}", reason="test")
    assert nearest(file_store, vectors[0], 1) != ["m0"]
    assert nearest(file_store, vectors[1], 1) == ["m1"]
    assert nearest(file_store, vectors[2999], 1) == ["m2999"]
    assert file_store.indexes.vectors.size == file_store.memories.count(Tier.EPISODIC)


def test_a_restore_replaces_the_copy(tmp_path: Path) -> None:
    from persistence.sqlite import BackupManager

    rng = np.random.default_rng(7)
    vectors = unit(rng, 20)
    with SQLiteStore(tmp_path / "a.db", vector_index="ram") as store:
        put(store, vectors[:10])
        snapshot = BackupManager(store).create_backup()
        put(store, vectors[10:], prefix="after")
        assert nearest(store, vectors[15], 1) == ["after5"]
        BackupManager(store).restore_backup(snapshot)
        assert "after5" not in nearest(store, vectors[15], 20)
        assert nearest(store, vectors[4], 1) == ["m4"]


def test_a_copy_loaded_from_an_empty_log_notices_when_the_log_was_trimmed(db_path: Path) -> None:
    rng = np.random.default_rng(8)
    vectors = unit(rng, 21)
    with SQLiteStore(db_path, vector_index="ram") as store:
        put(store, vectors[:20])
        raw = open_raw(db_path)
        with raw:
            raw.execute("DELETE FROM vector_changes")  # as in a file upgraded from version 3
        assert nearest(store, vectors[0], 1) == ["m0"]  # loaded with nothing logged
        put(store, vectors[20:], prefix="z")
        with raw:
            raw.execute("DELETE FROM vector_changes")  # trimmed past the new memory
            raw.execute("INSERT INTO vector_changes (memory_id) VALUES ('unrelated')")
        raw.close()
        assert nearest(store, vectors[20], 1) == ["z0"]


def test_odd_ids_round_trip_and_are_found_after_resorting(
    resorting: Callable[[int], SQLiteStore],
) -> None:
    """Ids are kept as bytes in a numpy array: trailing NULs, non-ASCII text and ids
    longer than any before must come back exactly, before and after the copy re-sorts."""
    store = resorting(4)
    rng = np.random.default_rng(6)
    ids = ["a", "z\x00", "z", "héllo wörld", "日本", "x" * 200, "b\x00\x00", "m1"]
    vectors = unit(rng, len(ids), 256)
    for memory_id, vector in zip(ids, vectors, strict=True):
        store.memories.put_memory(Memory.create("t", Tier.EPISODIC, id=memory_id, embedding=vector))
        assert nearest(store, vector, 1) == [memory_id]  # catch up one at a time
    for memory_id, vector in zip(ids, vectors, strict=True):
        assert nearest(store, vector, 1) == [memory_id]
    for memory_id in ids[::2]:
        store.memories.forget_memory(memory_id, reason="test")
    remaining = set(nearest(store, vectors[0], len(ids)))
    assert remaining == set(ids[1::2])


@pytest.mark.slow
def test_random_operations_keep_the_copy_equal_to_the_file(
    resorting: Callable[[int], SQLiteStore],
) -> None:
    """Writes, re-embeddings, forgets and promotions in random order, with searches in
    between (so the copy catches up, re-sorts and compacts): every search must see
    exactly the embedded memories of the file, in the right tier."""
    store = resorting(16)
    rng = np.random.default_rng(9)
    alive: dict[str, tuple[Tier, np.ndarray]] = {}
    for step in range(1_500):
        action = rng.random()
        if action < 0.5 or not alive:
            memory_id = f"id{int(rng.integers(400))}"
            vector = unit(rng, 1, 256)[0]
            tier = alive[memory_id][0] if memory_id in alive else Tier.SCRATCHPAD
            key = memory_id if tier is Tier.SCRATCHPAD else None
            store.memories.put_memory(
                Memory.create("t", tier, id=memory_id, key=key, embedding=vector)
            )
            alive[memory_id] = (tier, vector)
        elif action < 0.75:
            memory_id = str(rng.choice(sorted(alive)))
            store.memories.forget_memory(memory_id, reason="test")
            del alive[memory_id]
        else:
            memory_id = str(rng.choice(sorted(alive)))
            tier, vector = alive[memory_id]
            if tier is Tier.SEMANTIC:
                continue
            target = Tier.EPISODIC if tier is Tier.SCRATCHPAD else Tier.SEMANTIC
            store.promote_memory(memory_id, tier, target, reason="test")
            alive[memory_id] = (target, vector)
        if step % 37 == 0:
            for tier in Tier:
                expected = {m for m, (t, _) in alive.items() if t is tier}
                query = unit(rng, 1, 256)[0]
                assert set(nearest(store, query, 1_000, tier)) == expected
            assert store.indexes.vectors.size == len(alive)
    memory_id, (tier, vector) = next(iter(alive.items()))
    assert nearest(store, vector, 1, tier) == [memory_id]


@pytest.mark.slow
def test_a_loaded_copy_keeps_no_id_dict_and_has_room_for_the_writes_after_it(
    file_store: SQLiteStore,
) -> None:
    """The load sorts its slots instead of entering every id in a dict (at a million
    memories that dict held ~130 MB at the load's peak), and keeps room for an eighth
    more: the writes after it neither copy the arrays nor go unfound."""
    rng = np.random.default_rng(12)
    count = 4_000
    vectors = unit(rng, count, 256)
    put(file_store, vectors, prefix="memory-with-a-long-identifier-")
    file_store.indexes.vectors.reset()
    assert nearest(file_store, vectors[3_999], 1) == ["memory-with-a-long-identifier-3999"]
    copy = file_store.indexes.vectors
    assert copy.size == count and not copy._recent
    capacity = copy._tier.shape[0]
    assert capacity >= count + count // 8
    more = unit(rng, 400, 256)
    put(file_store, more, prefix="later-")
    assert nearest(file_store, more[7], 1) == ["later-7"]
    assert nearest(file_store, vectors[0], 1) == ["memory-with-a-long-identifier-0"]
    assert copy.size == count + 400 and copy._tier.shape[0] == capacity
    with file_store.transaction():
        for i in range(0, count, 2):
            file_store.memories.forget_memory(f"memory-with-a-long-identifier-{i}", reason="test")
    assert nearest(file_store, vectors[1], 1) == ["memory-with-a-long-identifier-1"]
    assert nearest(file_store, more[399], 1) == ["later-399"]
    assert copy.size == count // 2 + 400

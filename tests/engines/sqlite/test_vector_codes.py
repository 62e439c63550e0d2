"""The vector copy's codes kept in the file: a new process loads them (and what changed
since) instead of encoding every vector, and answers exactly as if it had."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from persistence import Memory, Tier
from persistence.sqlite import SQLiteStore, vector_mirror, vector_reads
from persistence.sqlite.backup import BackupManager
from persistence.sqlite.vector_codes import FIT_ROWS, TIER_BYTE, CodeFit, code_blobs, split_codes
from tests.support.data_checks import open_raw

DIM = 192
COUNT = FIT_ROWS + 700


def unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """How each RAM copy loaded: "codes" or "vectors" (encoding every float vector)."""
    seen: list[str] = []
    by_vectors = vector_mirror.VectorMirror._load_vectors
    by_codes = vector_mirror.VectorMirror._load_codes

    def load_vectors(self: vector_mirror.VectorMirror, *args: object) -> None:
        seen.append("vectors")
        by_vectors(self, *args)  # type: ignore[arg-type]

    def load_codes(self: vector_mirror.VectorMirror, *args: object) -> bool:
        used = by_codes(self, *args)  # type: ignore[arg-type]
        if used:
            seen.append("codes")
        return used

    monkeypatch.setattr(vector_mirror.VectorMirror, "_load_vectors", load_vectors)
    monkeypatch.setattr(vector_mirror.VectorMirror, "_load_codes", load_codes)
    yield seen


def build(path: Path, vectors: np.ndarray) -> None:
    with SQLiteStore(path, vector_index="ram") as store, store.transaction():
        for i, vector in enumerate(vectors):
            store.memories.put_memory(Memory.create(f"text {i}", Tier.EPISODIC, id=f"m{i:05d}",
                                           embedding=vector))  # fmt: skip


def answers(
    path: Path, queries: np.ndarray, tier: Tier | None = None
) -> list[list[tuple[str, float]]]:
    with SQLiteStore(path, vector_index="ram") as store:
        return [store.indexes.vector_search(q, 10, tier) for q in queries]


def codes_in(path: Path) -> dict[str, bytes]:
    with open_raw(path) as conn:
        return dict(conn.execute("SELECT id, code FROM vector_codes").fetchall())


def fit_position(path: Path) -> tuple[int, str | None] | None:
    with open_raw(path) as conn:
        return conn.execute("SELECT seq, seq_id FROM vector_fit").fetchone()


def maintain(path: Path) -> None:
    with SQLiteStore(path, vector_index="ram") as store:
        BackupManager(store).run_maintenance()


def test_codes_round_trip_through_their_stored_form() -> None:
    rng = np.random.default_rng(1)
    vectors = unit(rng, 50)
    fit = CodeFit.of(vectors)
    bits, low = fit.encode(vectors)
    tiers = [Tier.SEMANTIC if i % 3 else Tier.SCRATCHPAD for i in range(50)]
    blobs = code_blobs(tiers, bits, low)
    assert {len(b) for b in blobs} == {fit.code_bytes}
    tier_bytes, bits_back, low_back = split_codes(blobs, fit.words)
    assert tier_bytes.tolist() == [TIER_BYTE[t] for t in tiers]
    assert np.array_equal(bits_back, bits) and np.array_equal(low_back, low)
    again = CodeFit.from_row(fit.dim, fit.fitted, fit.sqrt_factor, fit.to_blob())
    assert again is not None and np.array_equal(again.encode(vectors)[1], low)
    assert CodeFit.from_row(fit.dim + 64, fit.fitted, 1.0, fit.to_blob()) is None


@pytest.mark.slow  # 2.8 s measured on a busy machine
def test_maintain_keeps_codes_a_new_process_loads_and_answers_alike(
    db_path: Path, loads: list[str]
) -> None:
    rng = np.random.default_rng(2)
    vectors = unit(rng, COUNT)
    build(db_path, vectors)
    queries = vectors[rng.choice(COUNT, 12, replace=False)] + 0.1 * unit(rng, 12)
    assert codes_in(db_path) == {}  # caller-given vectors in one big write: none yet
    encoded = answers(db_path, queries)
    assert loads == ["vectors"]
    maintain(db_path)
    assert len(codes_in(db_path)) == COUNT
    with open_raw(db_path) as conn:
        head = conn.execute("SELECT max(seq) FROM vector_changes").fetchone()[0]
    assert fit_position(db_path)[0] == head  # type: ignore[index]
    loads.clear()
    assert answers(db_path, queries) == encoded  # same fit, same codes, same answers
    assert loads == ["codes"]


@pytest.mark.slow  # 2.8 s measured on a busy machine
def test_a_reader_takes_in_what_changed_after_the_codes(db_path: Path, loads: list[str]) -> None:
    rng = np.random.default_rng(3)
    vectors = unit(rng, COUNT)
    build(db_path, vectors)
    maintain(db_path)
    fresh = unit(rng, 3)
    with SQLiteStore(db_path, vector_index="ram") as store:  # another writer, codes written
        for i, vector in enumerate(fresh):
            store.memories.put_memory(
                Memory.create("new", Tier.EPISODIC, id=f"new{i}", embedding=vector)
            )
        store.memories.forget_memory("m00007", reason="test")
        store.promote_memory("m00010", Tier.EPISODIC, Tier.SEMANTIC)
        store.memories.put_memory(
            Memory.create("moved", Tier.EPISODIC, id="m00020", embedding=fresh[0] * -1)
        )
    stored = codes_in(db_path)
    assert "m00007" not in stored  # a forgotten memory's code leaves with it
    assert "m00010" not in stored and "m00020" not in stored  # changed: stale codes dropped
    loads.clear()
    with SQLiteStore(db_path, vector_index="ram") as reader:
        for i, vector in enumerate(fresh):
            assert reader.indexes.vector_search(vector, 1)[0][0] == f"new{i}"
        assert "m00007" not in [m for m, _ in reader.indexes.vector_search(vectors[7], 20)]
        assert reader.indexes.vector_search(vectors[10], 1, Tier.SEMANTIC)[0][0] == "m00010"
        assert "m00010" not in [
            m for m, _ in reader.indexes.vector_search(vectors[10], 20, Tier.EPISODIC)
        ]
        assert reader.indexes.vector_search(-fresh[0], 1)[0][0] == "m00020"
    assert loads == ["codes"]
    assert len(codes_in(db_path)) == len(stored)  # reading wrote nothing


@pytest.mark.slow  # 1.9 s measured on a busy machine
def test_the_embedding_queue_keeps_the_codes_in_step(db_path: Path, loads: list[str]) -> None:
    rng = np.random.default_rng(4)
    vectors = unit(rng, COUNT)
    with SQLiteStore(db_path, vector_index="ram") as store:
        with store.transaction():
            for i in range(COUNT):
                store.memories.put_memory(Memory.create(f"text {i}", Tier.EPISODIC, id=f"m{i:05d}"))
        for start in range(0, COUNT, 512):  # as the embedding queue stores its batches
            rows = [(Tier.EPISODIC, f"m{i:05d}", vectors[i])
                    for i in range(start, min(start + 512, COUNT))]  # fmt: skip
            store.indexes.set_embeddings(rows)
            if start + 512 < FIT_ROWS:
                assert codes_in(db_path) == {}  # too few vectors to fit on yet
        with store.engine.reading() as conn:
            head = vector_reads.change_head(conn)
    assert len(codes_in(db_path)) == COUNT
    assert fit_position(db_path) == head
    loads.clear()
    with SQLiteStore(db_path, vector_index="ram") as reader:
        assert reader.indexes.vector_search(vectors[5], 1)[0][0] == "m00005"
    assert loads == ["codes"]


@pytest.mark.slow  # 2.9 s measured on a busy machine
def test_codes_behind_a_trimmed_or_foreign_log_are_not_used(
    db_path: Path, loads: list[str]
) -> None:
    rng = np.random.default_rng(5)
    vectors = unit(rng, COUNT)
    build(db_path, vectors)
    maintain(db_path)
    with open_raw(db_path) as conn:  # as if the log went on past where the codes stand
        conn.execute("UPDATE vector_fit SET seq = 1, seq_id = 'someone else'")  # autocommit
    loads.clear()
    with SQLiteStore(db_path, vector_index="ram") as reader:
        assert reader.indexes.vector_search(vectors[9], 1)[0][0] == "m00009"
    assert loads == ["vectors"]
    maintain(db_path)  # makes them again
    with open_raw(db_path) as conn:
        head = conn.execute("SELECT max(seq) FROM vector_changes").fetchone()[0]
    assert fit_position(db_path)[0] == head  # type: ignore[index]
    loads.clear()
    assert answers(db_path, vectors[9:10])[0][0][0] == "m00009"
    assert loads == ["codes"]

"""The vector codes kept in packs (migration v017): a new process maps them in a few rows,
a forgotten or changed memory's pack goes with it, ``maintain()`` packs again."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from persistence import Memory, Tier
from persistence.sqlite import SQLiteStore, code_sync
from persistence.sqlite.sql import vector_codes_sql
from tests.engines.sqlite.test_vector_codes import COUNT, answers, build, maintain, unit
from tests.support.data_checks import open_raw


@pytest.fixture
def row_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Which code-row reads a loading copy made: "all" (every row) or "between" (the
    rows of packs that are gone)."""
    seen: list[str] = []
    every, between = vector_codes_sql.keyed_rows, vector_codes_sql.keyed_rows_between

    def all_rows(*args: object) -> object:
        seen.append("all")
        return every(*args)  # type: ignore[arg-type]

    def rows_between(*args: object) -> object:
        seen.append("between")
        return between(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(vector_codes_sql, "keyed_rows", all_rows)
    monkeypatch.setattr(vector_codes_sql, "keyed_rows_between", rows_between)
    yield seen


def packs_in(path: Path) -> list[tuple[int, int, str, str]]:
    with open_raw(path) as conn:
        sql = "SELECT chunk, chunks, first_id, last_id FROM vector_code_packs ORDER BY chunk"
        return conn.execute(sql).fetchall()


def code_of(path: Path, memory_id: str) -> bytes:
    with open_raw(path) as conn:
        row = conn.execute("SELECT code FROM vector_codes WHERE id = ?", (memory_id,)).fetchone()
    return bytes(row[0])


def without_packs(path: Path, copy: Path) -> Path:
    """A copy of ``path`` whose readers load the code rows (as before packs)."""
    shutil.copyfile(path, copy)
    with open_raw(copy) as conn:
        conn.execute("DELETE FROM vector_code_packs")
    return copy


@pytest.fixture
def packed(db_path: Path) -> tuple[Path, np.ndarray]:
    rng = np.random.default_rng(21)
    vectors = unit(rng, COUNT)
    build(db_path, vectors)
    maintain(db_path)
    return db_path, vectors


@pytest.mark.slow  # 3.6 s measured on a busy machine
def test_maintain_packs_every_code_in_id_order(packed: tuple[Path, np.ndarray]) -> None:
    path, _ = packed
    packs = packs_in(path)
    chunks = -(-COUNT // code_sync.PACK_ROWS)
    assert [p[0] for p in packs] == list(range(chunks)) and {p[1] for p in packs} == {chunks}
    assert packs[0][2] == "m00000" and packs[-1][3] == f"m{COUNT - 1:05d}"
    assert all(packs[i][3] < packs[i + 1][2] for i in range(chunks - 1))
    with open_raw(path) as conn:
        stored = conn.execute("SELECT ids, codes, width FROM vector_code_packs WHERE chunk = 1")
        ids, codes, width = stored.fetchone()
    keys = np.frombuffer(ids, dtype=f"S{width}")
    first = bytes(keys[0])[:-1].decode()
    assert first == f"m{code_sync.PACK_ROWS:05d}" and codes[: len(code_of(path, first))] == (
        code_of(path, first)
    )
    with SQLiteStore(path, vector_index="ram") as store, store.transaction() as conn:
        assert code_sync.repack(conn) == 0  # complete and current: nothing written again


@pytest.mark.slow  # 3.4 s measured on a busy machine
def test_a_new_reader_maps_the_packs_and_answers_as_from_the_rows(
    packed: tuple[Path, np.ndarray], row_reads: list[str], tmp_path: Path
) -> None:
    path, vectors = packed
    rng = np.random.default_rng(22)
    queries = vectors[rng.choice(COUNT, 12, replace=False)] + 0.1 * unit(rng, 12)
    rows = without_packs(path, tmp_path / "rows.db")
    from_rows = answers(rows, queries) + answers(rows, queries, Tier.SEMANTIC)
    assert row_reads == ["all", "all"]
    row_reads.clear()
    assert answers(path, queries) + answers(path, queries, Tier.SEMANTIC) == from_rows
    assert row_reads == []  # every code came from the packs


@pytest.mark.slow  # 3.5 s measured on a busy machine
def test_a_forgotten_memory_takes_its_pack_and_leaves_no_code_in_the_file(
    packed: tuple[Path, np.ndarray], row_reads: list[str]
) -> None:
    path, vectors = packed
    code = code_of(path, "m01030")  # in chunk 1
    assert code in path.read_bytes()
    with SQLiteStore(path, vector_index="ram") as store:
        store.memories.forget_memory("m01030", reason="test")
    assert [p[0] for p in packs_in(path)] == [0, *range(2, -(-COUNT // code_sync.PACK_ROWS))]
    for name in ("", "-wal"):
        file = Path(f"{path}{name}")
        assert not file.exists() or code not in file.read_bytes()
    row_reads.clear()
    with SQLiteStore(path, vector_index="ram") as reader:
        assert "m01030" not in [m for m, _ in reader.indexes.vector_search(vectors[1030], 20)]
        for i in (1024, 1031, 2047, 0, COUNT - 1):  # the gone pack's others, and the rest
            assert reader.indexes.vector_search(vectors[i], 1)[0][0] == f"m{i:05d}"
    assert row_reads == ["between"]
    maintain(path)  # packs again
    assert len(packs_in(path)) == -(-(COUNT - 1) // code_sync.PACK_ROWS)


@pytest.mark.slow  # 3.1 s measured on a busy machine
def test_changes_after_the_packs_are_taken_in(
    packed: tuple[Path, np.ndarray], row_reads: list[str], tmp_path: Path
) -> None:
    path, vectors = packed
    rng = np.random.default_rng(23)
    fresh = unit(rng, 3)
    with SQLiteStore(path, vector_index="ram") as store:
        store.memories.put_memory(
            Memory.create("new", Tier.EPISODIC, id="m00010x", embedding=fresh[0])
        )
        store.memories.put_memory(
            Memory.create("new", Tier.EPISODIC, id="zz-last", embedding=fresh[1])
        )
        store.promote_memory("m02100", Tier.EPISODIC, Tier.SEMANTIC)
        store.memories.put_memory(
            Memory.create("moved", Tier.EPISODIC, id="m03000", embedding=fresh[2])
        )
    kept = packs_in(path)
    assert 2 not in [p[0] for p in kept]  # a promotion deletes the episodic row: pack 2 goes
    row_reads.clear()
    with SQLiteStore(path, vector_index="ram") as reader:
        assert reader.indexes.vector_search(fresh[0], 1)[0][0] == "m00010x"
        assert reader.indexes.vector_search(fresh[1], 1)[0][0] == "zz-last"
        assert reader.indexes.vector_search(vectors[2100], 1, Tier.SEMANTIC)[0][0] == "m02100"
        assert reader.indexes.vector_search(fresh[2], 1)[0][0] == "m03000"
        assert "m03000" not in [m for m, _ in reader.indexes.vector_search(vectors[3000], 20)]
    assert "all" not in row_reads
    assert packs_in(path) == kept  # reading wrote nothing


def test_packs_behind_a_foreign_log_are_not_used(
    packed: tuple[Path, np.ndarray], row_reads: list[str]
) -> None:
    path, vectors = packed
    with open_raw(path) as conn:
        conn.execute("UPDATE vector_code_packs SET seq_id = 'someone else'")
    row_reads.clear()
    with SQLiteStore(path, vector_index="ram") as reader:
        assert reader.indexes.vector_search(vectors[9], 1)[0][0] == "m00009"
    assert row_reads == ["all"]
    maintain(path)  # makes them again
    with open_raw(path) as conn:
        assert {r[0] for r in conn.execute("SELECT seq_id FROM vector_code_packs")} != {
            "someone else"
        }
    row_reads.clear()
    with SQLiteStore(path, vector_index="ram") as reader:
        assert reader.indexes.vector_search(vectors[9], 1)[0][0] == "m00009"
    assert row_reads == []

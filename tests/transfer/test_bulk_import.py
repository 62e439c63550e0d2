"""Large imports write rows with the index triggers off and rebuild the indexes once:
the result must be the file that row-by-row writes would have made."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from persistence import Memory, Tier
from persistence.errors import StorageError
from persistence.records import SessionState
from persistence.sqlite import BackupManager, SQLiteStore, bulk_index
from persistence.sqlite import json_io as json_import
from tests.support.data_checks import data_checksum, open_raw

COUNT = json_import.BULK_AT + 200
DIM = 64


def build(path: Path, count: int = COUNT, prefix: str = "m") -> np.ndarray:
    """Memories in three tiers, two sessions and none, with embeddings."""
    rng = np.random.default_rng(len(prefix))
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    with SQLiteStore(path) as store, store.transaction():
        for name in ("s1", "s2"):
            store.put_session(SessionState(f"{prefix}{name}", started_at=1, last_active_at=1))
        for i in range(count):
            tier = (Tier.EPISODIC, Tier.SEMANTIC, Tier.SCRATCHPAD)[i % 3]
            session = (f"{prefix}s1", f"{prefix}s2", None)[i % 5 % 3]
            memory = Memory.create(
                f"{prefix}word{i} shared{i % 7}", tier, id=f"{prefix}{i}", session_id=session,
                key=f"{prefix}k{i}" if tier is Tier.SCRATCHPAD else None, embedding=vectors[i],
            )  # fmt: skip
            store.memories.put_memory(memory)
    return vectors


def triggers(store: SQLiteStore) -> list[tuple[str, str]]:
    with store.engine.reading() as conn:
        return conn.execute(
            "SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' ORDER BY name"
        ).fetchall()


def keyword_hits(store: SQLiteStore, words: list[str]) -> dict[str, set[str]]:
    return {w: {m for m, _ in store.indexes.keyword_search([w], 10_000, None)} for w in words}


def vector_hits(store: SQLiteStore, queries: np.ndarray) -> list[list[str]]:
    return [[m for m, _ in store.indexes.vector_search(q, 10)] for q in queries]


@pytest.mark.slow  # 1.6 s measured on a busy machine
@pytest.mark.parametrize("mode", ["merge", "replace"])
def test_a_bulk_import_builds_the_same_indexes_as_row_by_row_writes(
    tmp_path: Path, mode: str
) -> None:
    original = tmp_path / "original.db"
    vectors = build(original)
    with SQLiteStore(original) as store:
        exported = BackupManager(store).export_json(tmp_path / "all.json")
        words = [f"mword{i}" for i in range(0, COUNT, 97)] + [f"shared{i}" for i in range(7)]
        queries = vectors[::150] + 0.1
        expected_keywords = keyword_hits(store, words)
        expected_vectors = vector_hits(store, queries)
        expected_triggers = triggers(store)
    target = tmp_path / "target.db"
    if mode == "replace":
        build(target, 50, prefix="old")  # replaced: none of it may stay in any index
    with SQLiteStore(target) as store:
        result = BackupManager(store).import_json(exported, mode)  # type: ignore[arg-type]
        assert sum(t.inserted for t in result.tables.values()) >= COUNT
        assert keyword_hits(store, words) == expected_keywords
        assert keyword_hits(store, ["oldword1"]) == {"oldword1": set()}
        assert vector_hits(store, queries) == expected_vectors
        assert triggers(store) == expected_triggers
        assert BackupManager(store).check_integrity().ok
        # The triggers work again: a new write is indexed at once.
        store.memories.put_memory(Memory.create("brandnew", Tier.EPISODIC, id="new",
                                                session_id="ms1",
                                                embedding=vectors[0] * -1))  # fmt: skip
        with store.engine.reading() as conn:
            before = conn.execute(
                "SELECT id FROM episodic WHERE session_id = 'ms1' AND id != 'new' "
                "ORDER BY rowid DESC LIMIT 2"
            ).fetchall()
        assert len(before) == 2
        # Its own row, and the two memories before it in its session (their `after`).
        assert keyword_hits(store, ["brandnew"]) == {"brandnew": {"new"} | {r[0] for r in before}}
        assert vector_hits(store, (vectors[0] * -1)[None, :])[0][0] == "new"


@pytest.mark.slow  # 1.2 s measured on a busy machine
def test_another_processes_vector_copy_sees_a_bulk_import(tmp_path: Path) -> None:
    source = tmp_path / "source.db"
    vectors = build(source)
    with SQLiteStore(source) as store:
        exported = BackupManager(store).export_json(tmp_path / "all.json")
    target = tmp_path / "target.db"
    build(target, 20, prefix="old")
    with SQLiteStore(target) as reader, SQLiteStore(target) as writer:
        assert reader.indexes.vector_search(vectors[5], 1)[0][0].startswith("old")  # copy loaded
        BackupManager(writer).import_json(exported, "replace")
        assert reader.indexes.vector_search(vectors[5], 1)[0][0] == "m5"
        assert not any(
            m.startswith("old") for m, _ in reader.indexes.vector_search(vectors[5], 100)
        )


def test_a_failed_bulk_import_leaves_the_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "source.db"
    build(source)
    with SQLiteStore(source) as store:
        exported = BackupManager(store).export_json(tmp_path / "all.json")
    target = tmp_path / "target.db"
    build(target, 30, prefix="old")
    before = data_checksum(target)
    with SQLiteStore(target) as store:
        found_before = keyword_hits(store, ["oldword3", "shared2"])

    def broken(conn: object) -> None:
        raise OSError("disk full while rebuilding the keyword index")

    monkeypatch.setattr(bulk_index.keyword_upkeep, "fill_keyword_index", broken)
    with SQLiteStore(target) as store:
        with pytest.raises(StorageError, match="disk full"):  # no raw OSError escapes
            BackupManager(store).import_json(exported, "replace")
        assert keyword_hits(store, ["oldword3", "shared2"]) == found_before
    assert data_checksum(target) == before
    with open_raw(target) as conn:
        (count,) = conn.execute(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'trigger'"
        ).fetchone()
    # 11 per tier table (schema 16 dropped the 4 of the sqlite-vec table), the log's trim
    # trigger, 3 keeping entity names indexed, 2 counting
    # namespace tags
    assert count == 39

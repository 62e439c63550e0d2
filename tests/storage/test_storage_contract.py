"""The storage contract in domain terms, as a second backend must honour it: keyword
search takes words (the FTS5 expression is SQLite's own business), statistics are a size
plus the backend's details, the file operations are a Protocol, and the store says where
its data lives."""

from __future__ import annotations

import dataclasses
import pickle
import re
from pathlib import Path

import orjson
import pytest

from persistence import (
    InvalidTypeError,
    Memory,
    MemoryFilter,
    PersistenceStatistics,
    StoreFiles,
    Tier,
    build_backend,
)
from persistence.sqlite import BackupManager, SQLiteStore
from persistence.sqlite.sql import index_sql
from tiered_memory.recall.settings import keywords

# --- keyword_search takes words --------------------------------------------------------


def _fill(store: SQLiteStore) -> None:
    for n, text in enumerate(
        ("The user prefers dark mode", "Dark chocolate is a favourite", "Mode of transport: bike",
         "Lunch at noon", "dark dark dark mode mode")
    ):  # fmt: skip
        store.memories.put_memory(Memory.create(text, Tier.EPISODIC, id=f"m{n}", session_id=None))


def test_keyword_search_takes_words_and_builds_the_same_fts5_expression(
    store: SQLiteStore,
) -> None:
    _fill(store)
    words = keywords("Does the user like DARK mode?")
    assert words == ("user", "like", "dark", "mode")
    assert index_sql.fts5_match(words) == '"user" OR "like" OR "dark" OR "mode"'
    found = store.indexes.keyword_search(words, 10)
    with store.engine.reading() as conn:
        expected = conn.execute(
            "SELECT i.memory_id, bm25(memory_fts, 1.0, 0.5, 0.5) AS s FROM memory_fts "
            "JOIN memory_index AS i ON i.rowid = memory_fts.rowid WHERE memory_fts MATCH ? "
            "ORDER BY s, memory_fts.rowid LIMIT 10",
            ['"user" OR "like" OR "dark" OR "mode"'],
        ).fetchall()
    assert found == expected and len(found) == 4  # bit-identical to the plain expression
    assert all(score <= 0 for _, score in found)  # the score contract: <= 0, lower is better
    assert [s for _, s in found] == sorted(s for _, s in found)


def test_keyword_search_of_no_words_finds_nothing(store: SQLiteStore) -> None:
    _fill(store)
    assert store.indexes.keyword_search([], 10) == []
    assert (
        store.indexes.keyword_search((), 10, Tier.EPISODIC, where=MemoryFilter(agent_id="a")) == []
    )


def test_keyword_search_refuses_an_expression_string(store: SQLiteStore) -> None:
    _fill(store)
    with pytest.raises(InvalidTypeError, match="sequence of str"):
        store.indexes.keyword_search('"dark" OR "mode"', 10)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        store.indexes.keyword_search(["dark", 3], 10)  # type: ignore[list-item]


@pytest.mark.parametrize("word", ['say "hi', "OR", "NEAR(x", "a*", "title:x", "-y"])
def test_a_word_is_never_fts5_syntax(store: SQLiteStore, word: str) -> None:
    store.memories.put_memory(
        Memory.create(f"plain {word} text", Tier.EPISODIC, id="w", session_id=None)
    )
    assert isinstance(store.indexes.keyword_search([word], 5), list)  # no FTS5 syntax error


# --- statistics: a size plus the backend's details -------------------------------------


def test_statistics_are_a_size_and_the_backends_details(store: SQLiteStore) -> None:
    _fill(store)
    stats = store.get_statistics()
    details = stats.backend_details
    assert stats.backend == "sqlite" and stats.path == store.path
    assert set(details) == {"file_size_bytes", "wal_size_bytes", "page_size", "page_count"}
    assert stats.size_bytes == details["file_size_bytes"] + details["wal_size_bytes"]
    if not store.is_memory:
        assert stats.size_bytes > 0
    assert not hasattr(stats, "page_count") and not hasattr(stats, "file_size_bytes")


def test_backend_details_cannot_change_and_keep_the_record_hashable() -> None:
    made = dict(
        scratchpad_count=0, episodic_count=1, semantic_count=0, session_count=0,
        active_session_count=0, transcript_count=0, schedule_count=0, promotion_count=0,
        forgotten_count=0, unembedded_count=0, embedding_cache_count=0, schema_version=1,
        size_bytes=10, backend="sqlite", path="x.db",
    )  # fmt: skip
    details = {"file_size_bytes": 10, "wal_size_bytes": 0}
    stats = PersistenceStatistics(**made, backend_details=details)  # type: ignore[arg-type]
    details["wal_size_bytes"] = 99  # the record kept its own copy
    assert stats.backend_details == {"file_size_bytes": 10, "wal_size_bytes": 0}
    with pytest.raises(TypeError):
        stats.backend_details["page_size"] = 4096  # type: ignore[index]
    with pytest.raises(TypeError):
        stats.backend_details.clear()  # type: ignore[attr-defined]
    same = PersistenceStatistics(
        **made,  # type: ignore[arg-type]
        backend_details={"wal_size_bytes": 0, "file_size_bytes": 10},
    )
    assert same == stats and hash(same) == hash(stats)
    assert pickle.loads(pickle.dumps(stats)) == stats
    assert dataclasses.replace(stats, size_bytes=11).backend_details == stats.backend_details
    assert orjson.loads(orjson.dumps(stats))["backend_details"] == {
        "file_size_bytes": 10, "wal_size_bytes": 0
    }  # fmt: skip


# --- an operation a backend cannot do --------------------------------------------------


def test_unsupported_operation_error_is_a_library_error_exported_with_the_others() -> None:
    import persistence
    import tiered_memory
    from tiered_memory import errors

    assert errors.UnsupportedOperationError is persistence.UnsupportedOperationError
    assert issubclass(errors.UnsupportedOperationError, errors.TieredMemoryError)
    assert "UnsupportedOperationError" in errors.__all__ and len(tiered_memory.__all__) <= 40
    with pytest.raises(errors.TieredMemoryError, match="use"):
        raise errors.UnsupportedOperationError("no file key here: use the server's encryption")


# --- the operator's file operations are a Protocol -------------------------------------


def test_backup_manager_is_the_sqlite_store_files(store: SQLiteStore, tmp_path: Path) -> None:
    files = BackupManager(store, tmp_path)
    assert isinstance(files, StoreFiles)
    backend = build_backend(":memory:", backup_dir=tmp_path)
    assert isinstance(backend.backups, StoreFiles)
    members = {
        "encrypted", "create_backup", "restore_backup", "export_json", "import_json", "rekey",
        "check_integrity", "run_maintenance", "remove_leftovers", "export_source", "import_sink",
    }  # fmt: skip
    declared = {n for n in vars(StoreFiles) if not n.startswith("_")}
    assert declared == members  # what files.py, lifecycle.py and copying.py use, no more


def test_the_domain_uses_only_what_store_files_declares() -> None:
    root = Path(__file__).resolve().parents[2] / "tiered_memory"
    used = {
        name
        for module in ("files.py", "lifecycle.py")
        for name in re.findall(r"self\._backups\.(\w+)", (root / module).read_text())
    }
    assert used and used <= {n for n in vars(StoreFiles) if not n.startswith("_")}


# --- where the data lives, safe to print -----------------------------------------------


def test_the_store_and_the_manager_say_where_the_data_lives(db_path: Path) -> None:
    import asyncio

    from tiered_memory import AgentMemoryManager
    from tiered_memory.aio import AsyncAgentMemoryManager

    store = SQLiteStore(":memory:")
    assert store.location == store.path == ":memory:"
    with AgentMemoryManager.in_memory(embedder=None) as memory:
        assert memory.location == ":memory:" and memory.path is None
    with AgentMemoryManager.open(db_path, embedder=None) as memory:
        assert memory.location == str(db_path.absolute()) == memory.store.location
        assert memory.path == db_path.absolute()

    async def run() -> str:
        opened = await AsyncAgentMemoryManager.open(db_path, embedder=None)
        try:
            return opened.location
        finally:
            await opened.close()

    assert asyncio.run(run()) == str(db_path.absolute())

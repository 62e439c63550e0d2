"""Re-embedding a file with another model: build new vectors beside the old, then swap."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from persistence import EmbeddingModelMismatchError, Tier
from persistence.sqlite.sql.meta_sql import EMBEDDING_DIM_KEY, EMBEDDING_MODEL_KEY
from tests.support.data_checks import data_checksum, open_raw
from tests.support.processes import spawn_worker
from tests.support.worker import HashEmbedder, hash_vector
from tiered_memory import AgentMemoryManager


def model_a_file(path: Path, count: int = 30) -> dict[str, str]:
    """A file embedded by model A (16-d) in all three tiers; returns id -> content."""
    contents = {}
    with AgentMemoryManager.open(path, embedder=HashEmbedder("test-a", 16),
                                 embed_in_background=False) as memory:  # fmt: skip
        for i in range(count):
            tier = (Tier.EPISODIC, Tier.SEMANTIC, Tier.SCRATCHPAD)[i % 3]
            stored = memory.remember(f"memory number {i}", tier)
            contents[stored.id] = stored.content
        memory.flush()
    return contents


def embeddings(path: Path) -> dict[str, bytes | None]:
    conn = open_raw(path, readonly=True)
    try:
        return {
            memory_id: blob
            for table in ("scratchpad", "episodic", "semantic")
            for memory_id, blob in conn.execute(f"SELECT id, embedding FROM {table}")
        }
    finally:
        conn.close()


def test_another_model_is_refused_unless_asked_to_reembed(db_path: Path) -> None:
    model_a_file(db_path, 3)
    before = data_checksum(db_path)
    model_b = HashEmbedder("test-b", 8)
    with (
        AgentMemoryManager.open(db_path, embedder=model_b, embed_in_background=False) as memory,
        pytest.raises(EmbeddingModelMismatchError, match="reembed=True"),
    ):
        memory.flush()
    assert data_checksum(db_path) == before


def test_reembedding_swaps_every_memory_to_the_new_model_and_size(db_path: Path) -> None:
    contents = model_a_file(db_path)
    model_b = HashEmbedder("test-b", 8)
    with AgentMemoryManager.open(db_path, embedder=model_b, reembed=True,
                                 embed_in_background=False) as memory:  # fmt: skip
        memory.flush()
        assert memory.store.get_meta(EMBEDDING_MODEL_KEY) == "test-b"
        assert memory.store.get_meta(EMBEDDING_DIM_KEY) == "8"
        assert memory.store.indexes.rebuild_state() is None
        for memory_id, content in contents.items():
            got = memory.get(memory_id)
            assert got is not None and got.embedding is not None
            assert np.allclose(got.embedding, hash_vector("test-b", 8, content))
        target = next(iter(contents))
        nearest = memory.store.indexes.vector_search(hash_vector("test-b", 8, contents[target]), 1)
        assert nearest[0][0] == target
        assert memory.check_integrity().ok
        later = memory.remember("added after the swap")
        memory.flush()
        assert np.allclose(memory.get(later.id).embedding, hash_vector("test-b", 8, later.content))  # type: ignore[union-attr]


def test_memories_edited_after_staging_get_vectors_of_their_new_content(db_path: Path) -> None:
    contents = model_a_file(db_path, 6)
    model_b = HashEmbedder("test-b", 8)
    with AgentMemoryManager.open(db_path, embedder=None) as memory:
        store = memory.store
        store.indexes.begin_rebuild("test-b", 8)
        staged = store.indexes.unstaged_for_rebuild()
        store.indexes.stage_rebuild([(i, c, hash_vector("test-b", 8, c)) for i, c in staged])
        edited = next(i for i in contents if memory.get(i).tier is Tier.EPISODIC)  # type: ignore[union-attr]
        memory.update(edited, content="rewritten after staging")
        added = memory.remember("added after staging")
        assert store.indexes.finish_rebuild(model_b.embed) == 7  # 6 memories + 1 added
        assert sorted(model_b.seen) == ["added after staging", "rewritten after staging"]
        for memory_id in (edited, added.id):
            got = store.memories.get_memory(memory_id)  # the manager's cache was bypassed here
            assert np.allclose(got.embedding, hash_vector("test-b", 8, got.content))  # type: ignore[union-attr]


def test_a_failed_swap_leaves_the_file_as_it_was(db_path: Path) -> None:
    model_a_file(db_path, 6)
    with AgentMemoryManager.open(db_path, embedder=None) as memory:
        memory.store.indexes.begin_rebuild("test-b", 8)
        memory.remember("not staged yet")
    before = data_checksum(db_path)

    def broken(texts: list[str]) -> np.ndarray:
        raise RuntimeError("model crashed")

    with (
        AgentMemoryManager.open(db_path, embedder=None) as memory,
        pytest.raises(RuntimeError, match="model crashed"),
    ):
        memory.store.indexes.finish_rebuild(broken)
    assert data_checksum(db_path) == before


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.subprocess
def test_a_killed_reembedding_leaves_the_old_model_and_resumes(db_path: Path) -> None:
    contents = model_a_file(db_path, 400)
    old = embeddings(db_path)
    worker = spawn_worker("reembed", str(db_path), quiet=False)
    assert worker.lines == ["READY"]
    assert worker.readline().startswith("EMBEDDED")  # the rebuild is under way
    lines = worker.kill(after=0.08)
    assert "DONE" not in lines
    assert embeddings(db_path) == old  # every live vector is still model A's
    conn = open_raw(db_path, readonly=True)
    try:
        meta = dict(conn.execute("SELECT key, value FROM store_meta").fetchall())
        staged = conn.execute("SELECT count(*) FROM embedding_rebuild").fetchone()[0]
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    assert meta[EMBEDDING_MODEL_KEY] == "test-a" and meta["rebuild_model"] == "test-b"
    assert 0 < staged < 400

    model_b = HashEmbedder("test-b", 8)
    options = {"reembed": True, "embed_in_background": False, "embedding_cache_size": 0}
    with AgentMemoryManager.open(db_path, embedder=model_b, **options) as memory:
        memory.flush()
        assert len(model_b.seen) == 400 - staged  # staged work was kept
        for memory_id, content in contents.items():
            got = memory.get(memory_id)
            assert np.allclose(got.embedding, hash_vector("test-b", 8, content))  # type: ignore[union-attr]

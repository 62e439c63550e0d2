"""A memory's cosine distance to a query is the same whichever batch computed it: all
the memories asked at once, each alone, in another order, or the vector search's
re-rank. (A BLAS product rounds a row by its place in the matrix: before, a few rows in
a thousand came out a bit apart, so caching or regrouping look-ups changed recall's
scores in the last bit.)"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from persistence import Memory, Tier
from persistence.sqlite import SQLiteStore

DIM = 384
COUNT = 300


def test_distances_do_not_depend_on_the_batch(store: SQLiteStore) -> None:
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((COUNT, DIM)).astype(np.float32)
    ids = [f"m{i:03d}" for i in range(COUNT)]
    for memory_id, vector in zip(ids, vectors, strict=True):
        store.memories.put_memory(Memory.create("m", Tier.EPISODIC, id=memory_id, embedding=vector))
    indexes = store.indexes
    for query in rng.standard_normal((5, DIM)).astype(np.float32):
        together = indexes.vector_distances(query, ids)
        assert len(together) == COUNT
        alone = {m: indexes.vector_distances(query, [m])[m] for m in ids}
        assert alone == together  # exactly, not approximately
        shuffled = list(rng.permutation(ids))
        assert indexes.vector_distances(query, shuffled[: COUNT // 3]) == {
            m: together[m] for m in shuffled[: COUNT // 3]
        }
        for memory_id, distance in indexes.vector_search(query, 50):
            assert distance == together[memory_id]


def test_a_vector_another_handle_changes_is_read_again(tmp_path: Path) -> None:
    """The vectors are kept in RAM between calls until something commits: another
    handle's new vector is what the next search and distance see."""
    rng = np.random.default_rng(3)
    query, old, new = rng.standard_normal((3, DIM)).astype(np.float32)
    path = tmp_path / "agent.db"
    with SQLiteStore(path) as store, SQLiteStore(path) as other:
        store.memories.put_memory(Memory.create("m", Tier.EPISODIC, id="m", embedding=old))
        first = store.indexes.vector_distances(query, ["m"])["m"]
        assert dict(store.indexes.vector_search(query, 5))["m"] == first
        changed = replace(other.memories.get_memory("m"), embedding=new)  # type: ignore[type-var]
        other.memories.put_memory(changed)
        second = store.indexes.vector_distances(query, ["m"])["m"]
        assert second != first
        assert second == other.indexes.vector_distances(query, ["m"])["m"]
        assert dict(store.indexes.vector_search(query, 5))["m"] == second

"""The packing's near-duplicate rule (:func:`tiered_memory.context.packing.distinct`):
a candidate is dropped when it nearly repeats a better candidate that was kept, not one
that was itself dropped."""

from __future__ import annotations

import numpy as np

from persistence import Memory
from tiered_memory.context.packing import Candidate, distinct


def _candidate(rank: int, content: str, vector: list[float] | None) -> Candidate:
    embedding = None if vector is None else np.asarray(vector, dtype=np.float32)
    return Candidate(Memory.create(content, id=f"m{rank}", embedding=embedding), rank, "why")


def test_a_near_duplicate_of_a_dropped_candidate_is_kept() -> None:
    # b nearly repeats a (cosine 0.98); c nearly repeats b (0.98) but not a (0.92)
    a = _candidate(1, "alpha", [1.0, 0.0])
    b = _candidate(2, "beta", [np.cos(0.2), np.sin(0.2)])
    c = _candidate(3, "gamma", [np.cos(0.4), np.sin(0.4)])
    kept = distinct([a, b, c], threshold=0.95)
    assert [x.memory.id for x in kept] == ["m1", "m3"]
    # without a threshold only the text counts; the same text twice is shown once
    assert [x.memory.id for x in distinct([a, b, c], threshold=None)] == ["m1", "m2", "m3"]
    twice = _candidate(4, "  ALPHA ", None)
    assert [x.memory.id for x in distinct([a, twice, c], threshold=None)] == ["m1", "m3"]


def test_candidates_without_vectors_are_compared_by_text_only() -> None:
    a = _candidate(1, "alpha", [1.0, 0.0])
    plain = _candidate(2, "beta", None)
    zero = _candidate(3, "gamma", [0.0, 0.0])  # no direction: like nothing
    same_way = _candidate(4, "delta", [2.0, 0.0])  # cosine 1 with a
    kept = distinct([a, plain, zero, same_way], threshold=0.95)
    assert [x.memory.id for x in kept] == ["m1", "m2", "m3"]

"""Pseudo-relevance feedback for the vector signal (Rocchio), from confident first hits.

The first pass fuses keyword and vector candidates as usual. Its ``feedback_hits``
best candidates whose fused value reaches ``feedback_confidence`` of the best one are
taken as relevant; their mean vector moves the query vector::

    q' = normalise(q + feedback_beta * mean(vectors of the confident hits))

A second vector search with ``q'`` brings candidates phrased like the answers rather
than like the question, and every candidate gains ``feedback_share`` times its cosine
with ``q'`` (the ``feedback`` signal, "feedback: cosine 0.52 with the query moved
towards 3 first hits"). Classic IR, no model beyond the embedder's stored vectors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from tiered_memory.recall.types import SignalMatch, Vector

FEEDBACK = "feedback"


def confident_hits(strength: Mapping[str, float], count: int, confidence: float) -> list[str]:
    """The best ``count`` candidates (fused value, best first) whose value is at least
    ``confidence`` times the best one's; none when the best is not positive."""
    order = sorted(strength, key=lambda m: (-strength[m], m))[:count]
    if not order or strength[order[0]] <= 0:
        return []
    floor = confidence * strength[order[0]]
    return [m for m in order if strength[m] >= floor]


def moved_query(query: Vector, vectors: Sequence[Vector], beta: float) -> Vector | None:
    """Rocchio's query: ``normalise(query + beta * mean(vectors))``; ``None`` without
    vectors or when the result has no length."""
    if not vectors or beta <= 0:
        return None
    moved = np.asarray(query, dtype=np.float32) + np.float32(beta) * np.mean(
        np.stack([np.asarray(v, dtype=np.float32) for v in vectors]), axis=0
    )
    norm = float(np.linalg.norm(moved))
    if norm == 0:
        return None
    result: Vector = (moved / norm).astype(np.float32)
    return result


def add_feedback(
    fused: dict[str, list[SignalMatch]],
    distances: Mapping[str, float],
    ranks: Mapping[str, int],
    share: float,
    used: int,
) -> None:
    """Add the ``feedback`` signal: ``share * (1 - distance to q')`` for each memory in
    ``distances`` (new ones join the candidates); ``ranks`` are the second vector
    search's ranks, ``used`` how many first hits moved the query."""
    why = f"the query moved towards {used} first hit{'s' if used != 1 else ''}"
    for memory_id, distance in distances.items():
        match = SignalMatch(
            FEEDBACK,
            ranks.get(memory_id, 0),
            distance,
            "cosine distance",
            share * (1.0 - distance),
            detail=f"feedback: cosine {1.0 - distance:.2f} with {why}",
        )
        fused.setdefault(memory_id, []).append(match)

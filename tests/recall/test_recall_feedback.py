"""Pseudo-relevance feedback in recall (Rocchio on the vector signal,
``RecallSettings.feedback_share``), on SQLite and PostgreSQL alike."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from persistence import InvalidInputError
from tiered_memory import AgentMemoryManager
from tiered_memory.embedding.embedders import OnnxEmbedder
from tiered_memory.recall.feedback import confident_hits, moved_query
from tiered_memory.recall.settings import RecallSettings

EMBEDDER = OnnxEmbedder()  # one model load for the module
PLAIN = {"adjacency_weight": 0.0, "speaker_boost": 0.0, "graph_share": 0.0}
TEXTS = (
    "We hiked the Dolomites trail for two weeks",
    "The mountain huts served strudel and polenta",
    "My boots were soaked every evening on the ridge",
    "The quarterly report is due on Friday",
    "I repaired the bicycle chain yesterday",
)


def test_confident_hits_are_the_best_few_near_the_best() -> None:
    strength = {"a": 1.0, "b": 0.9, "c": 0.5, "d": 0.85, "e": -1.0}
    assert confident_hits(strength, 3, 0.8) == ["a", "b", "d"]
    assert confident_hits(strength, 2, 0.8) == ["a", "b"]
    assert confident_hits(strength, 5, 0.95) == ["a"]
    assert confident_hits({"x": -0.2, "y": -0.5}, 3, 0.5) == []  # nothing confident


def test_the_moved_query_is_the_normalised_rocchio_sum() -> None:
    q = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    hits = [np.array([0.0, 1.0, 0.0], np.float32), np.array([0.0, 0.0, 1.0], np.float32)]
    moved = moved_query(q, hits, beta=1.0)
    assert moved is not None
    expected = np.array([1.0, 0.5, 0.5]) / np.linalg.norm([1.0, 0.5, 0.5])
    assert np.allclose(moved, expected, atol=1e-6)
    assert moved_query(q, [], beta=1.0) is None
    assert moved_query(q, hits, beta=0.0) is None
    assert moved_query(np.zeros(3, np.float32), [np.zeros(3, np.float32)], 1.0) is None


@pytest.mark.slow  # 1.7 s measured on a busy machine
def test_recall_adds_the_cosine_with_the_moved_query_and_says_why(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    share, beta = 0.2, 1.0
    settings = RecallSettings(feedback_share=share, feedback_hits=2, feedback_confidence=0.0,
                              feedback_beta=beta, **PLAIN)  # fmt: skip
    memory = make_memory(embedder=EMBEDDER, recall=settings)
    for text in TEXTS:
        memory.remember(text)
    query = "mountain hike in the Dolomites"
    hits = memory.recall(query, k=5)
    assert len(hits) >= 3  # (a PostgreSQL vector index may skip one of five)
    feedback = {
        h.memory.id: s for h in hits for s in h.explanation.signals if s.signal == "feedback"
    }
    assert set(feedback) == {h.memory.id for h in hits}
    # The first pass is what the fused value was without the feedback signal.
    first = {h.memory.id: h.explanation.fused - feedback[h.memory.id].contribution for h in hits}
    chosen = sorted(first, key=lambda m: (-first[m], m))[:2]
    vectors = {h.memory.id: np.asarray(h.memory.embedding, np.float32) for h in hits}
    q = EMBEDDER.embed([query])[0]
    moved = moved_query(np.asarray(q, np.float32), [vectors[m] for m in chosen], beta)
    assert moved is not None
    for memory_id, signal in feedback.items():
        v = vectors[memory_id] / np.linalg.norm(vectors[memory_id])
        assert signal.contribution == pytest.approx(share * float(moved @ v), abs=2e-3)
        assert signal.detail is not None
        assert signal.detail.startswith("feedback: cosine ")
        assert signal.detail.endswith("with the query moved towards 2 first hits")
    # Off (the default): no feedback signal at all.
    with AgentMemoryManager.in_memory(embedder=EMBEDDER, recall=RecallSettings(**PLAIN)) as plain:
        for text in TEXTS:
            plain.remember(text)
        plain_hits = plain.recall(query, k=5)
        assert all(s.signal != "feedback" for h in plain_hits for s in h.explanation.signals)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("feedback_share", 1.5),
        ("feedback_confidence", -0.1),
        ("feedback_hits", 0),
        ("feedback_beta", 11.0),
    ],  # fmt: skip
)
def test_bad_feedback_settings_are_refused(field: str, value: float) -> None:
    with pytest.raises(InvalidInputError, match=f"RecallSettings.{field}"):
        RecallSettings(**{field: value})

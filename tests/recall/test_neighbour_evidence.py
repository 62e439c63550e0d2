"""Neighbour evidence in recall: a turn whose neighbour in its session matches the query
better than it does gains the difference (``RecallSettings.neighbour_weight``), on
SQLite and PostgreSQL alike."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from persistence import InvalidInputError
from tiered_memory import AgentMemoryManager
from tiered_memory.embedding.embedders import OnnxEmbedder
from tiered_memory.recall.conversation import cached_turns
from tiered_memory.recall.neighbours import neighbour_lifts
from tiered_memory.recall.settings import RecallSettings
from tiered_memory.recall.types import RecallHit, SignalMatch

EMBEDDER = OnnxEmbedder()  # one model load for the module
PLAIN = {"adjacency_weight": 0.0, "speaker_boost": 0.0, "graph_share": 0.0}


def test_a_candidate_gains_the_weighted_margin_of_its_closer_neighbour() -> None:
    own = {"a": 0.30, "b": 0.60, "c": 0.20, "d": 0.40}
    turns = {
        "a": (None, False, "p", "q"),  # the turn after is closer than the one before
        "b": (None, False, "q", None),  # b matches better than its neighbour: nothing
        "c": (None, False, None, None),  # no neighbour at all
        "d": (None, False, "gone", None),  # its neighbour has no vector
    }
    similarity = {"p": 0.35, "q": 0.50}
    lifts = neighbour_lifts(own, turns, similarity, weight=0.5)
    assert set(lifts) == {"a"}
    side, best, lift = lifts["a"]
    assert (side, best) == ("after", 0.50)
    assert lift == pytest.approx(0.5 * (0.50 - 0.30))
    assert neighbour_lifts({"a": 0.30}, {"a": (None, False, "p", None)}, similarity, 0.5) == {
        "a": ("before", 0.35, pytest.approx(0.025))
    }


def _signals(hit: RecallHit) -> dict[str, SignalMatch]:
    return {s.signal: s for s in hit.explanation.signals}


def _cosine(a: object, b: object) -> float:
    x, y = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


@pytest.mark.slow  # 1.0 s measured on a busy machine
def test_the_turn_beside_a_matching_turn_is_lifted_and_says_why(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    weight = 0.3
    memory = make_memory(embedder=EMBEDDER, recall=RecallSettings(neighbour_weight=weight,
                                                                  **PLAIN))  # fmt: skip
    chat = memory.start_session("chat").session_id
    other = memory.start_session("other").session_id
    ask = memory.remember("Do you play any musical instrument, like a violin?", session_id=chat)
    reply = memory.remember("Yes, since I was seven; it helps me relax", session_id=chat)
    loose = memory.remember("Yes, since last spring; it helps me sleep", session_id=other)
    query = "which musical instrument does she play"
    hits = {h.memory.id: h for h in memory.recall(query, k=10)}
    q = EMBEDDER.embed([query])[0]
    signal = _signals(hits[reply.id])["neighbour"]
    near, own = (
        _cosine(q, hits[ask.id].memory.embedding),
        _cosine(q, hits[reply.id].memory.embedding),
    )
    assert near > own  # the question beside it is what the query is about
    assert signal.contribution == pytest.approx(weight * (near - own), abs=2e-3)
    assert signal.detail == (f"neighbour: the turn before it matches the query better "
                             f"(cosine {near:.2f} against {own:.2f})")  # fmt: skip
    # The question itself is closer than its neighbour, and the loose reply has none.
    assert "neighbour" not in _signals(hits[ask.id])
    assert "neighbour" not in _signals(hits[loose.id])
    assert hits[reply.id].score > hits[loose.id].score  # the look-alike has no such neighbour


@pytest.mark.slow  # 1.2 s measured on a busy machine
def test_without_the_weight_no_turn_is_lifted(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    memory = make_memory(embedder=EMBEDDER, recall=RecallSettings(neighbour_weight=0.0, **PLAIN))
    chat = memory.start_session("chat").session_id
    memory.remember("Do you play any musical instrument, like a violin?", session_id=chat)
    memory.remember("Yes, since I was seven; it helps me relax", session_id=chat)
    hits = memory.recall("which musical instrument does she play", k=10)
    assert len(hits) == 2
    assert all("neighbour" not in _signals(h) for h in hits)


def test_rank_fusion_has_no_neighbour_evidence() -> None:
    settings = RecallSettings(fusion="rrf", neighbour_weight=0.5, **PLAIN)
    with AgentMemoryManager.in_memory(embedder=EMBEDDER, recall=settings) as memory:
        chat = memory.start_session("chat").session_id
        memory.remember("Do you play any musical instrument, like a violin?", session_id=chat)
        memory.remember("Yes, since I was seven; it helps me relax", session_id=chat)
        hits = memory.recall("which musical instrument does she play", k=10)
        assert hits and all("neighbour" not in _signals(h) for h in hits)


@pytest.mark.parametrize(
    ("name", "value"),
    [("neighbour_weight", 1.5), ("neighbour_weight", -0.1), ("neighbour_depth", 0)],
)
def test_bad_neighbour_settings_are_refused(name: str, value: float) -> None:
    with pytest.raises(InvalidInputError, match=name):
        RecallSettings(**{name: value})


def test_one_look_up_of_the_turns_serves_every_signal() -> None:
    asked: list[list[str]] = []

    def lookup(ids: object) -> dict[str, tuple[str | None, bool, str | None, str | None]]:
        asked.append(list(ids))  # type: ignore[call-overload]
        return {m: (None, False, None, None) for m in asked[-1] if m != "gone"}

    turns = cached_turns(lookup)
    assert set(turns(["a", "b", "gone"])) == {"a", "b"}
    assert set(turns(["b", "c", "gone"])) == {"b", "c"}
    assert asked == [["a", "b", "gone"], ["c"]]  # neither b nor the missing id again

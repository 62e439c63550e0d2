"""Sessions as units in recall: a session scored by its best turns lifts its other
candidates (``RecallSettings.session_weight``), on SQLite and PostgreSQL alike."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from persistence import InvalidInputError
from tiered_memory import AgentMemoryManager
from tiered_memory.embedding.embedders import OnnxEmbedder
from tiered_memory.recall.session_units import add_session_lift, session_scores
from tiered_memory.recall.settings import RecallSettings
from tiered_memory.recall.types import RecallHit, SignalMatch

EMBEDDER = OnnxEmbedder()  # one model load for the module


def _fused(values: dict[str, float]) -> dict[str, list[SignalMatch]]:
    return {m: [SignalMatch("vector", 1, 0.0, "cosine distance", v)] for m, v in values.items()}


def test_a_session_scores_the_mean_of_its_best_turns() -> None:
    strength = {"a1": 0.8, "a2": 0.4, "a3": 0.1, "b1": 0.9, "c1": -0.3, "x": 0.7}
    sessions = {"a1": "A", "a2": "A", "a3": "A", "b1": "B", "c1": "C", "x": None}
    scores = session_scores(strength, sessions, best_turns=2)
    # B has one turn: the missing second counts as 0; C has no positive turn; x no session.
    assert scores == {"A": pytest.approx(0.6), "B": pytest.approx(0.45)}
    assert session_scores(strength, sessions, best_turns=1) == {"A": 0.8, "B": 0.9}


def test_only_the_top_sessions_lift_their_candidates_by_a_share_of_the_weight() -> None:
    fused = _fused({"a1": 0.8, "a2": 0.4, "b1": 0.6, "b2": 0.2, "c1": 0.3, "x": 0.9})
    sessions = {"a1": "A", "a2": "A", "b1": "B", "b2": "B", "c1": "C", "x": None}
    add_session_lift(fused, sessions, weight=0.1, top=2, best_turns=2)
    lift = {m: [s for s in signals if s.signal == "session"] for m, signals in fused.items()}
    # A: (0.8 + 0.4) / 2 = 0.6 ranks 1st; B: 0.4 ranks 2nd (2/3 of A's); C and x none.
    for m in ("a1", "a2"):
        assert lift[m][0].contribution == pytest.approx(0.1)
        assert lift[m][0].detail == "lifted: session 'A' ranks 1st by its best turns"
    for m in ("b1", "b2"):
        assert lift[m][0].contribution == pytest.approx(0.1 * 0.4 / 0.6)
        assert lift[m][0].rank == 2 and "ranks 2nd" in str(lift[m][0])
    assert lift["c1"] == [] and lift["x"] == []
    untouched = _fused({"a1": 0.8})
    add_session_lift(untouched, {"a1": "A"}, weight=0.0, top=2, best_turns=2)
    assert len(untouched["a1"]) == 1


def _signals(hit: RecallHit) -> dict[str, SignalMatch]:
    return {s.signal: s for s in hit.explanation.signals}


def _fill(memory: AgentMemoryManager) -> tuple[str, str, str]:
    """Two sessions and a loose memory; returns (session 'trip', the quiet turn of
    'trip', the loose memory)."""
    trip = memory.start_session("trip").session_id
    other = memory.start_session("other").session_id
    memory.remember("We hiked the Dolomites trail for two weeks", session_id=trip)
    memory.remember("The Dolomites hike had the best mountain huts", session_id=trip)
    quiet = memory.remember("My boots were soaked every evening", session_id=trip)
    memory.remember("I bought new socks at the market", session_id=other)
    loose = memory.remember("Mountain huts serve strudel")  # outside sessions
    return trip, quiet.id, loose.id


QUERY = "Dolomites hike mountain huts"
PLAIN = {"adjacency_weight": 0.0, "speaker_boost": 0.0, "graph_share": 0.0}
OFF = {**PLAIN, "session_weight": 0.0}


@pytest.mark.slow  # 1.4 s measured on a busy machine
def test_recall_lifts_the_turns_of_the_best_session_and_says_why(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    settings = RecallSettings(**{**PLAIN, "session_weight": 0.1, "session_top": 1})
    memory = make_memory(embedder=EMBEDDER, recall=settings)
    trip, quiet, loose = _fill(memory)
    hits = {h.memory.id: h for h in memory.recall(QUERY, k=10)}
    lifted = _signals(hits[quiet])["session"]
    assert lifted.contribution == pytest.approx(0.1)  # the best session: the full weight
    assert "lifted: session 'trip' ranks 1st by its best turns +0.1000" in str(
        hits[quiet].explanation
    )
    assert all("session" not in _signals(h) for h in hits.values() if h.memory.session_id != trip)
    assert "session" not in _signals(hits[loose])
    # Turned off, no hit carries the signal and the quiet turn has less.
    with AgentMemoryManager.in_memory(embedder=EMBEDDER, recall=RecallSettings(**OFF)) as plain:
        _, plain_quiet, _ = _fill(plain)
        plain_hits = {h.memory.id: h for h in plain.recall(QUERY, k=10)}
        assert all("session" not in _signals(h) for h in plain_hits.values())
        gained = hits[quiet].explanation.fused - plain_hits[plain_quiet].explanation.fused
        assert gained == pytest.approx(0.1, abs=1e-4)


@pytest.mark.parametrize(
    ("field", "value"),
    [("session_weight", 1.5), ("session_weight", -0.1), ("session_top", 0), ("session_turns", 0)],
)
def test_bad_session_settings_are_refused(field: str, value: float) -> None:
    with pytest.raises(InvalidInputError, match=f"RecallSettings.{field}"):
        RecallSettings(**{field: value})

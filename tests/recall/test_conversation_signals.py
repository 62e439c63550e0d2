"""Conversation structure in recall: answer adjacency, speaker attribution, and the
``speaker`` field through writes, transcripts, export and import."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from persistence import InvalidInputError
from tiered_memory import AgentMemoryManager
from tiered_memory.embedding.embedders import OnnxEmbedder
from tiered_memory.recall.conversation import answer_bonus, named_speaker
from tiered_memory.recall.settings import RecallSettings
from tiered_memory.recall.types import RecallHit

EMBEDDER = OnnxEmbedder()  # one model load for the module

QUESTION = "Where did you travel for the summer holiday?"
ANSWER = "Lisbon, with my sister. We ate pastries every day."
FILLERS = (
    "The quarterly report is due on Friday",
    "My cat Miso sleeps all afternoon",
    "I repaired the bicycle chain yesterday",
    "We watched a film about penguins",
)


def _signals(hit: RecallHit) -> dict[str, float]:
    return {s.signal: s.contribution for s in hit.explanation.signals}


def _chat(memory: AgentMemoryManager) -> tuple[str, str]:
    session = memory.start_session().session_id
    for text in FILLERS[:2]:
        memory.remember(text, session_id=session, speaker="Melanie")
    question = memory.remember(QUESTION, session_id=session, speaker="Melanie")
    answer = memory.remember(ANSWER, session_id=session, speaker="Caroline")
    for text in FILLERS[2:]:
        memory.remember(text, session_id=session, speaker="Caroline")
    return question.id, answer.id


def test_answer_bonus_is_a_share_of_the_question_never_a_loss() -> None:
    strength = {"q": 0.5, "a": 0.1, "neg": -0.2}
    assert answer_bonus(strength, {"q": "a", "neg": "x"}, 0.2) == {"a": ("q", pytest.approx(0.1))}
    assert answer_bonus(strength, {"q": "new"}, 0.2) == {"new": ("q", pytest.approx(0.1))}
    assert answer_bonus(strength, {"q": "a"}, 0.0) == {}


def test_named_speaker_needs_exactly_one_whole_name() -> None:
    speakers = {"Caroline", "Melanie", "Anna Lee"}
    assert named_speaker("What did caroline paint?", speakers) == "Caroline"
    assert named_speaker("Did Caroline and Melanie meet?", speakers) is None
    assert named_speaker("Carolines and Mel", speakers) is None
    assert named_speaker("When did Anna Lee move?", speakers) == "Anna Lee"
    assert named_speaker("When did Anna move?", speakers) is None


def test_the_answer_to_a_matching_question_gains_a_share_and_says_why(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    weight = 0.2
    memory = make_memory(
        embedder=EMBEDDER, recall=RecallSettings(adjacency_weight=weight, session_weight=0.0)
    )
    question, answer = _chat(memory)
    hits = {h.memory.id: h for h in memory.recall("summer holiday travel", k=10)}
    gained = _signals(hits[answer])
    question_fused = hits[question].explanation.fused
    assert gained["adjacency"] == pytest.approx(weight * question_fused)
    assert hits[answer].explanation.fused == pytest.approx(sum(gained.values()))
    assert "answer to a matching question +" in str(hits[answer].explanation)
    assert "adjacency" not in _signals(hits[question])  # it follows a filler, no question
    # Without the signal the answer's fused value is its own alone.
    settings = RecallSettings(adjacency_weight=0.0, session_weight=0.0)
    with AgentMemoryManager.in_memory(embedder=EMBEDDER, recall=settings) as plain:
        _, a2 = _chat(plain)
        hit = {h.memory.id: h for h in plain.recall("summer holiday travel", k=10)}[a2]
        assert "adjacency" not in _signals(hit)
        own = hits[answer].explanation.fused - gained["adjacency"]
        assert hit.explanation.fused == pytest.approx(own, abs=1e-6)


def test_a_question_pulls_in_its_answer_unless_filters_apply(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    """With one candidate per signal only the question is found; its answer joins with
    its computed cosine and the bonus. Under a filter an answer outside the candidates
    may not pass it, so none joins."""
    settings = RecallSettings(depth=1, vector_depth=1, session_weight=0.0, neighbour_weight=0.0)
    memory = make_memory(embedder=EMBEDDER, recall=settings)
    question, answer = _chat(memory)
    hits = {h.memory.id: h for h in memory.recall("Where did you travel for the summer?", k=5)}
    assert set(hits) == {question, answer}
    joined = {s.signal: s for s in hits[answer].explanation.signals}
    assert set(joined) == {"vector", "adjacency"} and joined["vector"].rank == 0
    filtered = memory.recall("Where did you travel for the summer?", k=5, agent_id=None,
                             created_after=0)  # fmt: skip
    assert [h.memory.id for h in filtered] == [question]


def test_a_named_speaker_boosts_their_memories_only(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    boost = 0.05
    memory = make_memory(embedder=EMBEDDER, recall=RecallSettings(speaker_boost=boost))
    _chat(memory)
    for hit in memory.recall("What did Caroline say about pastries?", k=10):
        said = {s.signal: s for s in hit.explanation.signals}.get("speaker")
        if hit.memory.speaker == "Caroline":
            assert said is not None and said.contribution == pytest.approx(boost)
            assert "said by Caroline +0.0500" in str(hit.explanation)
        else:
            assert said is None
    for query in ("Did Caroline tell Melanie about pastries?", "Who ate pastries?"):
        assert all("speaker" not in _signals(h) for h in memory.recall(query, k=10))


def test_speaker_is_kept_by_writes_transcripts_export_and_import(
    make_memory: Callable[..., AgentMemoryManager], tmp_path: Path
) -> None:
    memory = make_memory(embedder=None)
    session = memory.start_session().session_id
    one = memory.remember("hello", session_id=session, speaker="Caroline")
    many = memory.remember_many(
        [{"content": "hi", "speaker": "Melanie"}, "no one said this"], session_id=session
    )
    pad = memory.remember("note", "scratchpad", key="k", speaker="Melanie")
    line = memory.append_transcript(session, "user", "hello", speaker="Caroline")
    assert [m.speaker for m in (one, *many, pad)] == ["Caroline", "Melanie", None, "Melanie"]
    assert memory.get_transcript(session) == [line] and line.speaker == "Caroline"
    with pytest.raises(InvalidInputError):
        memory.remember("x", speaker=3)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        memory.append_transcript(session, "user", "x", speaker=["x"])  # type: ignore[arg-type]
    exported = tmp_path / "out.json"
    memory.export_json(exported)
    with AgentMemoryManager.open(tmp_path / "copy.db", embedder=None) as copy:
        copy.import_json(exported)
        assert copy.get(one.id).speaker == "Caroline"  # type: ignore[union-attr]
        assert copy.get(many[1].id).speaker is None  # type: ignore[union-attr]
        assert copy.get(pad.id).speaker == "Melanie"  # type: ignore[union-attr]
        assert copy.get_transcript(session)[0].speaker == "Caroline"

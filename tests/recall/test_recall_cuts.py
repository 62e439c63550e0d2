"""Recall's cuts (``min_score``, ``relative_cut``) and explanations that say when a keyword
match came from the turns around a memory rather than its own words; on both backends."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from persistence import InvalidInputError, KeywordParts
from tiered_memory import AgentMemoryManager
from tiered_memory.recall import RecallSettings

TURNS = (
    "Where did Caroline go for the lighthouse trip?",
    "She went to Brittany in June.",
    "The weather was awful though.",
    "Melanie painted a sunrise over the lake.",
    "Nothing else happened that week.",
    "Caroline keeps a lighthouse postcard on her desk.",
)


def _conversation(memory: AgentMemoryManager) -> dict[str, str]:
    session = memory.start_session("s1").session_id
    return {t: memory.remember(t, session_id=session).id for t in TURNS}


def test_explanations_name_where_the_keyword_match_lies(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    memory = make_memory(embedder=None, extractor=None)
    ids = _conversation(memory)
    hits = {h.memory.id: h for h in memory.recall("lighthouse trip", k=10)}
    question, answer = hits[ids[TURNS[0]]], hits[ids[TURNS[1]]]
    (own,) = [s for s in question.explanation.signals if s.signal == "keyword"]
    assert own.matched_in[0] == "own words"
    assert str(own).startswith(
        "keyword #1: " if own.matched_in == ("own words",) else "keyword #1 in"
    )
    assert not any("neighbouring turn" in n for n in question.explanation.notes)
    (theirs,) = [s for s in answer.explanation.signals if s.signal == "keyword"]
    assert theirs.matched_in == ("turns before",) and " in turns before: " in str(theirs)
    assert "keyword match from a neighbouring turn (before it), not its own words" in str(
        answer.explanation
    )
    # the turn before the postcard line holds no query word: it is found by the turn
    # after it, and says so
    before_postcard = hits[ids[TURNS[4]]]
    (after,) = [s for s in before_postcard.explanation.signals if s.signal == "keyword"]
    assert after.matched_in == ("turns after",)
    assert "neighbouring turn (after it)" in str(before_postcard.explanation)


def test_the_backend_says_which_parts_matched(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    memory = make_memory(embedder=None, extractor=None)
    ids = _conversation(memory)
    parts = memory.store.indexes.keyword_parts(["lighthouse"], list(ids.values()))
    assert parts[ids[TURNS[0]]] == KeywordParts(own=True, before=False, after=False)
    assert parts[ids[TURNS[1]]] == KeywordParts(own=False, before=True, after=False)
    assert parts[ids[TURNS[4]]] == KeywordParts(own=False, before=False, after=True)
    assert ids[TURNS[3]] in parts and parts[ids[TURNS[3]]].neighbours_only  # 2 after: C
    assert memory.store.indexes.keyword_parts(["nowhere"], list(ids.values())) == {}


@pytest.mark.slow  # 1.6 s measured on a busy machine
def test_min_score_and_relative_cut_drop_weak_hits(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    memory = make_memory(embedder=None, extractor=None)
    _conversation(memory)
    every = memory.recall("lighthouse trip", k=10)
    scores = [h.score for h in every]
    assert len(scores) >= 3 and scores == sorted(scores, reverse=True)
    middle = scores[1]
    kept = memory.recall("lighthouse trip", k=10, min_score=middle)
    assert [h.score for h in kept] == [s for s in scores if s >= middle]
    half = memory.recall("lighthouse trip", k=10, relative_cut=0.5)
    assert [h.score for h in half] == [s for s in scores if s >= 0.5 * scores[0]]
    assert len(half) < len(every)
    assert memory.recall("lighthouse trip", k=10, min_score=scores[0] + 1) == []


@pytest.mark.slow  # 1.3 s measured on a busy machine
def test_the_settings_give_the_default_cut_and_a_call_overrides_it(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    memory = make_memory(embedder=None, extractor=None, recall=RecallSettings(relative_cut=0.9))
    _conversation(memory)
    strict = memory.recall("lighthouse trip", k=10)
    loose = memory.recall("lighthouse trip", k=10, relative_cut=0.0)
    assert len(strict) < len(loose)
    assert all(h.score >= 0.9 * strict[0].score for h in strict)


def test_bad_cuts_are_refused() -> None:
    with AgentMemoryManager.in_memory(embedder=None) as memory:
        memory.remember("a lighthouse")
        for bad in ({"min_score": "high"}, {"relative_cut": 1.5}, {"relative_cut": -0.1},
                    {"min_score": float("nan")}):  # fmt: skip
            with pytest.raises(InvalidInputError):
                memory.recall("lighthouse", **bad)
    for bad in ({"min_score": "x"}, {"relative_cut": 2}):
        with pytest.raises(InvalidInputError):
            RecallSettings(**bad)  # type: ignore[arg-type]


@pytest.mark.slow  # 4.8 s measured on a busy machine
@pytest.mark.subprocess
def test_the_cli_search_takes_the_cuts(tmp_path: Path) -> None:
    """``tiered-memory search --min-score`` / ``--relative-cut`` cut as recall does."""
    db = tmp_path / "cuts.db"
    with AgentMemoryManager.open(db, embedder=None, extractor=None) as memory:
        _conversation(memory)
        scores = [h.score for h in memory.recall("lighthouse trip", k=10)]
    root = Path(__file__).resolve().parents[2]

    def search(*options: str) -> list[float]:
        result = subprocess.run(
            [sys.executable, "-m", "tiered_memory", "search", str(db), "lighthouse trip",
             "-k", "10", "--keywords-only", "--json", *options],
            capture_output=True, text=True, timeout=120, cwd=root,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        return [row["score"] for row in orjson.loads(result.stdout)]

    assert search() == pytest.approx(scores, rel=1e-3)
    middle = (scores[1] + scores[2]) / 2  # (recency moves scores a little between runs)
    assert search("--min-score", repr(middle)) == pytest.approx(scores[:2], rel=1e-3)
    half = search("--relative-cut", "0.5")
    assert half == pytest.approx([s for s in scores if s >= 0.5 * scores[0]], rel=1e-3)
    assert len(half) < len(scores)
    bad = subprocess.run(
        [sys.executable, "-m", "tiered_memory", "search", str(db), "x", "--relative-cut", "2"],
        capture_output=True, text=True, timeout=120, cwd=root,
    )  # fmt: skip
    assert bad.returncode == 2 and "Traceback" not in bad.stderr

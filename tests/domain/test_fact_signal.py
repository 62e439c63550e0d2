"""The fact signal (issue 43): a query naming an entity and one of its single-valued
relations ("where does Ana work?": Ana, ``works_at``) puts the memory asserting that
fact, as it holds now or at ``as_of``, above the entity's other memories; on every
engine. No embedder: the keywords alone would put the shorter decoy first."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import FakeClock
from tiered_memory import AgentMemoryManager
from tiered_memory.errors import InvalidInputError
from tiered_memory.recall import RecallSettings
from tiered_memory.recall.fact_signal import asked_predicates, stem
from tiered_memory.recall.settings import STOPWORDS

DAY = 86_400_000
WORK = "where does Ana work?"


def _history(memory: AgentMemoryManager, clock: FakeClock) -> tuple[str, str, str]:
    """Ana's employer changes (works_at, single-valued); a shorter memory about her that
    asserts nothing competes for the same keyword. The ids: Acme's, Initech's, decoy's."""
    acme = memory.remember("Ana joined Acme in May", relations=[("Ana", "works_at", "Acme")])
    decoy = memory.remember("Ana drinks tea", relations=[("Ana", "drinks", "tea")])
    clock.advance(10 * DAY)
    initech = memory.remember(
        "Ana started at Initech last week", relations=[("Ana", "works_at", "Initech")]
    )
    assert memory.get(acme.id).superseded_by == initech.id  # type: ignore[union-attr]
    return acme.id, initech.id, decoy.id


def test_the_memory_holding_the_fact_asked_comes_first(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    memory = make_memory(embedder=None, extractor=None)
    acme, initech, decoy = _history(memory, clock)
    then = clock() - 5 * DAY
    assert [h.memory.id for h in memory.recall(WORK, 2)] == [initech, decoy]
    assert [h.memory.id for h in memory.recall(WORK, 2, as_of=then)] == [acme, decoy]
    # every version competes: the fact that holds now is the one asked
    assert memory.recall(WORK, 3, include_superseded=True)[0].memory.id == initech
    [fact] = [s for s in memory.recall(WORK, 1)[0].explanation.signals if s.signal == "fact"]
    assert fact.path == "'Ana' works_at 'Initech' (the query asks 'work')"
    assert fact.contribution == pytest.approx(RecallSettings().fact_share)
    # a question naming no single-valued predicate: no fact signal, the keywords decide
    hits = memory.recall("Ana", 3)
    assert hits[0].memory.id == decoy
    assert not any(s.signal == "fact" for h in hits for s in h.explanation.signals)


def test_off_the_keywords_decide(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    """The same history without the signal (``fact_share=0``), or without ``works_at``
    among the single-valued predicates: the shorter memory wins on its bm25."""
    off = make_memory(embedder=None, extractor=None, recall=RecallSettings(fact_share=0.0))
    _, _, decoy = _history(off, clock)
    assert off.recall(WORK, 1)[0].memory.id == decoy
    other = make_memory(embedder=None, extractor=None, single_valued=("lives_in",))
    other.remember("Ana joined Acme in May", relations=[("Ana", "works_at", "Acme")])
    short = other.remember("Ana drinks tea")
    assert other.recall(WORK, 1)[0].memory.id == short.id


def test_rank_fusion_weighs_it_only_when_asked(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    assert not RecallSettings(fusion="rrf").fact_on  # off in rank fusion by default
    weighted = RecallSettings(fusion="rrf", fact_weight=1.0)
    memory = make_memory(embedder=None, extractor=None, recall=weighted)
    _, initech, _ = _history(memory, clock)
    [hit] = memory.recall(WORK, 1)
    assert hit.memory.id == initech
    assert any(s.signal == "fact" and s.rank == 1 for s in hit.explanation.signals)


def test_which_words_name_a_predicate() -> None:
    assert [stem(w) for w in ("live", "lives", "lived", "living")] == ["liv"] * 4
    assert stem("works") == stem("working") == "work" and stem("is") == "is"
    predicates = ("lives_in", "works_at", "employed_by", "married_to")
    assert asked_predicates(["where", "does", "ana", "live"], predicates, STOPWORDS) == {
        "lives_in": "live"
    }
    assert asked_predicates(["who", "employs", "bo"], predicates, STOPWORDS) == {
        "employed_by": "employs"
    }
    assert asked_predicates(["in", "at", "to"], predicates, STOPWORDS) == {}  # stopwords
    with pytest.raises(InvalidInputError):
        RecallSettings(fact_share=1.5)

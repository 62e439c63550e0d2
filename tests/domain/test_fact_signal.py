"""The fact signal (issue 43): a query naming an entity and one of its single-valued
relations ("where does Ana work?": Ana, ``works_at``) puts the memory asserting that
fact, as it holds now or at ``as_of``, above the entity's other memories; on every
engine. No embedder: the keywords alone would put the shorter decoy first."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import FakeClock
from tiered_memory import AgentMemoryManager, MemoryConfig
from tiered_memory.config import SINGLE_VALUED
from tiered_memory.errors import InvalidInputError, InvalidTypeError
from tiered_memory.recall import RecallSettings
from tiered_memory.recall.fact_signal import (
    PREDICATE_WORDS,
    asked_predicates,
    stem,
    tokens,
    vocabulary,
    word_facts,
)
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


def _plain_history(memory: AgentMemoryManager, clock: FakeClock) -> dict[str, str]:
    """Ana's city and job remembered without relations (a change by ``supersedes=``), and
    a shorter memory about her that the keywords alone would put first. Name -> id."""
    ids = {"paris": memory.remember("Ana relocated to Paris with her partner").id}
    ids["acme"] = memory.remember("Ana took a job at Acme").id
    ids["tea"] = memory.remember("Ana drinks tea").id
    clock.advance(10 * DAY)
    ids["berlin"] = memory.remember("Ana moved to Berlin last week", supersedes=ids["paris"]).id
    return ids


def test_a_memory_holding_the_fact_by_its_words_comes_first(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    """No relation tells where Ana lives: the memory whose words say so (``moved`` for
    ``lives_in``) gains ``fact_words`` of the fact signal; as of then, the older one."""
    memory = make_memory(embedder=None, extractor=None)
    ids = _plain_history(memory, clock)
    live = "where does Ana live?"
    assert [h.memory.id for h in memory.recall(live, 2)] == [ids["berlin"], ids["tea"]]
    then = clock() - 5 * DAY
    assert memory.recall(live, 1, as_of=then)[0].memory.id == ids["paris"]
    assert memory.recall("where does Ana work?", 1)[0].memory.id == ids["acme"]
    assert memory.recall("who is Ana's employer?", 1)[0].memory.id == ids["acme"]
    [fact] = [s for s in memory.recall(live, 1)[0].explanation.signals if s.signal == "fact"]
    assert fact.path == "'moved' expresses lives_in (the query asks 'live')"
    settings = RecallSettings()
    assert fact.contribution == pytest.approx(settings.fact_share * settings.fact_words)
    off = make_memory(embedder=None, extractor=None, recall=RecallSettings(fact_words=0.0))
    if not off.query():  # each manager in RAM has its own store
        _plain_history(off, clock)
    [hit] = off.recall(live, 1)
    assert hit.memory.content == "Ana drinks tea"  # the keywords alone


def test_a_memory_about_someone_else_gains_nothing(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    """Bo's memory expresses lives_in but shares no other word with the question."""
    memory = make_memory(embedder=None, extractor=None)
    bo = memory.remember("Bo lives in Rome")
    ana = memory.remember("Ana moved to Berlin")
    hits = memory.recall("where does Ana live?", 2)
    facts = {h.memory.id for h in hits for s in h.explanation.signals if s.signal == "fact"}
    assert {h.memory.id for h in hits} == {bo.id, ana.id} and facts == {ana.id}


def test_only_a_query_naming_a_predicate_changes(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    """Queries whose words name no single-valued predicate get the same hits, scores and
    explanations with the predicate words as without them."""
    still = {"embedder": None, "extractor": None, "recall_review_quality": None}
    memory = make_memory(**still)
    start = clock()
    _plain_history(memory, clock)
    off = make_memory(**still, recall=RecallSettings(fact_words=0.0))
    if not off.query():  # each manager in RAM has its own store: the same history
        end, clock.now = clock(), start
        _plain_history(off, clock)
        assert clock() == end
    for query in ("Ana", "what does Ana drink?", "Ana partner", "Berlin week"):
        on_hits, off_hits = memory.recall(query, 5), off.recall(query, 5)
        assert on_hits and [(h.memory.content, h.score) for h in on_hits] == [
            (h.memory.content, h.score) for h in off_hits
        ]
        assert not any(s.signal == "fact" for h in on_hits for s in h.explanation.signals)


def test_a_relation_answers_before_words(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    """When a relation holds the fact asked, memories merely using its words gain nothing."""
    memory = make_memory(embedder=None, extractor=None)
    garden = memory.remember("Ana's home has a garden")
    berlin = memory.remember("Ana is in Berlin now", relations=[("Ana", "lives_in", "Berlin")])
    hits = memory.recall("where does Ana live?", 2)
    assert hits[0].memory.id == berlin.id
    facts = {h.memory.id: s.path for h in hits for s in h.explanation.signals if s.signal == "fact"}
    assert facts == {berlin.id: "'Ana' lives_in 'Berlin' (the query asks 'live')"}
    assert garden.id in {h.memory.id for h in hits}


def test_predicate_words_are_configurable(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    """A predicate of one's own gets its words (``{}``: its name's words alone)."""
    words = {"drinks": ("prefers", "favourite")}
    memory = make_memory(embedder=None, extractor=None, single_valued=("drinks",),
                         predicate_words=words)  # fmt: skip
    coffee = memory.remember("Ana prefers coffee")
    memory.remember("Ana runs daily")
    [hit] = memory.recall("what does Ana drink?", 1)
    assert hit.memory.id == coffee.id
    assert [s.path for s in hit.explanation.signals if s.signal == "fact"] == [
        "'prefers' expresses drinks (the query asks 'drink')"
    ]
    bare = make_memory(embedder=None, extractor=None, single_valued=("drinks",),
                       predicate_words={})  # fmt: skip
    assert bare.config.predicate_words == {}
    if not bare.query():  # each manager in RAM has its own store
        bare.remember("Ana prefers coffee")
    hits = bare.recall("what does Ana drink?", 2)
    assert hits and not any(s.signal == "fact" for h in hits for s in h.explanation.signals)
    with pytest.raises(InvalidTypeError):
        MemoryConfig(predicate_words=["lives_in"])  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        MemoryConfig(predicate_words={"lives_in": "home"})  # type: ignore[dict-item]
    with pytest.raises(InvalidInputError):
        MemoryConfig(predicate_words={"lives_in": ("two words",)})
    with pytest.raises(InvalidInputError):
        MemoryConfig(predicate_words={"not a predicate!": ("home",)})
    assert MemoryConfig(predicate_words={"lives_in": ("Home",)}).predicate_words == {
        "lives_in": ("home",)
    }


def test_which_words_express_a_predicate() -> None:
    words = vocabulary(("lives_in", "works_at", "drinks"), PREDICATE_WORDS, STOPWORDS)
    assert words["drinks"] == {"drink"}  # no words given: its name's
    assert {"liv", "mov", "relocat", "hom"} <= words["lives_in"]
    q = tokens("Which company employs Ana?")
    assert asked_predicates(q, words, STOPWORDS) == {"works_at": "company"}
    contents = {"a": "Ana got hired by Acme", "b": "Ana moved to Rome", "c": "Bo works at Acme"}
    assert word_facts(q, {"works_at": "company"}, words, contents, STOPWORDS) == {
        "a": "'hired' expresses works_at (the query asks 'company')"
    }


def test_the_docs_list_the_default_words() -> None:
    """docs/concepts/facts-over-time.md's table of predicate words is the default's."""
    page = Path(__file__).parents[2] / "docs" / "concepts" / "facts-over-time.md"
    listed: dict[str, tuple[str, ...]] = {}
    for line in page.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`") and "_" in cells[0]:
            for predicate in cells[0].replace("`", "").split(","):
                listed[predicate.strip()] = tuple(w.strip() for w in cells[1].split(","))
    assert listed == dict(PREDICATE_WORDS)
    assert set(listed) == set(SINGLE_VALUED)

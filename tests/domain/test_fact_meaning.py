"""The fact signal by a memory's meaning (issue 43): a memory about the query's subject
whose words name no single-valued predicate ("Ana signed a contract with Acme") holds
the fact asked ("which company employs Ana?") when its vector is nearest that
predicate's; on every engine. A topic model stands in for MiniLM: job and home words
share a direction, every other word has its own."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import numpy as np
import pytest

from tests.conftest import FakeClock
from tiered_memory import AgentMemoryManager
from tiered_memory.recall import RecallSettings
from tiered_memory.recall.fact_signal import (
    PREDICATE_WORDS,
    PredicateVectors,
    meaning_facts,
    predicate_vectors,
    terms,
    vocabulary,
)
from tiered_memory.recall.settings import STOPWORDS

DIM = 256
DAY = 86_400_000
TOPICS = {  # every word of a predicate's vector is its topic's: the predicate's is the topic's
    "job": {*PREDICATE_WORDS["works_at"], "works", "employed", "contract", "payroll"},
    "home": {*PREDICATE_WORDS["lives_in"], "lives", "lease", "rent"},
}
EMPLOYS = "which company employs Ana?"
CONTRACT = "Ana signed a long contract with the Acme group last spring"


class TopicEmbedder:
    """A text's vector: the normalised sum of its words', a topic word's being its
    topic's direction (every job word the same), any other word its own."""

    model_id = "test-topics"
    dim = DIM

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        return np.stack([_text_vector(t) for t in texts])


def _direction(name: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return vector / float(np.linalg.norm(vector))


def _text_vector(text: str) -> np.ndarray:
    total = np.zeros(DIM, np.float32)
    for word in text.lower().replace("?", " ").replace("'s", " ").split():
        topic = next((t for t, words in TOPICS.items() if word in words), None)
        total += _direction(f"topic:{topic}" if topic else word)
    return total / max(float(np.linalg.norm(total)), 1e-9)


def _history(memory: AgentMemoryManager, clock: FakeClock) -> dict[str, str]:
    """Ana's job said without a job word of ``works_at`` (and changed by ``supersedes=``),
    a shorter memory about her that the keywords prefer, and Bo's job."""
    ids = {"initech": memory.remember("Ana is on the payroll of Initech").id}
    ids["tea"] = memory.remember("Ana drinks tea").id
    ids["bo"] = memory.remember("Bo signed a contract with Globex").id
    clock.advance(10 * DAY)
    ids["acme"] = memory.remember(CONTRACT, supersedes=ids["initech"]).id
    memory.flush()
    return ids


def test_a_memory_holding_the_fact_by_its_meaning_comes_first(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    memory = make_memory(embedder=TopicEmbedder(), extractor=None)
    ids = _history(memory, clock)
    hits = memory.recall(EMPLOYS, 3)
    assert hits[0].memory.id == ids["acme"]
    why = {h.memory.id: s.path for h in hits for s in h.explanation.signals if s.signal == "fact"}
    assert set(why) == {ids["acme"]}  # not the tea, not Bo's contract
    said = str(why[ids["acme"]])
    assert said.startswith("its meaning is nearest ") and said.endswith("asks 'company')")
    [fact] = [s for s in hits[0].explanation.signals if s.signal == "fact"]
    settings = RecallSettings()
    assert fact.contribution == pytest.approx(settings.fact_share * settings.fact_vectors)
    then = clock() - 5 * DAY  # as of then: the job that held then, by its meaning too
    assert memory.recall(EMPLOYS, 1, as_of=then)[0].memory.id == ids["initech"]


def test_with_superseded_versions_the_current_one_holds_the_fact_by_meaning(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    """``include_superseded=True`` returns the old versions too, but the fact signal by
    meaning goes to the one that holds now (it went to the superseded job, ranked first;
    review of issue 43's lever)."""
    memory = make_memory(embedder=TopicEmbedder(), extractor=None)
    ids = _history(memory, clock)
    hits = memory.recall(EMPLOYS, 4, include_superseded=True)
    assert ids["initech"] in {h.memory.id for h in hits}  # the old version is there
    facts = {h.memory.id for h in hits for s in h.explanation.signals if s.signal == "fact"}
    assert facts == {ids["acme"]}
    assert hits[0].memory.id == ids["acme"]


def test_words_answer_before_meaning(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    """A memory whose words say the fact asked: it alone holds it (the one nearest in
    meaning gains nothing), every version competing too."""
    memory = make_memory(embedder=TopicEmbedder(), extractor=None)
    ids = _history(memory, clock)
    hired = memory.remember("Ana got hired by Hooli", supersedes=ids["acme"])
    memory.flush()
    for hits in (memory.recall(EMPLOYS, 4), memory.recall(EMPLOYS, 4, include_superseded=True)):
        facts = {h.memory.id: s.path for h in hits for s in h.explanation.signals
                 if s.signal == "fact"}  # fmt: skip
        assert facts == {hired.id: "'hired' expresses employed_by (the query asks 'company')"}


def test_off_the_shorter_memory_wins(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    """``fact_vectors=0`` (or no model): the keywords put the shorter memory first, and
    no hit has a fact signal; the words still count where they say the fact."""
    off = make_memory(embedder=TopicEmbedder(), extractor=None,
                      recall=RecallSettings(fact_vectors=0.0))  # fmt: skip
    ids = _history(off, clock)
    hits = off.recall(EMPLOYS, 3)
    assert hits[0].memory.id == ids["tea"]
    assert not any(s.signal == "fact" for h in hits for s in h.explanation.signals)
    words = off.remember("Ana got hired by Hooli", supersedes=ids["acme"])
    off.flush()
    [hit] = off.recall(EMPLOYS, 1)
    assert hit.memory.id == words.id
    assert [s.path for s in hit.explanation.signals if s.signal == "fact"] == [
        "'hired' expresses employed_by (the query asks 'company')"
    ]


def test_only_a_query_naming_a_predicate_changes(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    """A query naming no single-valued predicate: the same hits and scores with the
    meaning as without it, and the predicates' vectors are never made."""
    model = TopicEmbedder()
    memory = make_memory(embedder=model, extractor=None, recall_review_quality=None)
    start = clock()
    _history(memory, clock)
    off = make_memory(embedder=TopicEmbedder(), extractor=None, recall_review_quality=None,
                      recall=RecallSettings(fact_vectors=0.0))  # fmt: skip
    if not off.query():  # each manager in RAM has its own store: the same history
        clock.now = start
        _history(off, clock)
    calls = model.calls
    for query in ("Ana", "what does Ana drink?", "Acme group town hall", "contract"):
        on_hits, off_hits = memory.recall(query, 4), off.recall(query, 4)
        assert on_hits and [h.memory.content for h in on_hits] == [
            h.memory.content for h in off_hits
        ]
        # two stores in RAM: float32 vector sums may differ in the last bits
        assert [h.score for h in on_hits] == pytest.approx([h.score for h in off_hits], abs=1e-6)
    assert model.calls - calls == 4  # the queries' vectors only
    memory.recall(EMPLOYS, 1)
    assert model.calls - calls == 6  # its vector, then the predicates' (once)
    memory.recall("where does Ana work?", 1)
    assert model.calls - calls == 7


def test_which_memory_holds_a_fact_by_its_meaning() -> None:
    """The subject's memory nearer the asked predicate than every other by the most; none
    when no memory of the subject is nearer; on exact vectors."""
    axes = np.eye(4, dtype=np.float32)
    predicates = PredicateVectors("m", ("lives_in", "works_at", "drinks"), axes[:3])
    words = vocabulary(predicates.names, PREDICATE_WORDS, STOPWORDS)

    def near(job: float, home: float, other: float = 0.0) -> np.ndarray:
        return np.array([home, job, 0.0, other], dtype=np.float32) * 3  # any length

    candidates = {
        "faint": ("Ana met Acme", near(0.2, 0.1, 0.97)),  # nearer works_at, by less
        "clear": ("Ana signed with Acme", near(0.5, 0.1, 0.8)),
        "home": ("Ana rents in Oslo", near(0.1, 0.6, 0.7)),
        "bo": ("Bo signed with Acme", near(0.9, 0.0, 0.1)),  # about someone else
    }
    query = ["which", "company", "employs", "ana"]
    found = meaning_facts(query, {"works_at": "employs"}, words, predicates, candidates,
                          STOPWORDS)  # fmt: skip
    why = ("its meaning is nearest works_at (by 0.42 of cosine over other predicates; the "
           "query asks 'employs')")  # fmt: skip
    assert found == {"clear": why}
    home = meaning_facts(["where", "ana", "live"], {"lives_in": "live"}, words, predicates,
                         candidates, STOPWORDS)  # fmt: skip
    assert set(home) == {"home"}
    drink = meaning_facts(["what", "ana", "drink"], {"drinks": "drink"}, words, predicates,
                          candidates, STOPWORDS)  # fmt: skip
    assert drink == {}  # no memory of Ana is nearer drinks than the rest
    assert meaning_facts(query, {}, words, predicates, candidates, STOPWORDS) == {}


def test_predicate_vectors_are_the_mean_of_their_words() -> None:
    said = terms(("lives_in", "works_at"), {"works_at": ("job",)}, STOPWORDS)
    assert said == {"lives_in": ("lives",), "works_at": ("works", "job")}
    made = predicate_vectors("test-topics", TopicEmbedder().embed, said)
    assert made is not None and made.names == ("lives_in", "works_at")
    home, job = _direction("topic:home"), _direction("topic:job")
    assert made.matrix[0] == pytest.approx(home, abs=1e-6)
    assert made.matrix[1] == pytest.approx(job, abs=1e-6)  # works and job: one topic
    assert predicate_vectors("m", TopicEmbedder().embed, {"lives_in": ()}) is None


ANA = ["Ana's sister is visiting in June", "Ana works at Acme", "Ana drinks green tea",
       "Ana has a dog named Rex"]  # fmt: skip


def _boosted(memory: AgentMemoryManager, query: str) -> dict[str, str]:
    """The hits the fact signal boosted: content -> why."""
    hits = memory.recall(query, 6)
    return {h.memory.content: str(s.path) for h in hits for s in h.explanation.signals
            if s.signal == "fact"}  # fmt: skip


def test_with_the_default_model_no_memory_holding_the_fact_gains_nothing(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    """Issue 43's guard, with the default model: none of Ana's memories says where she
    lives, and "her sister is visiting" is nearer lives_in than other predicates by 0.01,
    but "Ana works at Acme" is nearer lives_in than it: no clear winner, no boost (it
    had the boost; ``fact_mutual=False`` gives it again). A memory that holds the fact
    by its meaning still gains it and comes first."""
    memory = make_memory(extractor=None)
    for text in ANA:
        memory.remember(text)
    memory.flush()
    assert _boosted(memory, "where does Ana live?") == {}
    assert _boosted(memory, "who is Ana married to?") == {}  # the dog was nearest married_to
    unguarded = make_memory(extractor=None, recall=RecallSettings(fact_mutual=False))
    if not unguarded.query():  # each manager in RAM has its own store
        for text in ANA:
            unguarded.remember(text)
        unguarded.flush()
    assert set(_boosted(unguarded, "where does Ana live?")) == {ANA[0]}

    rents = memory.remember("Ana rents a small place in Oslo")
    memory.flush()
    hits = memory.recall("where does Ana live?", 3)
    assert hits[0].memory.id == rents.id
    boosted = _boosted(memory, "where does Ana live?")
    assert list(boosted) == [rents.content]
    assert boosted[rents.content].startswith("its meaning is nearest lives_in (by ")


def test_the_guard_needs_the_winner_to_be_the_predicates_nearest_memory() -> None:
    """On exact vectors: the memory nearer works_at than other predicates by the most,
    but farther from works_at than another memory of the subject, gains nothing; without
    the guard (``mutual=False``) it does."""
    axes = np.eye(4, dtype=np.float32)
    predicates = PredicateVectors("m", ("lives_in", "works_at", "drinks"), axes[:3])
    words = vocabulary(predicates.names, PREDICATE_WORDS, STOPWORDS)
    candidates = {
        "vague": ("Ana met a friend", np.array([0.0, 0.12, 0.02, 0.99], np.float32)),
        "tea": ("Ana drinks tea at work", np.array([0.0, 0.5, 0.6, 0.62], np.float32)),
    }
    query = ["which", "company", "employs", "ana"]
    asked = {"works_at": "employs"}
    assert meaning_facts(query, asked, words, predicates, candidates, STOPWORDS) == {}
    unguarded = meaning_facts(query, asked, words, predicates, candidates, STOPWORDS,
                              mutual=False)  # fmt: skip
    assert set(unguarded) == {"vague"}
    candidates["tea"] = ("Ana drinks tea", np.array([0.0, 0.05, 0.6, 0.8], np.float32))
    assert set(meaning_facts(query, asked, words, predicates, candidates, STOPWORDS)) == {"vague"}


def _employer_case() -> tuple[
    list[str], dict[str, str], dict[str, frozenset[str]], PredicateVectors
]:
    axes = np.eye(4, dtype=np.float32)
    predicates = PredicateVectors("m", ("lives_in", "works_at", "drinks"), axes[:3])
    words = vocabulary(predicates.names, PREDICATE_WORDS, STOPWORDS)
    return ["which", "company", "employs", "ana"], {"works_at": "employs"}, words, predicates


def test_a_lone_memory_about_the_subject_is_its_own_nearest() -> None:
    """The documented limit: with one memory of the subject, the guard has nothing to
    veto with, so that memory gains the boost either way."""
    query, asked, words, predicates = _employer_case()
    lone = {"vague": ("Ana met a friend", np.array([0.0, 0.12, 0.02, 0.99], np.float32))}
    for mutual in (True, False):
        found = meaning_facts(query, asked, words, predicates, lone, STOPWORDS, mutual=mutual)
        assert set(found) == {"vague"}


def test_a_memory_as_near_the_predicate_as_the_winner_does_not_veto_it() -> None:
    """Only a memory strictly nearer the asked predicate vetoes the widest margin."""
    query, asked, words, predicates = _employer_case()
    candidates = {
        "winner": ("Ana signed with Acme", np.array([0.0, 0.6, 0.0, 0.8], np.float32)),
        "tied": ("Ana drinks tea at Acme", np.array([0.0, 0.6, 0.8, 0.0], np.float32)),
    }
    found = meaning_facts(query, asked, words, predicates, candidates, STOPWORDS)
    assert set(found) == {"winner"}

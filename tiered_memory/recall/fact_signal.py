"""The fact signal of recall: a query that asks about a single-valued predicate ("where
does Ana **live**?": ``lives_in``) favours the memories holding that fact as it holds
(now; with ``as_of``, then).

A single-valued predicate (``MemoryConfig.single_valued``) is expressed by the words of
its name (``lives_in``: ``lives``) and by the words ``MemoryConfig.predicate_words``
gives it (default :data:`PREDICATE_WORDS`: ``lives_in`` <- ``moved``, ``home``,
``apartment``, ...). Words are compared by stem: one common English ending (``ing``,
``ed``, ``es``, ``s``, ``e``) is dropped from each, so ``live``, ``lives``, ``lived``
and ``living`` are one. A query names the predicates one of its words expresses;
nothing else is guessed, and a query naming none gets no fact signal.

Two kinds of memory hold the fact asked:

- **By a relation**: the query names an entity that is the subject of such a relation;
  the memories asserting ``(entity, predicate, *)`` valid at the moment recall asks
  about gain ``RecallSettings.fact_share`` (score fusion), so the memory holding the
  fact outranks the entity's other memories, whose similarity to the question is often
  as high ("where does Ana work?" is close to "Ana lives in Paris" for a small
  embedding model).
- **By its words** (:func:`word_facts`), for a predicate no relation answered (memories
  stored without ``relations=``): a candidate of the searches whose own words express
  the predicate and that shares another word with the query (the subject: "Ana") gains
  ``fact_words`` of that share. The searches already applied the filters (current
  memories, or those true at ``as_of``), so among Ana's memories the one saying where
  she lives comes first.
- **By its meaning** (:func:`meaning_facts`), for a candidate about the subject whose
  words express no asked predicate ("Ana signed a contract with Acme"): its vector is
  compared with each single-valued predicate's (:class:`PredicateVectors`: the mean of
  the vectors of the words expressing it, from the recall's own embedding model); when
  no candidate holds the fact by its words, the one nearer an asked predicate than
  every other predicate by the most gains ``fact_vectors`` of the share, when that
  predicate is nearer it than any other memory of the subject too (``fact_mutual``).
  No word list needs the memory's wording.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from persistence import GraphStorage, graph_records

_ENDINGS = ("ing", "ed", "es", "s", "e")
_WORDS = re.compile(r"\w+")

# one form of each word: the others share its stem (live, lives, lived, living)
_HOME = ("live", "reside", "resident", "residence", "home", "house", "apartment", "flat",
         "address", "moved", "move", "relocated", "relocate", "settled", "hometown",
         "neighbourhood", "neighborhood")  # fmt: skip
_JOB = ("work", "job", "employer", "employed", "employs", "employee", "employment", "hired",
        "hire", "joined", "company", "firm", "workplace", "career", "colleague")  # fmt: skip
PREDICATE_WORDS: Mapping[str, tuple[str, ...]] = {
    "lives_in": _HOME,
    "based_in": ("based", "base", "headquarters", "headquartered"),
    "located_in": ("located", "location", "situated"),
    "works_at": _JOB,
    "works_for": _JOB,
    "employed_by": _JOB,
    "reports_to": ("report", "manager", "boss", "supervisor", "manages"),
    "married_to": ("married", "marry", "wife", "husband", "spouse", "wedding", "wed"),
}
"""``MemoryConfig.predicate_words``' default: words that express each default
single-valued predicate besides its name's (docs/concepts/facts-over-time.md)."""


def stem(word: str) -> str:
    """``word`` without one common English ending, if at least three letters remain."""
    for ending in _ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            return word[: -len(ending)]
    return word


def tokens(text: str) -> list[str]:
    """The words of ``text``, lower case and without accents (as entity names match)."""
    if len(text) > _KEPT_TEXT:
        return _WORDS.findall(graph_records.normalise(text))
    return list(_tokens(text))


_KEPT_TEXT = 2000
"""Texts up to this long have their words kept (:func:`_tokens`): at most ~16 MiB."""


@functools.lru_cache(maxsize=8192)
def _tokens(text: str) -> tuple[str, ...]:
    """:func:`tokens`, kept: recall splits the same aliases and contents call after call."""
    return tuple(_WORDS.findall(graph_records.normalise(text)))


def terms(
    predicates: Iterable[str], words: Mapping[str, Collection[str]], stopwords: Collection[str]
) -> dict[str, tuple[str, ...]]:
    """Predicate -> the words expressing it, as written: its name's words (stopwords and
    words of two letters aside), then those ``words`` gives it."""
    found: dict[str, tuple[str, ...]] = {}
    for predicate in predicates:
        own = [part for part in predicate.split("_") if part not in stopwords and len(part) > 2]
        found[predicate] = tuple(dict.fromkeys((*own, *words.get(predicate, ()))))
    return found


def vocabulary(
    predicates: Iterable[str], words: Mapping[str, Collection[str]], stopwords: Collection[str]
) -> dict[str, frozenset[str]]:
    """Predicate -> the stems of the words expressing it (its :func:`terms`)."""
    return {
        predicate: frozenset(stem(graph_records.normalise(w)) for w in said)
        for predicate, said in terms(predicates, words, stopwords).items()
    }


def asked_predicates(
    words: Collection[str],
    predicates: Collection[str] | Mapping[str, Collection[str]],
    stopwords: Collection[str],
) -> dict[str, str]:
    """The predicates a query of ``words`` names: predicate -> the query word that names
    it. ``predicates``: names (expressed by their own words) or a :func:`vocabulary`."""
    if not isinstance(predicates, Mapping):
        predicates = vocabulary(predicates, {}, stopwords)
    stems: dict[str, str] = {}
    for word in words:
        if word not in stopwords and len(word) > 2:
            stems.setdefault(stem(word), word)
    asked: dict[str, str] = {}
    for predicate in sorted(predicates):
        for word_stem in sorted(predicates[predicate] & stems.keys(), key=stems.__getitem__):
            asked[predicate] = stems[word_stem]
            break
    # the predicates whose own name the query uses first ("work": works_at, then
    # employed_by): the explanation names the first one a memory expresses
    named = {p for p, word in asked.items() if stem(word) in map(stem, p.split("_"))}
    return {p: asked[p] for p in sorted(asked, key=lambda p: p not in named)}


def word_facts(
    query_words: Collection[str],
    asked: Mapping[str, str],
    words: Mapping[str, frozenset[str]],
    contents: Mapping[str, str],
    stopwords: Collection[str],
) -> dict[str, str]:
    """The memories of ``contents`` (id -> text) whose words express a predicate of
    ``asked`` (predicate -> the query word naming it; ``words``: a :func:`vocabulary`)
    and that share another word with the query (its subject): memory id -> why, for the
    explanation (``"'moved' expresses lives_in (the query asks 'live')"``)."""
    subject = _subject(query_words, asked, words, stopwords)
    found: dict[str, str] = {}
    if not asked or not subject:
        return found
    for memory_id, content in contents.items():
        words_of = [(w, stem(w)) for w in tokens(content) if w not in stopwords]
        if subject.isdisjoint(s for _, s in words_of):
            continue  # about something else
        for predicate in asked:
            said = next((w for w, s in words_of if s in words[predicate]), None)
            if said is not None:
                why = f"'{said}' expresses {predicate} (the query asks '{asked[predicate]}')"
                found[memory_id] = why
                break
    return found


def _subject(
    query_words: Collection[str],
    asked: Mapping[str, str],
    words: Mapping[str, frozenset[str]],
    stopwords: Collection[str],
) -> set[str]:
    """The stems of the query's words that name no asked predicate (its subject: "ana")."""
    expressing = frozenset().union(*(words[p] for p in asked))
    return {stem(w) for w in query_words if w not in stopwords and len(w) > 1} - expressing


def _about(subject: set[str], content: str, stopwords: Collection[str]) -> bool:
    """True when ``content`` shares a word (by stem) with the query's subject."""
    return not subject.isdisjoint(stem(w) for w in tokens(content) if w not in stopwords)


@dataclass(frozen=True, slots=True)
class PredicateVectors:
    """Each single-valued predicate's vector (``names[i]`` -> ``matrix[i]``, unit
    length): the normalised mean of its :func:`terms`' vectors, from ``model_id``."""

    model_id: str
    names: tuple[str, ...]
    matrix: np.ndarray


def predicate_vectors(
    model_id: str,
    embed: Callable[[Sequence[str]], np.ndarray],
    said: Mapping[str, Sequence[str]],
) -> PredicateVectors | None:
    """:class:`PredicateVectors` for the predicates of ``said`` (predicate -> its words,
    :func:`terms`), each distinct word embedded once by ``embed``; ``None`` without one."""
    names = tuple(p for p in sorted(said) if said[p])
    distinct = list(dict.fromkeys(w for p in names for w in said[p]))
    if not distinct:
        return None
    vectors = np.asarray(embed(distinct), dtype=np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    at = {w: i for i, w in enumerate(distinct)}
    rows = np.stack([vectors[[at[w] for w in said[p]]].mean(axis=0) for p in names])
    rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    return PredicateVectors(model_id, names, rows)


def meaning_facts(
    query_words: Collection[str],
    asked: Mapping[str, str],
    words: Mapping[str, frozenset[str]],
    predicates: PredicateVectors,
    candidates: Mapping[str, tuple[str, np.ndarray]],
    stopwords: Collection[str],
    *,
    mutual: bool = True,
) -> dict[str, str]:
    """The memory of ``candidates`` (id -> (text, vector)) that holds a fact of ``asked``
    by its meaning: among those sharing a word with the query's subject and whose vector
    is nearer a predicate of ``asked`` than every other predicate, the one nearer by the
    most (no absolute threshold: cosines differ from model to model). With ``mutual``,
    only when that predicate is also nearer it than any other of the subject's memories
    (each the other's nearest): a memory about nothing in particular wins the margin by
    a hair ("Ana's sister is visiting in June" for "where does Ana live?") while a
    memory holding another fact of Ana's is nearer the predicate itself. Memory id ->
    why, for the explanation; empty when none is nearer."""
    subject = _subject(query_words, asked, words, stopwords)
    index = {p: i for i, p in enumerate(predicates.names)}
    mine = [index[p] for p in asked if p in index]  # a tie: the one the query names first
    others = [i for i, p in enumerate(predicates.names) if p not in asked]
    about = [m for m, (content, _) in candidates.items() if _about(subject, content, stopwords)]
    if not mine or not about:
        return {}
    vectors = np.stack([np.asarray(candidates[m][1], dtype=np.float32) for m in about])
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    cosines = vectors @ predicates.matrix.T
    nearer: list[tuple[float, str, int]] = []  # (margin, memory id, predicate)
    for row, memory_id in enumerate(about):
        nearest = max(mine, key=lambda i: cosines[row, i])
        rival = max((float(cosines[row, i]) for i in others), default=-1.0)
        margin = float(cosines[row, nearest]) - rival
        if margin > 0:
            nearer.append((margin, memory_id, nearest))
    if not nearer:
        return {}
    margin, memory_id, nearest = max(nearer)  # a tie: the larger (newer) id
    if mutual and cosines[:, nearest].max() > cosines[about.index(memory_id), nearest]:
        return {}  # another memory of the subject is nearer the predicate: no clear winner
    predicate = predicates.names[nearest]
    return {memory_id: f"its meaning is nearest {predicate} (by {margin:.2f} of cosine over "
                       f"other predicates; the query asks '{asked[predicate]}')"}  # fmt: skip


def fact_memories(
    records: GraphStorage,
    named: dict[str, str],
    asked: dict[str, str],
    at: int | None,
) -> tuple[dict[str, str], frozenset[str]]:
    """The memories asserting a relation ``entity -predicate-> *`` valid at ``at``
    (``None``: now) for each entity of ``named`` (id -> the alias the query used) and
    predicate of ``asked``: memory id -> the fact, for the explanation; and the
    predicates such a relation answered. In the caller's snapshot."""
    found: dict[str, str] = {}
    answered: set[str] = set()
    if not asked:
        return found, frozenset()
    for eid, alias in named.items():
        for predicate, word in asked.items():
            held = records.held_relations(eid, predicate, at)
            if not held:
                continue
            answered.add(predicate)
            objects = records.entities(sorted({r.object_id for r, _ in held}))
            for relation, asserted_by in held:
                obj = objects.get(relation.object_id)
                fact = f"'{alias}' {predicate} '{obj.name if obj else relation.object_id}'"
                for memory_id in asserted_by:
                    found.setdefault(memory_id, f"{fact} (the query asks '{word}')")
    return found, frozenset(answered)

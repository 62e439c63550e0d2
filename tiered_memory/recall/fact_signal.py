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
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterable, Mapping

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


def vocabulary(
    predicates: Iterable[str], words: Mapping[str, Collection[str]], stopwords: Collection[str]
) -> dict[str, frozenset[str]]:
    """Predicate -> the stems of the words expressing it: its name's words (stopwords
    and words of two letters aside) and those ``words`` gives it."""
    found: dict[str, frozenset[str]] = {}
    for predicate in predicates:
        own = [part for part in predicate.split("_") if part not in stopwords and len(part) > 2]
        found[predicate] = frozenset(
            stem(graph_records.normalise(w)) for w in (*own, *words.get(predicate, ()))
        )
    return found


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
    expressing = frozenset().union(*(words[p] for p in asked))
    subject = {stem(w) for w in query_words if w not in stopwords and len(w) > 1}
    subject -= expressing
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

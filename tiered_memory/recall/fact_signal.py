"""The fact signal of recall: a query that names an entity and one of its single-valued
relations ("where does Ana **live**?": Ana, ``lives_in``) favours the memories asserting
that fact as it holds (now; with ``as_of``, then).

A single-valued predicate (``MemoryConfig.single_valued``) is named when a query word
and a word of the predicate (``lives_in``: ``lives``) share a stem: one common English
ending (``ing``, ``ed``, ``es``, ``s``, ``e``) is dropped from each, so ``live``,
``lives``, ``lived`` and ``living`` all name ``lives_in``. Nothing else is guessed: a
query without such a word, or naming no entity that is the subject of such a relation,
adds nothing. The memories found are the ones asserting ``(entity, predicate, *)``
valid at the moment recall asks about; each gains ``RecallSettings.fact_share`` (score
fusion), so the memory holding the fact asked about outranks the entity's other
memories, whose similarity to the question is often as high ("where does Ana work?" is
close to "Ana lives in Paris" for a small embedding model).
"""

from __future__ import annotations

from collections.abc import Collection

from persistence import GraphStorage

_ENDINGS = ("ing", "ed", "es", "s", "e")


def stem(word: str) -> str:
    """``word`` without one common English ending, if at least three letters remain."""
    for ending in _ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            return word[: -len(ending)]
    return word


def asked_predicates(
    words: Collection[str], predicates: Collection[str], stopwords: Collection[str]
) -> dict[str, str]:
    """The predicates of ``predicates`` a query of ``words`` names: predicate -> the
    query word that names it."""
    stems: dict[str, str] = {}
    for word in words:
        if word not in stopwords and len(word) > 2:
            stems.setdefault(stem(word), word)
    asked: dict[str, str] = {}
    for predicate in sorted(predicates):
        for part in predicate.split("_"):
            if part and part not in stopwords and stem(part) in stems:
                asked[predicate] = stems[stem(part)]
                break
    return asked


def fact_memories(
    records: GraphStorage,
    named: dict[str, str],
    asked: dict[str, str],
    at: int | None,
) -> dict[str, str]:
    """The memories asserting a relation ``entity -predicate-> *`` valid at ``at``
    (``None``: now) for each entity of ``named`` (id -> the alias the query used) and
    predicate of ``asked``: memory id -> the fact, for the explanation. In the caller's
    snapshot."""
    found: dict[str, str] = {}
    if not asked:
        return found
    for eid, alias in named.items():
        for predicate, word in asked.items():
            held = records.held_relations(eid, predicate, at)
            if not held:
                continue
            objects = records.entities(sorted({r.object_id for r, _ in held}))
            for relation, asserted_by in held:
                obj = objects.get(relation.object_id)
                fact = f"'{alias}' {predicate} '{obj.name if obj else relation.object_id}'"
                for memory_id in asserted_by:
                    found.setdefault(memory_id, f"{fact} (the query asks '{word}')")
    return found

"""The graph signal of recall: memories about the entities a query names.

Entities are found in the query through the FTS5 index over their names and aliases
(``entity_fts``), then kept only when a whole alias occurs in the query, word for word
(case and accents aside). Each such entity pulls in the memories that name it, with
weight ``1 / ln(2 + n)`` for an entity ``n`` memories name (a name in every other
memory, such as a conversation's speaker, tells little); with ``graph_hops=1`` its
neighbours' memories follow at ``graph_hop_decay`` times their own weight. A memory's
graph score is the sum over the entities that brought it; each candidate keeps the
strongest path for its explanation (``'Caroline' -mentioned_with- 'adoption agency',
1 hop``). Entities named by more than ``HUB_MEMORIES`` memories bring none (they would
flood the candidates), but still lead to their neighbours.

The same look-up of named entities serves the fact signal
(:mod:`tiered_memory.recall.fact_signal`): the memories asserting a single-valued
relation of a named entity that the query names too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from persistence import GraphStorage, Memory, MemoryFilter, Relation
from tiered_memory.recall.fact_signal import asked_predicates, fact_memories, tokens
from tiered_memory.recall.settings import STOPWORDS, RecallSettings

HUB_MEMORIES = 200
NEIGHBOURS_PER_ENTITY = 20
MEMORIES_PER_NEIGHBOUR = 50
ALIAS_ROWS = 500


@dataclass(frozen=True, slots=True)
class GraphCandidates:
    """Memory ids by graph score (best first) and each one's path, for the explanation;
    ``facts``: the fact signal's memories, each with the fact it asserts; ``answered``:
    the predicates whose relations found them."""

    ranked: list[tuple[str, float]]
    paths: dict[str, str]
    facts: dict[str, str] = field(default_factory=dict)
    answered: frozenset[str] = frozenset()


_tokens = tokens


def _occurs(alias: list[str], words: list[str]) -> bool:
    n = len(alias)
    return n > 0 and any(words[i : i + n] == alias for i in range(len(words) - n + 1))


def graph_candidates(
    records: GraphStorage,
    query: str,
    where: MemoryFilter,
    settings: RecallSettings,
    load: Callable[[list[str]], dict[str, Memory]],
    now: int,
    single_valued: Collection[str] | Mapping[str, frozenset[str]] = (),
) -> GraphCandidates:
    """The graph signal's candidates for ``query`` (empty when no entity is named); the
    hops follow the relations valid at ``where.as_of`` when recall asks about a moment,
    else those valid ``now``. With ``settings.fact_share`` on, also the fact signal's
    memories: those asserting a relation of ``single_valued`` (names, or a
    :func:`~tiered_memory.recall.fact_signal.vocabulary`) the query names, of an entity
    it names."""
    words = tokens(query)
    probe = [w for w in dict.fromkeys(words) if w not in STOPWORDS and len(w) > 1]
    if not probe:
        return GraphCandidates([], {})
    if not records.may_name_entities():
        return GraphCandidates([], {})  # no entity at all: no snapshot, no round trip
    scores: dict[str, float] = {}
    paths: dict[str, tuple[float, str]] = {}

    def credit(memory_id: str, amount: float, path: str) -> None:
        scores[memory_id] = scores.get(memory_id, 0.0) + amount
        if amount > paths.get(memory_id, (0.0, ""))[0]:
            paths[memory_id] = (amount, path)

    with records.engine.snapshot():  # one snapshot for every read below
        if not records.has_graph():
            return GraphCandidates([], {})
        named: dict[str, str] = {}
        for eid, alias in records.entities_named_in(probe, ALIAS_ROWS):
            if eid not in named and _occurs(tokens(alias), words):
                named[eid] = alias
        if not named:
            return GraphCandidates([], {})
        facts: dict[str, str] = {}
        answered: frozenset[str] = frozenset()
        if settings.fact_on:
            asked = asked_predicates(words, single_valued, STOPWORDS)
            facts, answered = fact_memories(records, named, asked, where.as_of)
        if settings.graph_on:  # the named entities' memories: one look-up for them all
            naming = records.memories_naming_each(list(named), HUB_MEMORIES, HUB_MEMORIES)
            for eid, alias in named.items():
                if eid in naming:
                    n, memory_ids = naming[eid]
                    weight = 1.0 / math.log(2 + n)
                    for memory_id in memory_ids:
                        credit(memory_id, weight, f"'{alias}' (named in the query)")
        if settings.graph_hops and settings.graph_on:
            at = now if where.as_of is None else where.as_of
            nears: dict[str, dict[str, Relation]] = {}
            for eid in named:
                steps = records.walk(eid, 1, at, NEIGHBOURS_PER_ENTITY, 2 * NEIGHBOURS_PER_ENTITY)
                nears[eid] = {s.entity_id: s.via[0] for s in steps if s.entity_id not in named}
            # Every neighbour of every named entity in one look-up each (entities, memories).
            others = list(dict.fromkeys(o for near in nears.values() for o in near))
            entities = records.entities(others) if others else {}
            reach = records.memories_naming_each(others, HUB_MEMORIES, MEMORIES_PER_NEIGHBOUR)
            for eid, alias in named.items():
                for other, relation in nears[eid].items():
                    if other not in reach or other not in entities:
                        continue
                    n, memory_ids = reach[other]
                    weight = settings.graph_hop_decay / math.log(2 + n)
                    path = (f"'{alias}' -{relation.predicate}- "
                            f"'{entities[other].name}', 1 hop")  # fmt: skip
                    for memory_id in memory_ids:
                        credit(memory_id, weight, path)
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    if where != MemoryFilter():
        memories = load(list(dict.fromkeys([*(m for m, _ in ranked), *facts])))
        ranked = [(m, s) for m, s in ranked if m in memories and where.accepts(memories[m])]
        facts = {m: f for m, f in facts.items() if m in memories and where.accepts(memories[m])}
    ranked = ranked[: settings.depth]
    return GraphCandidates(ranked, {m: paths[m][1] for m, _ in ranked}, facts, answered)

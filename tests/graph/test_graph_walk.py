"""Traversal against a reference: ``neighbors`` and ``path`` on random small graphs (with
weights, confidences, predicates and validity) agree with a plain enumeration of every
simple path in Python, under the documented rules:

- each entity follows its ``fanout`` best relations (weight, then confidence, then id,
  descending/descending/ascending) valid at ``as_of`` (of ``predicates``) per direction;
- a path never visits an entity twice;
- each entity is reached by its shallowest path, of those the best supported (sum of
  weights), then the one with the smallest relation ids;
- neighbours come nearest first, then best supported, then by id; at most ``limit``.

The graphs are small enough that the walk's work bound (``cap``) never binds."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import pytest

from persistence.graph_records import Relation
from tiered_memory import AgentMemoryManager

NAMES = [f"E{n}" for n in range(12)]
PREDICATES = ["knows", "likes", "owns"]
TIMES = [100, 200, 300, 400]


def _build(rng: random.Random, memory: AgentMemoryManager) -> None:
    sources: list[str | None] = [memory.remember(f"note {n}").id for n in range(4)]
    for _ in range(45):
        s, o = rng.sample(NAMES, 2)
        valid_from = rng.choice([None, *TIMES])
        valid_to = rng.choice(
            [None, None, *(t for t in TIMES if valid_from is None or t > valid_from)]
        )
        supporters = rng.sample(sources, rng.randint(0, 3))
        for source in supporters or [None]:
            memory.graph.relate(
                s, rng.choice(PREDICATES), o, confidence=rng.choice([0.5, 1.0]),
                valid_from=valid_from, valid_to=valid_to, source=source,
            )  # fmt: skip


def _relations(memory: AgentMemoryManager) -> list[Relation]:
    found = {r.id: r for name in NAMES for r in memory.graph.relations(name)}
    return list(found.values())


def _follows(
    relations: Sequence[Relation], at: int, predicates: Sequence[str] | None, fanout: int
) -> dict[str, list[tuple[Relation, str]]]:
    """Entity id -> the (relation, other end) pairs it follows."""
    valid = [
        r for r in relations
        if r.holds_at(at) and (predicates is None or r.predicate in predicates)
    ]  # fmt: skip
    best = sorted(valid, key=lambda r: (-r.weight, -r.confidence, r.id))
    ends = {e for r in relations for e in (r.subject_id, r.object_id)}
    return {
        e: [(r, r.object_id) for r in best if r.subject_id == e][:fanout]
        + [(r, r.subject_id) for r in best if r.object_id == e][:fanout]
        for e in ends
    }


def _paths(
    follows: dict[str, list[tuple[Relation, str]]], start: str, depth: int
) -> Iterator[tuple[str, tuple[Relation, ...]]]:
    """Every simple path from ``start`` of 1..depth hops: (end, relations)."""
    stack: list[tuple[list[str], tuple[Relation, ...]]] = [([start], ())]
    while stack:
        visited, via = stack.pop()
        if via:
            yield visited[-1], via
        if len(via) < depth:
            for r, other in follows.get(visited[-1], []):
                if other not in visited:
                    stack.append(([*visited, other], (*via, r)))


def _key(via: tuple[Relation, ...]) -> tuple[int, float, list[str]]:
    return len(via), -sum(r.weight for r in via), [r.id for r in via]


def _reference(
    relations: Sequence[Relation], start: str, depth: int, at: int,
    predicates: Sequence[str] | None, fanout: int, limit: int,
) -> list[tuple[str, int, list[str]]]:  # fmt: skip
    best: dict[str, tuple[Relation, ...]] = {}
    for end, via in _paths(_follows(relations, at, predicates, fanout), start, depth):
        if end != start and (end not in best or _key(via) < _key(best[end])):
            best[end] = via
    ranked = sorted(best.items(), key=lambda kv: (len(kv[1]), _key(kv[1])[1], kv[0]))
    return [(e, len(via), [r.id for r in via]) for e, via in ranked[:limit]]


@pytest.mark.parametrize("seed", range(6))
def test_neighbors_and_path_agree_with_every_simple_path(seed: int) -> None:
    rng = random.Random(seed)
    memory = AgentMemoryManager.in_memory(embedder=None, extractor=None, embed_in_background=False)
    try:
        _build(rng, memory)
        relations = _relations(memory)
        assert len({r.weight for r in relations}) > 1  # supports differ: ranking is tested
        ids = {e.name: e.id for e in memory.graph.entities(limit=100)}
        for _ in range(40):
            start = rng.choice(sorted(ids))
            depth, fanout, limit = rng.randint(1, 3), rng.randint(1, 4), rng.randint(1, 15)
            at = rng.choice([50, *TIMES, 500])
            predicates = rng.choice([None, rng.sample(PREDICATES, rng.randint(1, 2))])
            got = memory.graph.neighbors(start, depth, predicates, limit, as_of=at, fanout=fanout)
            want = _reference(relations, ids[start], depth, at, predicates, fanout, limit)
            assert [(n.entity.id, n.depth, [r.id for r in n.via]) for n in got] == want
            for n in got:  # each hop joins the entity before it to the one after
                chain = [ids[start]]
                for r in n.via:
                    assert chain[-1] in (r.subject_id, r.object_id)
                    chain.append(r.object_id if r.subject_id == chain[-1] else r.subject_id)
                assert chain[-1] == n.entity.id and len(set(chain)) == len(chain)

            end = rng.choice(sorted(ids))
            path = memory.graph.path(start, end, depth, as_of=at)
            if end == start:
                assert path is not None and path.length == 0
                continue
            follows = _follows(relations, at, None, 200)
            hits = [via for e, via in _paths(follows, ids[start], depth) if e == ids[end]]
            if not hits:
                assert path is None
            else:
                assert path is not None
                assert [r.id for r in path.relations] == [r.id for r in min(hits, key=_key)]
                assert path.entities[0].id == ids[start] and path.entities[-1].id == ids[end]
    finally:
        memory.shutdown()

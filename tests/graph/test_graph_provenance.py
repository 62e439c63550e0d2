"""Provenance reads: which memories assert a relation (``graph.asserted_by``) and what one
memory asserts (``graph.facts_of``), the same on SQLite and PostgreSQL; an agent-scoped
handle sees only its own memories' provenance."""

from __future__ import annotations

from pathlib import Path

import pytest

from persistence import InvalidTypeError
from tiered_memory import AgentMemoryManager


@pytest.mark.slow  # 1.0 s measured on a busy machine
def test_asserted_by_and_facts_of_follow_the_memories(memory: AgentMemoryManager) -> None:
    a = memory.remember("Ann works at Acme", relations=[("Ann", "works_at", "Acme")])
    both = [("Ann", "works_at", "Acme"), ("Ann", "lives_in", "Oslo")]
    b = memory.remember("Ann is at Acme since May", relations=both)
    direct = memory.graph.relate("Bob", "knows", "Ann")
    works = next(r for r in memory.graph.relations("Ann") if r.predicate == "works_at")
    lives = next(r for r in memory.graph.relations("Ann") if r.predicate == "lives_in")
    found = memory.graph.asserted_by([works, lives.id, direct])
    assert found == {works.id: sorted([a.id, b.id]), lives.id: [b.id]}  # direct: none
    entities, relations = memory.graph.facts_of(b.id)
    assert sorted(e.name for e in entities) == ["Acme", "Ann", "Oslo"]
    assert sorted(r.id for r in relations) == sorted([works.id, lives.id])
    memory.forget(a.id)
    assert memory.graph.asserted_by([works]) == {works.id: [b.id]}
    assert memory.graph.facts_of(a.id) == ([], [])
    assert memory.graph.facts_of("no such memory") == ([], [])
    assert memory.graph.asserted_by([]) == {}


def test_bad_arguments_are_refused(memory: AgentMemoryManager) -> None:
    with pytest.raises(InvalidTypeError):
        memory.graph.asserted_by("rel_1")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        memory.graph.asserted_by([1])  # type: ignore[list-item]
    with pytest.raises(InvalidTypeError):
        memory.graph.facts_of(None)  # type: ignore[arg-type]


# SQLite only: agent-scoped graph views of a file: the graph SQL carries the scope
def test_an_agent_sees_only_its_own_provenance(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    with AgentMemoryManager.open(path, embedder=None) as memory:
        mine = memory.remember("Ann works at Acme", agent_id="a1",
                               relations=[("Ann", "works_at", "Acme")])  # fmt: skip
        theirs = memory.remember("Ann works at Acme, says b2", agent_id="b2",
                                 relations=[("Ann", "works_at", "Acme")])  # fmt: skip
        works = memory.graph.relations("Ann")[0]
        assert memory.graph.asserted_by([works]) == {works.id: sorted([mine.id, theirs.id])}
    with AgentMemoryManager.open(path, embedder=None, agent_id="a1") as scoped:
        assert scoped.graph.asserted_by([works]) == {works.id: [mine.id]}
        assert scoped.graph.facts_of(theirs.id) == ([], [])
        assert [r.id for r in scoped.graph.facts_of(mine.id)[1]] == [works.id]

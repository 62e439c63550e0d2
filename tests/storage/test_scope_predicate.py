"""The one scope predicate (persistence.stores.scope): built once, each engine naming its
column and placeholder; what a scope refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from persistence import InvalidInputError, Memory, MemoryFilter, Tier, UnsupportedOperationError
from persistence.sqlite import SQLiteStore
from persistence.stores.scope import WHOLE, Scope


def test_the_predicate_in_each_dialect() -> None:
    assert Scope.of("a").condition() == ("agent_id = ?", ("a",))
    assert Scope.of("a").condition("scope", "%s") == ("scope = %s", ("a",))
    assert Scope.of("a").and_("t.agent_id") == (" AND t.agent_id = ?", ("a",))
    assert Scope.of(None) == Scope.of("") == WHOLE
    assert WHOLE.condition() == ("1 = 1", ()) and WHOLE.and_() == ("", ())


def test_what_a_scope_refuses() -> None:
    theirs = Memory.create("b's", Tier.SCRATCHPAD, agent_id="b")
    with pytest.raises(InvalidInputError, match="taken in this file"):
        Scope.of("a").refuse_taken("scratchpad key 'k'", theirs)
    Scope.of("b").refuse_taken("scratchpad key 'k'", theirs)  # its own
    WHOLE.refuse_taken("scratchpad key 'k'", theirs)  # the operator's handle
    with pytest.raises(UnsupportedOperationError, match="cannot back it up"):
        Scope.of("a").refuse_file_op("back it up")
    WHOLE.refuse_file_op("back it up")


def test_a_scoped_file_searches_only_its_agents_memories(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    with SQLiteStore(path) as operator:
        for agent in ("a", "b"):
            memory = Memory.create(f"vault code of {agent}", Tier.EPISODIC, agent_id=agent)
            operator.memories.put_memory(memory)
            operator.indexes.set_embeddings([(Tier.EPISODIC, memory.id, [1.0, 0.0])])
        ids = {m.agent_id: m.id for m in operator.memories.query(Tier.EPISODIC)}
    with SQLiteStore(path, scope="a") as scoped:
        indexes = scoped.indexes
        assert [m for m, _ in indexes.keyword_search(["vault"], 10)] == [ids["a"]]
        assert [m for m, _ in indexes.vector_search([1.0, 0.0], 10)] == [ids["a"]]
        theirs = MemoryFilter(agent_id="b")  # another agent's memories: nothing
        assert indexes.keyword_search(["vault"], 10, where=theirs) == []
        assert indexes.vector_search([1.0, 0.0], 10, where=theirs) == []
        assert set(indexes.keyword_parts(["vault"], list(ids.values()))) == {ids["a"]}

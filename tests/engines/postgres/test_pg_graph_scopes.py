"""An operator's (unscoped) handle and an agent's handle name the same entity: each
links its memories to an entity of its own scope (the knowledge graph keeps the writer's
scope, migrations/postgres/v007), and neither write fails on the other's rows."""

from __future__ import annotations

import pytest

from tests.support.worker import HashEmbedder
from tiered_memory import AgentMemoryManager

pytestmark = pytest.mark.postgres


def _open(url: str, agent: str | None = None) -> AgentMemoryManager:
    return AgentMemoryManager.open(
        url, agent_id=agent, embedder=HashEmbedder("scopes", 16), embed_in_background=False
    )


def test_the_operator_names_an_entity_an_agent_already_has(pg_url: str) -> None:
    with _open(pg_url, "agent-a") as agent, _open(pg_url) as operator:
        mine = agent.remember("Cy likes green tea", entities=["Cy"])
        theirs = operator.remember("Cy moved to Lisbon", entities=["Cy"])  # failed: FK
        again = operator.remember("Cy plays chess", entities=["Cy"])
        named = operator.graph.facts_of(theirs.id)[0]
        assert [e.name for e in named] == ["Cy"]
        assert [e.id for e in operator.graph.facts_of(again.id)[0]] == [named[0].id]
        # the agent's entity still holds only the agent's memory
        assert [m.id for m in agent.graph.memories_about("Cy")] == [mine.id]
        assert [e.name for e in agent.graph.facts_of(mine.id)[0]] == ["Cy"]
        # the graph API too: the operator's relation and entity are the operator's
        operator.graph.relate("Cy", "works_at", "Acme")
        operator.graph.add_entity("Cy", description="the operator's note")
        assert [r.predicate for r in operator.graph.relations("Cy")] == ["works_at"]
        assert agent.graph.relations("Cy") == []
        assert agent.graph.entity("Cy").description is None  # type: ignore[union-attr]


def test_an_agent_names_an_entity_the_operator_already_has(pg_url: str) -> None:
    with _open(pg_url) as operator, _open(pg_url, "agent-b") as agent:
        operator.remember("Dana runs the lab", entities=["Dana"])
        mine = agent.remember("Dana sent the report", entities=["Dana"])
        assert [e.name for e in agent.graph.facts_of(mine.id)[0]] == ["Dana"]
        assert [m.id for m in agent.graph.memories_about("Dana")] == [mine.id]

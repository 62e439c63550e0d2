"""The graph signal of recall: entities named in the query bring their memories (and,
one hop away, their neighbours'), fused with keywords and vectors, explained by path."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from persistence import Tier
from persistence.graph_records import EXTRACTOR, EntityFact
from persistence.sqlite import SQLiteStore
from tests.conftest import FakeClock
from tiered_memory import AgentMemoryManager, RecallSettings

ON = RecallSettings(fusion="rrf", graph_weight=1.0)


def contents(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [h.memory.content for h in hits]


@pytest.fixture
def office(make_memory: Callable[..., AgentMemoryManager]) -> AgentMemoryManager:
    memory = make_memory(embedder=None, extractor=None, recall=ON)
    memory.remember("She leads the sales team", relations=[("Ana", "works_in", "Berlin office")])
    memory.remember("Moved to Lisbon last spring", entities=["Ana"])
    memory.remember("Nothing to do with anyone")
    return memory


def test_named_entities_and_their_neighbours_come_back_with_the_path(
    office: AgentMemoryManager,
) -> None:
    hits = office.recall("What else do we know about the berlin OFFICE?", k=5)
    assert contents(hits) == ["She leads the sales team", "Moved to Lisbon last spring"]
    first, second = (str(h.explanation) for h in hits)
    assert "graph #1: 'Berlin office' (named in the query)" in first
    assert "'Berlin office' -works_in- 'Ana', 1 hop" in second
    graph = [s for s in hits[1].explanation.signals if s.signal == "graph"]
    assert graph and graph[0].path == "'Berlin office' -works_in- 'Ana', 1 hop"


def test_the_graph_signal_can_be_weighted_off_and_hops_limited() -> None:
    for settings, expected in (
        (RecallSettings(graph_share=0.0), []),  # weighted off
        (RecallSettings(), ["She leads the sales team", "Moved to Lisbon last spring"]),
        (
            RecallSettings(fusion="rrf", graph_weight=1.0, graph_hops=0),
            ["She leads the sales team"],
        ),
        (RecallSettings(fusion="score", graph_weight=1.0, graph_share=0.0), []),
        (RecallSettings(fusion="rrf"), []),  # off in rank fusion by default
        (
            RecallSettings(fusion="score", graph_share=0.1),
            ["She leads the sales team", "Moved to Lisbon last spring"],
        ),
    ):
        memory = AgentMemoryManager.in_memory(embedder=None, extractor=None, recall=settings)
        memory.remember(
            "She leads the sales team", relations=[("Ana", "works_in", "Berlin office")]
        )
        memory.remember("Moved to Lisbon last spring", entities=["Ana"])
        assert contents(memory.recall("berlin office", k=5)) == expected, settings
        memory.shutdown()


@pytest.mark.slow  # 1.0 s measured on a busy machine
def test_filters_hold_for_graph_candidates(office: AgentMemoryManager) -> None:
    pad = office.remember("Pinned note", Tier.SCRATCHPAD, entities=["Berlin office"])
    assert pad.content in contents(office.recall("berlin office", k=5))
    assert pad.content not in contents(office.recall("berlin office", k=5, tier="episodic"))


def test_names_match_without_accents_and_only_whole(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    memory = make_memory(embedder=None, extractor=None, recall=ON)
    memory.remember("Paints every morning", entities=["Zoë Müller"])
    assert contents(memory.recall("what does zoe muller do", k=3)) == ["Paints every morning"]
    assert contents(memory.recall("what does zoe do", k=3)) == []  # half a name is not it


def test_bad_graph_settings_are_refused() -> None:
    from persistence import InvalidInputError

    with pytest.raises(InvalidInputError):
        RecallSettings(graph_hops=2)
    with pytest.raises(InvalidInputError):
        RecallSettings(graph_weight=-1)


def test_as_of_walks_the_relations_valid_then(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    """A relation ended after ``T`` still brings its neighbour's memories at
    ``as_of=T``, and no longer now (issue 43)."""
    memory = make_memory(embedder=None, extractor=None, recall=ON)
    memory.remember("They met at a conference", relations=[("Ana", "knows", "Bo")])
    chess = memory.remember("Plays chess on Sundays", entities=["Bo"])
    then = clock.now
    (relation,) = memory.graph.relations("Ana")
    memory.graph.invalidate(relation, at=then + 5000)
    clock.advance(10_000)
    past = memory.recall("What about Ana?", k=5, as_of=then)
    assert chess.id in [h.memory.id for h in past]
    hit = next(h for h in past if h.memory.id == chess.id)
    assert "'Ana' -knows- 'Bo', 1 hop" in str(hit.explanation)
    assert chess.id not in [h.memory.id for h in memory.recall("What about Ana?", k=5)]


@pytest.mark.parametrize("agent", [None, "a"])
def test_memories_naming_each_answers_as_one_look_up_per_entity(
    make_memory: Callable[..., AgentMemoryManager], agent: str | None
) -> None:
    """The graph signal's batched look-up (one statement per hop) gives what the count and
    the list per entity give: the count as memory_count counts (rows: a memory naming an
    entity as the caller said and as the extractor found counts twice), hubs and unnamed
    entities left out, each list cut to the limit; an agent's handle sees its own."""
    memory = make_memory(embedder=None, extractor=None, recall=ON, agent_id=agent)
    sizes = {"Ana": 1, "Bo": 3, "Cy": 4, "Di": 6}
    for name, n in sizes.items():
        for i in range(n):
            memory.remember(f"{name} note {i}", entities=[name])
    twice = memory.remember("Bo again", entities=["Bo"])  # and as the extractor found it:
    memory.graph.records.assert_facts(twice.id, [EntityFact("Bo")], [], EXTRACTOR, 1)
    if agent is not None:  # another agent's memory naming Cy: not counted for this one
        other = make_memory(embedder=None, extractor=None, recall=ON, agent_id="b")
        other.remember("Cy seen by nobody else", entities=["Cy"])
    records = memory.graph.records
    ids = {name: memory.graph.entity(name).id for name in sizes}  # type: ignore[union-attr]
    ids["none"] = "ent_" + "0" * 24
    for most, limit in ((5, 5), (5, 2), (4, 3), (100, 100)):
        each = records.memories_naming_each(list(ids.values()), most, limit)
        expected = {}
        for eid in ids.values():
            n = records.memory_count(eid, most + 1)
            if 0 < n <= most:
                expected[eid] = (n, records.memories_naming(eid, limit))
        assert each == expected, (most, limit)
    counts = records.memories_naming_each(list(ids.values()), 100, 100)
    # rows, on a file scoped to an agent its distinct memories (as memory_count counts)
    bo = 4 if agent is not None and isinstance(memory.store, SQLiteStore) else 5
    assert {name: counts[eid][0] for name, eid in ids.items() if eid in counts} == {
        "Ana": 1, "Bo": bo, "Cy": 4, "Di": 6,
    }  # fmt: skip
    assert records.memories_naming_each([], 5, 5) == {}

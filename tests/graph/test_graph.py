"""The knowledge graph API (``memory.graph``): entities with stable ids and aliases,
relations with validity, traversal, paths, merging, and input checks that change
nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from persistence import InvalidInputError, InvalidTypeError, MemoryNotFoundError
from persistence.graph_errors import (
    EntityNotFoundError,
    InvalidDepthError,
    InvalidEntityNameError,
    InvalidPredicateError,
    RelationNotFoundError,
)
from tests.conftest import FakeClock, file_digest
from tests.support.backends import is_postgres, snapshot
from tiered_memory import AgentMemoryManager


def names(neighbors: list) -> list[str]:  # type: ignore[type-arg]
    return [n.entity.name for n in neighbors]


def test_same_entity_twice_is_one_row_and_names_match_without_case_or_accents(
    memory: AgentMemoryManager,
) -> None:
    first = memory.graph.add_entity("Zoë  Müller", "person", "a colleague")
    again = memory.graph.add_entity("zoe muller", type="PERSON")
    assert again.id == first.id and again.description == "a colleague"
    assert memory.graph.entity("ZOË MÜLLER") == again
    assert memory.graph.entity(first.id) == again
    assert memory.graph.entity("Zoe Muller", type="place") is None
    other = memory.graph.add_entity("Zoë Müller", "place")
    assert other.id != first.id
    assert memory.graph.statistics().entities == 2


def test_ids_are_stable_across_files(make_memory: Callable[..., AgentMemoryManager]) -> None:
    one = make_memory()
    two = AgentMemoryManager.in_memory(embedder=None, embed_in_background=False)
    try:
        assert (
            one.graph.add_entity("Berlin", "place").id == two.graph.add_entity("BERLIN", "place").id
        )
    finally:
        two.shutdown()


def test_neighbors_walk_both_ways_by_depth_with_predicates_and_limit(
    memory: AgentMemoryManager,
) -> None:
    g = memory.graph
    g.relate("Caroline", "works_with", "Ana")
    g.relate("Ana", "lives_in", "Berlin")
    g.relate("Berlin", "part_of", "Germany")
    g.relate("Germany", "part_of", "Europe")
    g.relate("Mel", "knows", "Caroline")
    assert names(g.neighbors("caroline")) == ["Ana", "Mel"] or names(g.neighbors("caroline")) == [
        "Mel",
        "Ana",
    ]
    deep = g.neighbors("Caroline", depth=3)
    assert {n.entity.name: n.depth for n in deep} == {"Ana": 1, "Mel": 1, "Berlin": 2, "Germany": 3}
    germany = next(n for n in deep if n.entity.name == "Germany")
    assert [r.predicate for r in germany.via] == ["works_with", "lives_in", "part_of"]
    assert names(g.neighbors("Berlin", depth=2, predicates=["part_of"])) == ["Germany", "Europe"]
    assert len(g.neighbors("Caroline", depth=3, limit=2)) == 2


@pytest.mark.slow  # 1.4 s measured on a busy machine
def test_cycles_end_and_fanout_bounds_each_hop(memory: AgentMemoryManager) -> None:
    g = memory.graph
    for a, b in (("A", "B"), ("B", "C"), ("C", "A"), ("C", "D")):
        g.relate(a, "next", b)
    assert {n.entity.name: n.depth for n in g.neighbors("A", depth=3)} == {"B": 1, "C": 1, "D": 2}
    for n in range(30):
        g.relate("Hub", "has", f"Spoke {n}")
    assert len(g.neighbors("Hub", depth=1, fanout=5)) == 5
    assert len(g.neighbors("Hub", depth=1)) == 30


@pytest.mark.slow  # 1.2 s measured on a busy machine
def test_path_finds_the_shortest_chain(memory: AgentMemoryManager) -> None:
    g = memory.graph
    g.relate("Caroline", "works_with", "Ana")
    g.relate("Ana", "lives_in", "Berlin")
    g.relate("Caroline", "visited", "Berlin")
    g.relate("Paris", "part_of", "France")
    path = g.path("Caroline", "Berlin")
    assert path is not None and path.length == 1
    assert [e.name for e in path.entities] == ["Caroline", "Berlin"]
    assert g.path("Caroline", "France") is None
    assert g.path("Ana", "Ana") is not None


@pytest.mark.slow  # 1.2 s measured on a busy machine
def test_invalidated_relation_keeps_its_history(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    g = memory.graph
    rel = g.relate("Ana", "works_at", "Acme", valid_from=clock() - 1000)
    before = clock()
    clock.advance(10)
    ended = g.invalidate(rel, at=clock())
    assert ended.valid_to == clock() and not ended.holds_at(clock())
    assert g.neighbors("Ana") == []
    assert names(g.neighbors("Ana", as_of=before)) == ["Acme"]
    assert [r.id for r in g.relations("Ana")] == [rel.id]
    again = g.relate("Ana", "works_at", "Acme")
    assert again.id != rel.id and len(g.relations("Ana")) == 2
    with pytest.raises(RelationNotFoundError):
        g.invalidate("rel_missing")


@pytest.mark.slow  # 1.2 s measured on a busy machine
def test_merge_keeps_aliases_relations_and_provenance(memory: AgentMemoryManager) -> None:
    g = memory.graph
    m = memory.remember("Bob joined", entities=["Bob"], relations=[("Bob", "member_of", "Team")])
    keep = g.add_entity("Robert", "entity")
    g.relate("Robert", "member_of", "Team")
    drop = g.entity("Bob")
    assert drop is not None
    merged = g.merge_entities(keep, drop)
    assert set(merged.aliases) == {"Robert", "Bob"}
    assert g.entity("bob") == merged
    assert g.add_entity("BOB").id == keep.id  # the dropped name finds the kept entity
    assert [x.id for x in g.memories_about("Robert")] == [m.id]
    team = g.relations("Team")
    assert len(team) == 1 and team[0].weight == 1  # the two relations became one
    assert memory.check_integrity().ok


@pytest.mark.slow  # 1.2 s measured on a busy machine
def test_memories_about_and_provenance_safe_forget(memory: AgentMemoryManager) -> None:
    g = memory.graph
    g.add_entity("Berlin", "entity")
    one = memory.remember("Ana moved to Berlin", relations=[("Ana", "lives_in", "Berlin")])
    two = memory.remember("Ana likes tea", entities=["Ana"])
    assert {m.id for m in g.memories_about("Ana")} == {one.id, two.id}
    memory.forget(one.id)
    assert g.neighbors("Ana") == []  # the relation only memory one asserted is gone
    assert g.entity("Ana") is not None  # memory two still names her
    memory.forget(two.id)
    assert g.entity("Ana") is None
    assert g.entity("Berlin") is not None  # added directly: kept
    stats = g.statistics()
    assert (stats.entities, stats.relations, stats.provenance) == (1, 0, 0)
    assert memory.check_integrity().ok


@pytest.mark.slow  # 2.7 s measured on a busy machine
def test_source_links_a_direct_call_to_a_memory(memory: AgentMemoryManager) -> None:
    m = memory.remember("Ana works with Bo")
    memory.graph.relate("Ana", "works_with", "Bo", source=m.id)
    memory.forget(m.id)
    assert memory.graph.entity("Ana") is None
    with pytest.raises(MemoryNotFoundError):
        memory.graph.relate("Ana", "works_with", "Bo", source=m.id)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda g: g.add_entity(""), InvalidEntityNameError),
        (lambda g: g.add_entity("  \t "), InvalidEntityNameError),
        (lambda g: g.add_entity("x" * 201), InvalidEntityNameError),
        (lambda g: g.add_entity(3), InvalidTypeError),
        (lambda g: g.add_entity("Ana", "not a type"), InvalidInputError),
        (lambda g: g.relate("Ana", "works with", "Bo"), InvalidPredicateError),
        (lambda g: g.relate("Ana", "x" * 65, "Bo"), InvalidPredicateError),
        (lambda g: g.relate("Ana", "", "Bo"), InvalidPredicateError),
        (lambda g: g.relate("Ana", "knows", "ent_" + "0" * 24), EntityNotFoundError),
        (lambda g: g.relate("Ana", "knows", "Bo", confidence=1.5), InvalidInputError),
        (lambda g: g.relate("Ana", "knows", "Bo", valid_from=5, valid_to=5), InvalidInputError),
        (lambda g: g.neighbors("Ana", depth=0), InvalidDepthError),
        (lambda g: g.neighbors("Ana", depth=4), InvalidDepthError),
        (lambda g: g.neighbors("Ana", predicates=["has space"]), InvalidPredicateError),
        (lambda g: g.neighbors("Nobody"), EntityNotFoundError),
        (lambda g: g.path("Ana", "Nobody"), EntityNotFoundError),
        (lambda g: g.merge_entities("Ana", "Nobody"), EntityNotFoundError),
        (lambda g: g.memories_about("Ana", limit=0), InvalidInputError),
    ],
)
def test_bad_input_raises_and_changes_nothing(
    memory: AgentMemoryManager, call: Callable[..., object], error: type[Exception]
) -> None:
    memory.graph.add_entity("Ana")
    before = graph_rows(memory)
    with pytest.raises(error):
        call(memory.graph)
    assert graph_rows(memory) == before


def graph_rows(memory: AgentMemoryManager) -> dict[str, list[tuple[object, ...]]]:
    """Every row of the graph's tables (and the changes counter of the file)."""
    tables = ("entities", "entity_aliases", "relations", "memory_entities", "memory_relations",
              "graph_queue", "graph_dirty", "episodic")  # fmt: skip
    if is_postgres(memory.store):  # every table, the version row of commits included
        return {"all": list(snapshot(memory.store))}
    with memory.store.engine.reading() as conn:
        rows = {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in tables}
        rows["data_version"] = [(conn.pragma("data_version"),)]
    return rows


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_remember_refuses_bad_facts_before_writing(memory: AgentMemoryManager) -> None:
    with pytest.raises(InvalidPredicateError):
        memory.remember("text", relations=[("Ana", "is a", "Bo")])
    with pytest.raises(InvalidEntityNameError):
        memory.remember("text", entities=[""])
    with pytest.raises(InvalidInputError):
        memory.remember("text", entities=[{"name": "Ana", "kind": "person"}])
    assert memory.statistics().tier_counts[memory.episodic.tier] == 0


def test_read_only_open_reads_the_graph_and_refuses_writes(db_path: Path, clock: FakeClock) -> None:
    from persistence import ReadOnlyError

    with AgentMemoryManager.open(db_path, clock=clock, embedder=None) as memory:
        memory.graph.relate("Ana", "knows", "Bo")
    before = file_digest(db_path)
    with AgentMemoryManager.open(db_path, read_only=True, embedder=None) as memory:
        assert names(memory.graph.neighbors("Ana")) == ["Bo"]
        with pytest.raises(ReadOnlyError):
            memory.graph.add_entity("Cy")
    assert file_digest(db_path) == before

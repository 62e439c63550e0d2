"""Single-valued facts supersede on their own (``MemoryConfig.single_valued``, issue 43
item 2), on every engine: the older relation ends, a memory whose single-valued facts
have all ended is superseded, and the edges (the same object again, two objects in one
memory, a fact arriving late, a memory with a fact still holding, other agents)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import FakeClock
from tiered_memory import AgentMemoryManager, MemoryConfig
from tiered_memory.errors import InvalidPredicateError
from tiered_memory.graph.extraction import Extraction
from tiered_memory.graph.facade import Relation, RelationFact

DAY = 86_400_000


def _lives_in(memory: AgentMemoryManager, who: str) -> dict[str, Relation]:
    """``who``'s lives_in relations by the name of the place."""
    entity = memory.graph.entity(who)
    assert entity is not None
    found = {}
    for relation in memory.graph.relations(entity):
        if relation.predicate == "lives_in":
            place = memory.graph.entity(relation.object_id)
            assert place is not None
            found[place.name] = relation
    return found


def test_a_new_object_ends_the_old_fact_and_supersedes_its_memory(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    paris = memory.remember("Ana lives in Paris", relations=[("Ana", "lives_in", "Paris")])
    clock.advance(DAY)
    berlin = memory.remember("Ana moved to Berlin", relations=[("Ana", "lives_in", "Berlin")])
    old = memory.get(paris.id)
    assert old is not None and old.superseded_by == berlin.id
    assert old.valid_to == berlin.created_at
    assert old.superseded_reason == "Ana lives_in Berlin (was Paris)"
    assert berlin.current
    places = _lives_in(memory, "Ana")
    assert places["Paris"].valid_to == berlin.created_at
    assert (places["Berlin"].valid_from, places["Berlin"].valid_to) == (berlin.created_at, None)
    assert [h.memory.id for h in memory.recall("where does Ana live", 5)] == [berlin.id]
    assert [e.memory_id for e in memory.timeline(berlin.id)] == [paris.id, berlin.id]


def test_the_same_object_again_supersedes_nothing(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    first = memory.remember("Ana lives in Paris", relations=[("Ana", "lives_in", "Paris")])
    clock.advance(DAY)
    again = memory.remember("Ana still lives in Paris", relations=[("Ana", "lives_in", "paris")])
    assert memory.get(first.id).current and again.current  # type: ignore[union-attr]
    places = _lives_in(memory, "Ana")
    assert list(places) == ["Paris"] and places["Paris"].valid_to is None
    assert not memory.store.memories.has_superseded()


def test_two_objects_in_one_memory_are_both_kept(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    oslo = memory.remember("Ana lives in Oslo", relations=[("Ana", "lives_in", "Oslo")])
    clock.advance(DAY)
    both = memory.remember(
        "Ana splits her time between Paris and Berlin",
        relations=[("Ana", "lives_in", "Paris"), ("Ana", "lives_in", "Berlin")],
    )
    places = _lives_in(memory, "Ana")
    assert places["Paris"].valid_to is None and places["Berlin"].valid_to is None
    assert places["Oslo"].valid_to == both.created_at
    assert memory.get(oslo.id).superseded_by == both.id  # type: ignore[union-attr]
    assert both.current
    clock.advance(DAY)
    rome = memory.remember("Ana moved to Rome", relations=[("Ana", "lives_in", "Rome")])
    assert memory.get(both.id).superseded_by == rome.id  # type: ignore[union-attr]
    assert all(r.valid_to == rome.created_at for n, r in _lives_in(memory, "Ana").items()
               if n in ("Paris", "Berlin"))  # fmt: skip


def test_a_memory_with_a_fact_still_holding_stays_current(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    both = memory.remember(
        "Ana lives in Paris and works at Acme",
        relations=[("Ana", "lives_in", "Paris"), ("Ana", "works_at", "Acme")],
    )
    clock.advance(DAY)
    memory.remember("Ana moved to Berlin", relations=[("Ana", "lives_in", "Berlin")])
    assert memory.get(both.id).current  # type: ignore[union-attr]  # works_at Acme holds
    clock.advance(DAY)
    job = memory.remember("Ana joined Initech", relations=[("Ana", "works_at", "Initech")])
    old = memory.get(both.id)
    assert old is not None and old.superseded_by == job.id
    assert old.superseded_reason == "Ana works_at Initech (was Acme)"


def test_a_fact_arriving_late_supersedes_nothing_and_arrives_superseded(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    clock.advance(10 * DAY)
    berlin = memory.remember("Ana moved to Berlin", relations=[("Ana", "lives_in", "Berlin")])
    clock.now -= 5 * DAY  # an older fact, told later (a clock gone back, a late extraction)
    paris = memory.remember("Ana lived in Paris", relations=[("Ana", "lives_in", "Paris")])
    assert memory.get(berlin.id).current  # type: ignore[union-attr]
    assert paris.superseded_by == berlin.id and paris.valid_to == berlin.created_at
    assert paris.superseded_reason == "Ana lives_in Berlin (was Paris)"
    assert memory.get(paris.id).superseded_by == berlin.id  # type: ignore[union-attr]
    places = _lives_in(memory, "Ana")
    assert places["Berlin"].valid_to is None
    assert (places["Paris"].valid_from, places["Paris"].valid_to) == (
        paris.created_at, berlin.created_at
    )  # fmt: skip
    assert [h.memory.id for h in memory.recall("Ana lives", 5)] == [berlin.id]
    then = memory.recall("Ana lives", 5, as_of=paris.created_at)
    assert [h.memory.id for h in then] == [paris.id]


def test_an_import_of_an_older_fact_supersedes_nothing(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock, tmp_path: Path,
    new_location: Callable[[str], str],
) -> None:  # fmt: skip
    with AgentMemoryManager.open(new_location("old"), clock=clock, embedder=None) as older:
        paris = older.remember("Ana lives in Paris", relations=[("Ana", "lives_in", "Paris")])
        exported = older.export_json(tmp_path / "old.json")
    clock.advance(DAY)
    memory = make_memory()
    berlin = memory.remember("Ana moved to Berlin", relations=[("Ana", "lives_in", "Berlin")])
    memory.import_json(exported, "merge")
    assert memory.get(berlin.id).current  # type: ignore[union-attr]
    assert _lives_in(memory, "Ana")["Berlin"].valid_to is None
    imported = memory.get(paris.id)
    assert imported is not None and imported.content == "Ana lives in Paris"


def test_other_agents_memories_are_left_alone(memory: AgentMemoryManager, clock: FakeClock) -> None:
    hers = memory.remember("Ana lives in Paris", agent_id="a",
                           relations=[("Ana", "lives_in", "Paris")])  # fmt: skip
    clock.advance(DAY)
    his = memory.remember("Ana lives in Berlin", agent_id="b",
                          relations=[("Ana", "lives_in", "Berlin")])  # fmt: skip
    assert memory.get(hers.id).current and his.current  # type: ignore[union-attr]
    assert all(r.valid_to is None for r in _lives_in(memory, "Ana").values())
    clock.advance(DAY)
    mine = memory.remember("Ana moved to Rome", agent_id="a",
                           relations=[("Ana", "lives_in", "Rome")])  # fmt: skip
    assert memory.get(hers.id).superseded_by == mine.id  # type: ignore[union-attr]
    assert memory.get(his.id).current  # type: ignore[union-attr]
    assert _lives_in(memory, "Ana")["Berlin"].valid_to is None


class _CityExtractor:
    """Finds 'X lives in Y' (an extractor with a single-valued predicate)."""

    def extract(self, text: str) -> Extraction:
        words = text.split()
        if "in" not in words:
            return Extraction()
        fact = RelationFact(words[0], "lives_in", words[words.index("in") + 1])
        return Extraction(relations=(fact,))


def test_an_extractors_facts_supersede_too(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    memory = make_memory(extractor=_CityExtractor(), extract_in_background=False)
    paris = memory.remember("Ana lives in Paris")
    clock.advance(DAY)
    berlin = memory.remember("Ana lives in Berlin")
    clock.advance(DAY)
    memory.flush()  # extracted in one batch: by the memories' times, not the batch order
    old = memory.get(paris.id)
    assert old is not None and old.superseded_by == berlin.id
    assert memory.get(berlin.id).current  # type: ignore[union-attr]


def test_the_setting(make_memory: Callable[..., AgentMemoryManager], clock: FakeClock) -> None:
    assert "lives_in" in MemoryConfig().single_valued
    assert MemoryConfig(single_valued=["Drives", "drives"]).single_valued == ("drives",)
    with pytest.raises(InvalidPredicateError):
        MemoryConfig(single_valued=("lives in",))
    memory = make_memory(single_valued=("drives",))
    car = memory.remember("Bo drives a Fiat", relations=[("Bo", "drives", "Fiat")])
    paris = memory.remember("Ana lives in Paris", relations=[("Ana", "lives_in", "Paris")])
    clock.advance(DAY)
    saab = memory.remember("Bo drives a Saab", relations=[("Bo", "drives", "Saab")])
    memory.remember("Ana lives in Berlin", relations=[("Ana", "lives_in", "Berlin")])
    assert memory.get(car.id).superseded_by == saab.id  # type: ignore[union-attr]
    assert memory.get(paris.id).current  # type: ignore[union-attr]  # not single-valued here


def test_the_supersession_is_part_of_the_write_all_or_nothing(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    paris = memory.remember("Ana lives in Paris", relations=[("Ana", "lives_in", "Paris")])
    clock.advance(DAY)
    with pytest.raises(RuntimeError), memory.transaction():
        memory.remember("Ana moved to Berlin", relations=[("Ana", "lives_in", "Berlin")])
        raise RuntimeError("the caller's block fails after the write")
    assert memory.get(paris.id).current  # type: ignore[union-attr]
    assert list(_lives_in(memory, "Ana")) == ["Paris"]
    assert _lives_in(memory, "Ana")["Paris"].valid_to is None


def test_a_scratchpad_entry_backing_the_old_fact_is_left_alone(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    """A scratchpad entry is replaced by its key, never superseded: its fact ends, the
    entry stays, and the write that ended it goes through (it was refused)."""
    note = memory.remember(
        "Ana lives in Paris", "scratchpad", key="ana", relations=[("Ana", "lives_in", "Paris")]
    )
    clock.advance(DAY)
    berlin = memory.remember("Ana moved to Berlin", relations=[("Ana", "lives_in", "Berlin")])
    kept = memory.get(note.id)
    assert kept is not None and kept.current and kept.superseded_by is None
    assert _lives_in(memory, "Ana")["Paris"].valid_to == berlin.created_at
    assert memory.get(berlin.id) is not None


def test_a_late_fact_inside_a_history_ends_the_fact_it_falls_in(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    """Paris (day 0), Berlin (day 10), then Rome dated day 5 arrives late: as of day 7 the
    answer is Rome alone (Paris ended on day 5), and the chain is Paris, Rome, Berlin."""
    start = clock.now
    paris = memory.remember("Bo lives in Paris", relations=[("Bo", "lives_in", "Paris")])
    clock.advance(10 * DAY)
    berlin = memory.remember("Bo lives in Berlin", relations=[("Bo", "lives_in", "Berlin")])
    clock.now = start + 5 * DAY  # told later: a clock gone back, a late extraction
    rome = memory.remember("Bo lives in Rome", relations=[("Bo", "lives_in", "Rome")])
    was_paris, was_rome = memory.get(paris.id), memory.get(rome.id)
    assert was_paris is not None and was_rome is not None
    assert (was_paris.superseded_by, was_paris.valid_to) == (rome.id, start + 5 * DAY)
    assert was_paris.superseded_reason == "Bo lives_in Rome (was Paris)"
    assert (was_rome.superseded_by, was_rome.valid_to) == (berlin.id, berlin.created_at)
    places = _lives_in(memory, "Bo")
    assert places["Paris"].valid_to == start + 5 * DAY
    assert (places["Rome"].valid_from, places["Rome"].valid_to) == (
        start + 5 * DAY,
        berlin.created_at,
    )
    then = [h.memory.id for h in memory.recall("where does Bo live", 5, as_of=start + 7 * DAY)]
    assert then == [rome.id]
    assert [e.memory_id for e in memory.timeline(berlin.id)] == [paris.id, rome.id, berlin.id]


def test_a_relation_added_through_the_graph_supersedes_nothing_even_with_a_source(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    """``graph.relate(..., source=memory_id)`` is the graph's explicit write: the caller
    bounds the relation (``valid_from``/``valid_to``) and ends others with
    ``graph.invalidate()``; ``source`` records provenance only. The rule is not applied:
    the older fact stays open and its memory current, until the caller ends it."""
    paris = memory.remember("Ana lives in Paris", relations=[("Ana", "lives_in", "Paris")])
    clock.advance(DAY)
    note = memory.remember("Ana's new address is in Berlin")
    berlin = memory.graph.relate("Ana", "lives_in", "Berlin", source=note.id)
    places = _lives_in(memory, "Ana")
    assert places["Paris"].valid_to is None and places["Berlin"].valid_to is None
    assert memory.get(paris.id).current and memory.get(note.id).current  # type: ignore[union-attr]
    assert not memory.store.memories.has_superseded()
    memory.graph.invalidate(places["Paris"], at=clock())  # the caller ends it
    assert _lives_in(memory, "Ana")["Paris"].valid_to == clock()
    assert memory.get(paris.id).current  # type: ignore[union-attr]  # a graph edit only
    assert berlin.id == _lives_in(memory, "Ana")["Berlin"].id


def test_a_refused_supersedes_ends_no_fact(memory: AgentMemoryManager, clock: FakeClock) -> None:
    """A write whose ``supersedes=`` is refused writes nothing: its single-valued
    relation does not end the older fact either (the rule runs in the same write)."""
    from tests.support.backends import snapshot
    from tiered_memory.errors import InvalidSupersessionError

    paris = memory.remember("Ana lives in Paris", relations=[("Ana", "lives_in", "Paris")])
    theirs = memory.remember("Bo's note", agent_id="bo")
    clock.advance(DAY)
    before = snapshot(memory.store)
    for bad in ("no-such-id", theirs.id):
        with pytest.raises(InvalidSupersessionError):
            memory.remember("Ana moved to Rome", relations=[("Ana", "lives_in", "Rome")],
                            supersedes=bad)  # fmt: skip
        assert snapshot(memory.store) == before
    assert memory.get(paris.id).current  # type: ignore[union-attr]
    assert _lives_in(memory, "Ana")["Paris"].valid_to is None

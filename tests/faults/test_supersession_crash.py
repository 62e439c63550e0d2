"""SIGKILL in the middle of superseding writes (``remember(..., supersedes=)``, and the
automatic ones of single-valued facts, through ``relations=`` or an extractor): each is
all or nothing. A new memory that names (in its metadata) the memory it superseded is
there only with that memory marked ``superseded_by`` it, and a memory marked superseded
names a successor that is there. On a file and on PostgreSQL."""

from __future__ import annotations

import random

import pytest

from persistence.locations import is_server_url
from tests.support.crash_checks import open_transactions
from tests.support.processes import spawn_worker
from tiered_memory import AgentMemoryManager

pytestmark = [pytest.mark.crash, pytest.mark.subprocess, pytest.mark.slow]

KILLS = {"sqlite": 12, "postgres": 5}


def test_sigkill_during_superseding_writes(any_location: str) -> None:
    on_server = is_server_url(any_location)
    kills = KILLS["postgres" if on_server else "sqlite"]
    rng = random.Random(43)
    reported: list[tuple[str, str]] = []
    for kill in range(kills):
        worker = spawn_worker("supersede-crash", any_location, str(kill))
        for line in worker.kill(after=rng.uniform(0.2, 0.6)):
            kind, *rest = line.split()
            if kind == "S":
                reported.append((rest[0], rest[1]))
        if on_server:
            assert open_transactions(any_location) == 0
    with AgentMemoryManager.open(any_location, embedder=None) as memory:
        everything = {m.id: m for m in memory.query(limit=None, include_superseded=True)}
        assert memory.check_integrity().ok
    for new, old in reported:  # returned: durable, both halves
        assert everything[old].superseded_by == new and new in everything
    chained = 0
    for found in everything.values():
        named = found.metadata.get("supersedes")
        if named is not None:  # the new half landed: so did the mark on the old one
            chained += 1
            assert everything[named].superseded_by == found.id, f"{named} not marked"
            assert everything[named].valid_to == found.created_at
        if found.superseded_by is not None:  # the mark landed: so did its successor
            successor = everything[found.superseded_by]
            assert successor.metadata.get("supersedes") == found.id
    current = [m for m in everything.values() if m.current]
    assert len(current) == kills  # one live end of each chain
    print(f"{kills} kills: {len(reported)} reported, {chained} superseding writes")
    assert len(reported) > kills


@pytest.mark.parametrize("mode", ["relations", "extractor"])
def test_sigkill_during_single_valued_supersessions(any_location: str, mode: str) -> None:
    """The automatic supersession (a single-valued ``lives_in`` fact, through
    ``relations=`` or an extractor's batch) is all or nothing too: a memory whose fact
    landed ended its predecessor's fact at its time and superseded that memory; one
    whose fact did not (an extraction still pending) changed nothing; each walker has
    one town at a time."""
    on_server = is_server_url(any_location)
    kills = KILLS["postgres" if on_server else "sqlite"]
    rng = random.Random(4343)
    reported: list[tuple[str, str]] = []
    for kill in range(kills):
        worker = spawn_worker("single-valued-crash", any_location, str(kill), mode)
        for line in worker.kill(after=rng.uniform(0.3, 0.8) * (2 if on_server else 1)):
            kind, *rest = line.split()
            if kind == "S":
                reported.append((rest[0], rest[1]))
        if on_server:
            assert open_transactions(any_location) == 0
    with AgentMemoryManager.open(any_location, embedder=None, extractor=None) as memory:
        everything = {m.id: m for m in memory.query(limit=None, include_superseded=True)}
        assert memory.check_integrity().ok
        facts = {m: memory.graph.records.facts_of(m)[1] for m in everything}
        towns = {
            e.id: e.name for e in memory.graph.records.entities(
                sorted({r.object_id for rs in facts.values() for r in rs})
            ).values()
        }  # fmt: skip
        open_facts = {}
        for walker in range(kills):
            entity = memory.graph.entity(f"Walker{walker}")
            held = [] if entity is None else memory.graph.records.current_relations(
                entity.id, "lives_in")  # fmt: skip
            open_facts[walker] = len(held)
    for new, old in reported:  # returned: durable, both halves
        assert new in everything and facts[new]
        if old != "None":
            assert everything[old].superseded_by == new
    superseding = pending = 0
    for found in everything.values():
        previous = found.metadata.get("previous")
        [mine] = facts[found.id] or [None]
        if previous is not None:
            before = everything[previous]
            [theirs] = facts[previous] or [None]
            if mine is not None and theirs is not None:  # the fact landed: so did the rest
                superseding += 1
                assert before.superseded_by == found.id, f"{previous} not superseded"
                assert before.valid_to == found.created_at
                assert before.superseded_reason == (
                    f"{found.content.split()[0]} lives_in {towns[mine.object_id]} "
                    f"(was {towns[theirs.object_id]})"
                )
                assert theirs.valid_to == found.created_at
                assert mine.valid_from == found.created_at
            else:  # its extraction had not run: nothing changed for its predecessor
                pending += 1
                assert mode == "extractor" and mine is None
                assert before.superseded_by is None and (theirs is None or theirs.valid_to is None)
        if found.superseded_by is not None:  # the mark landed: so did its successor's fact
            successor = everything[found.superseded_by]
            assert successor.metadata.get("previous") == found.id and facts[successor.id]
    assert all(n == 1 for n in open_facts.values()), open_facts  # one town at a time
    current = [m for m in everything.values() if m.current and facts[m.id]]
    assert len(current) == kills  # one live end of each chain
    print(f"{kills} kills ({mode}): {len(reported)} reported, {superseding} superseding, "
          f"{pending} pending")  # fmt: skip
    assert superseding > kills

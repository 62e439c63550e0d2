"""Facts that change survive every way a store is moved (issue 43, point 5): a backup
restored and ``copy_memory()`` into either engine carry ``superseded_by``, ``valid_to``,
the reasons (by ``supersedes=`` and by a single-valued relation) and the relations' own
``valid_from``/``valid_to``, so recall now and ``as_of`` answer as before; an export
from before supersession imports with every memory current."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import FakeClock
from tiered_memory import AgentMemoryManager

DAY = 86_400_000


def _chains(memory: AgentMemoryManager, clock: FakeClock) -> dict[str, Any]:
    """A chain by ``supersedes=`` and one by single-valued ``lives_in`` relations; the
    ids and the moment between the two cities."""
    office = memory.remember("The office is in Leeds")
    clock.advance(DAY)
    york = memory.remember("The office is in York", supersedes=office.id)
    paris = memory.remember("Ana lives in Paris", relations=[("Ana", "lives_in", "Paris")])
    clock.advance(DAY)
    moment = clock.now
    clock.advance(DAY)
    berlin = memory.remember("Ana moved to Berlin", relations=[("Ana", "lives_in", "Berlin")])
    return {"office": office.id, "york": york.id, "paris": paris.id, "berlin": berlin.id,
            "moment": moment}  # fmt: skip


def _state(memory: AgentMemoryManager, ids: dict[str, Any]) -> dict[str, Any]:
    """What must round-trip: each memory's supersession fields, Ana's relations' times,
    the timelines, and what recall answers now and as of the moment between cities."""
    fields = {}
    for name in ("office", "york", "paris", "berlin"):
        m = memory.get(ids[name])
        assert m is not None, name
        fields[name] = (m.superseded_by, m.valid_from, m.valid_to, m.superseded_reason)
    ana = memory.graph.entity("Ana")
    assert ana is not None
    relations = sorted((r.predicate, r.object_id, r.valid_from, r.valid_to)
                       for r in memory.graph.relations(ana))  # fmt: skip
    return {
        "fields": fields,
        "relations": relations,
        "timelines": [[e.memory_id for e in memory.timeline(ids[n])] for n in ("york", "berlin")],
        "now": [h.memory.id for h in memory.recall("where does Ana live", 5)],
        "then": [h.memory.id for h in memory.recall("Ana lives", 5, as_of=ids["moment"])],
        "office now": [h.memory.id for h in memory.recall("office", 5)],
    }


def _check(state: dict[str, Any], ids: dict[str, Any]) -> None:
    """The state the chains make (so a round trip that lost them all fails too)."""
    fields = state["fields"]
    assert fields["office"][0] == ids["york"] and fields["office"][3] == "supersedes"
    assert fields["paris"][0] == ids["berlin"]
    assert fields["paris"][3] == "Ana lives_in Berlin (was Paris)"
    assert fields["york"][0] is None and fields["berlin"][0] is None
    assert [r[3] is None for r in state["relations"]].count(False) == 1  # Paris ended
    assert state["timelines"] == [[ids["office"], ids["york"]], [ids["paris"], ids["berlin"]]]
    assert state["now"] == [ids["berlin"]] and state["then"] == [ids["paris"]]
    assert state["office now"] == [ids["york"]]


def test_a_backup_restored_keeps_the_chains(
    new_location: Callable[[str], str], clock: FakeClock, tmp_path: Path
) -> None:
    """A file's snapshot (``VACUUM INTO``) or a database's (the export format), restored
    into a new store of the same engine."""
    with AgentMemoryManager.open(new_location("a"), clock=clock, embedder=None) as memory:
        ids = _chains(memory, clock)
        before = _state(memory, ids)
        snapshot = memory.backup(tmp_path / "snapshot.bak")
    _check(before, ids)
    with AgentMemoryManager.open(new_location("b"), clock=clock, embedder=None) as restored:
        restored.restore(snapshot)
        assert _state(restored, ids) == before


def test_copy_memory_keeps_the_chains_into_either_engine(
    new_location: Callable[[str], str], clock: FakeClock, tmp_path: Path
) -> None:
    """From a file into a new file or a new PostgreSQL database, and back into a file."""
    from tiered_memory.copying import copy_memory

    source = tmp_path / "source.db"
    with AgentMemoryManager.open(source, clock=clock, embedder=None) as memory:
        ids = _chains(memory, clock)
        before = _state(memory, ids)
    _check(before, ids)
    copied = new_location("copy")
    copy_memory(source, copied)
    with AgentMemoryManager.open(copied, clock=clock, embedder=None) as memory:
        assert _state(memory, ids) == before
    copy_memory(copied, tmp_path / "back.db")
    with AgentMemoryManager.open(tmp_path / "back.db", clock=clock, embedder=None) as memory:
        assert _state(memory, ids) == before


def test_an_export_from_before_imports_with_every_memory_current(
    new_location: Callable[[str], str], clock: FakeClock, tmp_path: Path
) -> None:
    """An export made before facts that change (schema 17: no ``superseded_by``,
    ``valid_to`` nor ``superseded_reason`` on its memories) imports, in either mode,
    with every memory current, and supersession works on them afterwards."""
    with AgentMemoryManager.open(tmp_path / "then.db", clock=clock, embedder=None) as memory:
        ids = [memory.remember(f"Ana lives in city {i}").id for i in range(3)]
        exported = memory.export_json(tmp_path / "now.json")
    doc = orjson.loads(exported.read_bytes())
    doc["schema_version"] = 17
    for tier in ("scratchpad", "episodic", "semantic"):
        for row in doc["tables"][tier]:
            for name in ("superseded_by", "valid_to", "superseded_reason"):
                del row[name]
    older = tmp_path / "before.json"
    older.write_bytes(orjson.dumps(doc))
    for mode in ("replace", "merge"):
        location = new_location(mode)
        with AgentMemoryManager.open(location, clock=clock, embedder=None) as memory:
            memory.import_json(older, mode)
            found = [memory.get(m) for m in ids]
            assert all(m is not None and m.current and m.valid_to is None for m in found)
            assert not memory.store.memories.has_superseded()
            assert len(memory.recall("Ana lives", 5)) == 3
            clock.advance(1000)
            new = memory.remember("Ana lives in Porto", supersedes=ids[0])
            assert memory.get(ids[0]).superseded_by == new.id  # type: ignore[union-attr]

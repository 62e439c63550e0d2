"""The shared GraphStore on PostgreSQL against it on SQLite: the same operations on both
engines give the same records, walks, paths and counts (relation ids made deterministic on both, so
every tie-break is comparable), and PostgreSQL's own machinery (the deferred collection
trigger, the queue triggers, snapshots) behaves as SQLite's does."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from persistence.errors import MemoryNotFoundError
from persistence.graph_errors import EntityNotFoundError, RelationNotFoundError
from persistence.graph_records import EntityFact, RelationFact
from persistence.postgres.graph_store import pg_graph_store
from persistence.postgres.store import PostgresStore
from persistence.records import Memory, Tier
from persistence.sqlite.graph_store import sqlite_graph_store
from persistence.sqlite.store import SQLiteStore
from persistence.stores import graph_rows
from tests.conftest import FakeClock

NAMES = [f"E{n}" for n in range(10)]
PREDICATES = ["knows", "likes", "owns"]
TIMES = [100, 200, 300, 400]


class Pair:
    """A SQLite graph and a PostgreSQL graph written the same way."""

    def __init__(self, sqlite: SQLiteStore, pg: PostgresStore) -> None:
        self.sqlite, self.pg = sqlite, pg
        self.graphs = (sqlite_graph_store(sqlite.engine), pg_graph_store(pg.engine))

    def remember(self, memory_id: str, content: str, now: int) -> None:
        self.sqlite.memories.put_memory(
            Memory(id=memory_id, content=content, tier=Tier.EPISODIC, created_at=now,
                   updated_at=now)
        )  # fmt: skip
        with self.pg.engine.transaction() as conn:
            conn.execute(
                "INSERT INTO tm_memories (id, tier, content, created_at, updated_at) "
                "VALUES (%s, 'episodic', %s, %s, %s)",
                (memory_id, content, now, now),
            )

    def forget(self, memory_id: str) -> None:
        self.sqlite.memories.forget_memory(memory_id, "test")
        with self.pg.engine.transaction() as conn:
            conn.execute("DELETE FROM tm_memories WHERE id = %s", (memory_id,))

    def both(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``method`` on both graphs; their answers (or errors) must agree."""
        answers = []
        for graph in self.graphs:
            try:
                answers.append(getattr(graph, method)(*args, **kwargs))
            except Exception as exc:  # noqa: BLE001 - the error's type is the answer
                answers.append(type(exc))
        assert answers[0] == answers[1], method
        return answers[0]


@pytest.fixture
def pair(
    tmp_path: Path, pg_url: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Pair]:
    with (
        SQLiteStore(tmp_path / "g.db", clock=clock) as sqlite,
        PostgresStore(pg_url, clock=clock) as pg,
    ):
        p = Pair(sqlite, pg)
        counters = [itertools.count() for _ in p.graphs]  # one per engine: ids agree

        def relation_id() -> str:  # the engine writing is the one in a transaction
            n = next(i for i, g in enumerate(p.graphs) if g.engine.in_transaction)
            return f"rel_{next(counters[n]):024x}"

        monkeypatch.setattr(graph_rows, "relation_id", relation_id)
        yield p


def _compare_everything(p: Pair, rng: random.Random) -> None:
    entities = p.both("list_entities", None, 100)
    p.both("statistics")
    for e in entities:
        p.both("entity", e.id)
        p.both("entity", e.name)
        p.both("relations", e.id)
        p.both("memory_ids_about", e.id, 50)
        p.both("memory_count", e.id, 3)
        p.both("memories_naming", e.id, 50)
    reached = 0
    for _ in range(30):
        start = rng.choice(entities).id
        depth, fanout, limit = rng.randint(1, 3), rng.randint(1, 4), rng.randint(1, 15)
        at = rng.choice([50, *TIMES, 500])
        predicates = rng.choice([None, rng.sample(PREDICATES, rng.randint(1, 2))])
        got = p.both("neighbors", start, depth, predicates, limit, fanout, at)
        assert all(n.depth <= depth for n in got)
        reached += len(got)
        p.both("walk", start, depth, at, fanout, rng.choice([1, 3, 1000]))
        p.both("path", start, rng.choice(entities).id, depth, at)
    assert reached > 30  # the walks were not trivially empty
    assert p.both("entities_named_in", ["e1", "e3", "nobody"], 50)
    p.both("entities", [e.id for e in entities[:3]] + ["ent_" + "0" * 24])


@pytest.mark.slow  # 23.9 s measured on a busy machine
@pytest.mark.parametrize("seed", range(4))
def test_same_writes_give_the_same_graph_on_both_backends(
    pair: Pair, clock: FakeClock, seed: int
) -> None:
    rng = random.Random(seed)
    sources: list[str | None] = [f"mem_{n}" for n in range(5)]
    for n, memory_id in enumerate(sources):
        pair.remember(str(memory_id), f"note {n}", clock())
    for _ in range(35):
        s, o = rng.sample(NAMES, 2)
        valid_from = rng.choice([None, *TIMES])
        valid_to = rng.choice(
            [None, None, *(t for t in TIMES if valid_from is None or t > valid_from)]
        )
        for source in rng.sample(sources, rng.randint(0, 3)) or [None]:
            pair.both(
                "relate", s, rng.choice(PREDICATES), o, clock(), confidence=rng.choice([0.5, 1.0]),
                valid_from=valid_from, valid_to=valid_to, source=source,
            )  # fmt: skip
        clock.advance(1)
    pair.both(
        "assert_facts", sources[0], [EntityFact("Zed", "person")],
        [RelationFact("Zed", "mentioned_with", "E1"), RelationFact("E2", "knows", "E2")],
        "caller", clock(),
    )  # fmt: skip
    _compare_everything(pair, rng)

    relations = pair.both("relations", "E1")
    if relations:
        pair.both("invalidate", relations[0].id, 250)
    pair.both("merge", "E1", "E2", clock())
    pair.both("add_entity", "E1 alias", "entity", "described", clock())
    pair.both("move_provenance", sources[1], sources[2])
    pair.forget(str(sources[1]))
    pair.forget(str(sources[3]))
    pair.both("remove_entity", "E4")
    some = pair.both("relations", "E5")
    if some:
        pair.both("remove_relation", some[-1].id)
    _compare_everything(pair, rng)


def test_errors_match(pair: Pair, clock: FakeClock) -> None:
    assert pair.both("entity", "nobody") is None
    assert pair.both("relations", "nobody") is EntityNotFoundError
    assert pair.both("relate", "A", "knows", "B", clock(), source="mem_x") is MemoryNotFoundError
    assert pair.both("invalidate", "rel_missing", 5) is RelationNotFoundError
    assert pair.both("merge", "nobody", "else", clock()) is EntityNotFoundError
    assert pair.both("remove_entity", "nobody") is False
    assert pair.both("remove_relation", "rel_missing") is False
    # the failed calls wrote nothing
    assert pair.both("statistics").entities == 0


def test_extraction_queue_and_lifecycle(pair: Pair, clock: FakeClock) -> None:
    pair.remember("m1", "Alice met Bob", clock())
    pair.remember("m2", "Bob likes tea", clock())
    queued = pair.both("pending", clock(), 10)
    assert [q[0] for q in queued] == ["m1", "m2"]
    facts = ([EntityFact("Alice"), EntityFact("Bob")], [RelationFact("Alice", "met", "Bob")])
    done = pair.both(
        "apply_extractions",
        [("m1", "Alice met Bob", *facts), ("m2", "stale text", [], [])],
        [("m2", clock() + 1000, "boom")],
        clock(),
    )
    assert done == 1
    stats = pair.both("statistics")
    assert (stats.extraction_pending, stats.extraction_failed, stats.extraction_errors) == (1, 1, 1)
    assert stats.last_extraction_error == "boom"
    assert pair.both("pending", clock(), 10) == []
    pair.both("enqueue", ["m2"])
    assert [q[0] for q in pair.both("pending", clock(), 10)] == ["m2"]

    pair.both("drop_extracted", "m1")  # the text changed: Alice and Bob go
    assert pair.both("list_entities", None, 10) == []
    pair.both("apply_extractions", [("m1", "Alice met Bob", *facts)], [], clock())
    pair.forget("m1")  # collected at commit (PostgreSQL: a deferred trigger)
    after = pair.both("statistics")
    assert (after.entities, after.relations, after.provenance) == (0, 0, 0)


@pytest.mark.slow  # 2.7 s measured on a busy machine
def test_a_memory_deleted_and_inserted_in_one_transaction_keeps_its_provenance(
    pair: Pair, clock: FakeClock
) -> None:
    pg = pair.graphs[1]
    pair.remember("m1", "Alice", clock())
    pg.assert_facts("m1", [EntityFact("Alice")], [], "caller", clock())
    pg.apply_extractions([("m1", "Alice", [], [])], [], clock())
    with pair.pg.engine.transaction() as conn:  # a promotion written as delete + insert
        conn.execute("DELETE FROM tm_memories WHERE id = 'm1'")
        conn.execute(
            "INSERT INTO tm_memories (id, tier, content, created_at, updated_at) "
            "VALUES ('m1', 'semantic', 'Alice', 1, 1)"
        )
    assert pg.memory_ids_about("Alice", 10) == ["m1"]
    assert pg.pending(clock(), 10) == []
    with pair.pg.engine.transaction() as conn:  # an edit queues it again
        conn.execute("UPDATE tm_memories SET content = 'Alice again' WHERE id = 'm1'")
    assert [q[0] for q in pg.pending(clock(), 10)] == ["m1"]


@pytest.mark.slow  # 2.5 s measured on a busy machine
def test_graph_writes_join_the_callers_transaction(pair: Pair, clock: FakeClock) -> None:
    pg = pair.graphs[1]
    pair.remember("m1", "Alice", clock())
    with pytest.raises(RuntimeError), pair.pg.transaction():
        pg.assert_facts("m1", [EntityFact("Alice")], [], "caller", clock())
        pg.add_entity("Bob", "person", None, clock())
        raise RuntimeError("roll back")
    assert pg.statistics().entities == 0


@pytest.mark.slow  # 3.5 s measured on a busy machine
def test_snapshot_reads_see_one_state(pair: Pair, clock: FakeClock) -> None:
    pg = pair.graphs[1]
    pg.add_entity("Alice", "person", None, clock())
    with pg.engine.snapshot():
        assert pg.statistics().entities == 1
        other_store = PostgresStore(pair.pg.engine.connector._url, clock=clock).open()
        try:
            pg_graph_store(other_store.engine).add_entity("Bob", "person", None, clock())
        finally:
            other_store.close()
        assert pg.statistics().entities == 1
        assert pg.entity("Bob") is None
    assert pg.statistics().entities == 2


def test_read_only_handle_reads_and_refuses_writes(pair: Pair, clock: FakeClock) -> None:
    from persistence.errors import ReadOnlyError

    pair.graphs[1].add_entity("Alice", "person", None, clock())
    with PostgresStore(pair.pg.engine.connector._url, read_only=True) as ro:
        graph = pg_graph_store(ro.engine)
        entity = graph.entity("alice")
        assert entity is not None and entity.name == "Alice"
        with pytest.raises(ReadOnlyError):
            graph.add_entity("Bob", "person", None, clock())


@pytest.mark.slow  # 12.0 s measured on a busy machine
@pytest.mark.parametrize("seed", range(3))
def test_pg_walk_agrees_with_every_simple_path(pg_url: str, clock: FakeClock, seed: int) -> None:
    """test_graph_walk's reference check, on the PostgreSQL graph directly."""
    from tests.graph.test_graph_walk import _reference

    rng = random.Random(seed)
    with PostgresStore(pg_url, clock=clock) as store:
        graph = pg_graph_store(store.engine)
        with store.engine.transaction() as conn:
            for n in range(4):
                conn.execute(
                    "INSERT INTO tm_memories (id, tier, content, created_at, updated_at) "
                    "VALUES (%s, 'episodic', 'note', 1, 1)",
                    (f"m{n}",),
                )
        memories: list[str | None] = [f"m{n}" for n in range(4)]
        for _ in range(40):
            s, o = rng.sample(NAMES, 2)
            for source in rng.sample(memories, rng.randint(0, 3)) or [None]:
                graph.relate(
                    s, rng.choice(PREDICATES), o, clock(), confidence=rng.choice([0.5, 1.0]),
                    valid_from=rng.choice([None, 100, 200]), source=source,
                )  # fmt: skip
        ids = {e.name: e.id for e in graph.list_entities(None, 100)}
        relations = list({r.id: r for e in ids.values() for r in graph.relations(e)}.values())
        for _ in range(30):
            start = ids[rng.choice(sorted(ids))]
            depth, fanout, limit = rng.randint(1, 3), rng.randint(1, 4), rng.randint(1, 12)
            at = rng.choice([50, 150, 500])
            predicates = rng.choice([None, rng.sample(PREDICATES, rng.randint(1, 2))])
            got = graph.neighbors(start, depth, predicates, limit, fanout, at)
            want = _reference(relations, start, depth, at, predicates, fanout, limit)
            assert [(n.entity.id, n.depth, [r.id for r in n.via]) for n in got] == want

"""SIGKILL during extraction, provenance GC and entity merges (real processes): after
each kill the store is whole, the graph's invariants hold (no orphan, nothing derived left
unsupported, nothing waiting for collection) and no provenance of a returned write is
lost; the extraction queue then finishes where it stopped. On both backends (on
PostgreSQL the invariants are the integrity check's, read on a connection of its own)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from persistence import graph_records
from persistence.locations import is_server_url
from persistence.sqlite import graph_steps
from tests.support.crash_checks import open_transactions, server_problems
from tests.support.data_checks import open_raw
from tests.support.processes import spawn_worker
from tiered_memory import AgentMemoryManager

pytestmark = [pytest.mark.crash, pytest.mark.subprocess, pytest.mark.slow]

KILLS = {"sqlite": 8, "postgres": 4}

_LIVE = {"sqlite": "SELECT id FROM episodic", "postgres": "SELECT id FROM tm_memories"}
_PROVENANCE = {
    "sqlite": "SELECT 1 FROM memory_entities AS m JOIN entity_aliases AS a "
    "ON a.entity_id = m.entity_id WHERE m.memory_id = ? AND a.norm = ? AND m.origin = 'caller'",
    "postgres": "SELECT 1 FROM tm_memory_entities AS m JOIN tm_entity_aliases AS a "
    "ON a.entity_id = m.entity_id WHERE m.memory_id = %s AND a.norm = %s "
    "AND m.origin = 'caller'",
}
_PROVENANCE_OF = {
    "sqlite": "SELECT count(*) FROM memory_entities WHERE memory_id IN "
    "(SELECT value FROM json_each(?))",
    "postgres": "SELECT count(*) FROM tm_memory_entities WHERE memory_id = ANY(%s)",
}


class _Reader:
    """The crashed store's committed state through a plain connection, and its graph
    invariants (SQLite's graph_steps.check, PostgreSQL's integrity checks)."""

    def __init__(self, location: str) -> None:
        self.kind = "postgres" if is_server_url(location) else "sqlite"
        if self.kind == "postgres":
            import psycopg

            self.conn = psycopg.connect(location, autocommit=True)
            self.problems = server_problems(location, "graph_invariants")
        else:
            self.conn = open_raw(Path(location))
            assert self.conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            self.problems = graph_steps.check(self.conn)

    def live(self) -> set[str]:
        return {r[0] for r in self.conn.execute(_LIVE[self.kind])}

    def has_provenance(self, memory_id: str, person: str) -> bool:
        row = self.conn.execute(
            _PROVENANCE[self.kind], (memory_id, graph_records.normalise(person))
        ).fetchone()
        return row is not None

    def provenance_of(self, memory_ids: set[str]) -> int:
        ids = sorted(memory_ids)
        param: object = ids if self.kind == "postgres" else repr(ids).replace("'", '"')
        (count,) = self.conn.execute(_PROVENANCE_OF[self.kind], (param,)).fetchone()
        return int(count)

    def close(self) -> None:
        self.conn.close()


def test_sigkill_leaves_a_consistent_graph_and_resumable_extraction(any_location: str) -> None:
    on_server = is_server_url(any_location)
    rng = random.Random(15)
    remembered: dict[str, str] = {}
    forgotten: set[str] = set()
    doomed: set[str] = set()  # forget() was called; it may have committed before the kill
    operations: set[str] = set()
    for kill in range(KILLS["postgres" if on_server else "sqlite"]):
        # A file's run is killed from its start (start-up included), a server's once open
        # (a short run of few kills must reach the graph's work).
        ready, after = (
            ("READY", rng.uniform(0.5, 1.2)) if on_server else (None, rng.uniform(1.2, 2.2))
        )
        worker = spawn_worker(any_location, str(kill), script="graph_worker.py", ready=ready)
        lines = worker.kill(after=after)
        if not on_server and not Path(any_location).exists():
            assert not lines  # killed while starting (a loaded machine): nothing written
            continue
        if on_server:
            assert open_transactions(any_location) == 0, "the killed client's transaction stayed"
        for line in lines:
            kind, *rest = line.split()
            operations.add(kind)
            if kind == "R":
                remembered[rest[0]] = rest[1]
            elif kind == "F":
                forgotten.add(rest[0])
            elif kind == "f":
                doomed.add(rest[0])
        reader = _Reader(any_location)
        try:
            assert reader.problems == []
            live = reader.live()
            assert forgotten.isdisjoint(live)
            for memory_id, person in remembered.items():
                if memory_id in forgotten or (memory_id in doomed and memory_id not in live):
                    continue
                assert memory_id in live, f"returned remember() of {memory_id} lost"
                assert reader.has_provenance(memory_id, person), f"provenance of {memory_id} lost"
            assert reader.provenance_of(forgotten) == 0
        finally:
            reader.close()
    assert {"R", "F", "X", "M"} <= operations, operations
    with AgentMemoryManager.open(any_location, embedder=None, embed_in_background=False,
                                 extract_in_background=False) as memory:  # fmt: skip
        memory.flush()
        assert memory.statistics().graph.extraction_pending == 0
        assert memory.check_integrity().ok

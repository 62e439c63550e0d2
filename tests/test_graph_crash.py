"""SIGKILL during extraction, provenance GC and entity merges (real processes): after
each kill the file is whole, the graph's invariants hold (no orphan, nothing derived left
unsupported, nothing waiting for collection) and no provenance of a returned write is
lost; the extraction queue then finishes where it stopped."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from persistence.sqlite.sql import graph_sql
from tests.data_checks import open_raw
from tests.processes import spawn_worker
from tiered_memory import AgentMemoryManager

pytestmark = [pytest.mark.crash, pytest.mark.subprocess, pytest.mark.slow]

KILLS = 8


def test_sigkill_leaves_a_consistent_graph_and_resumable_extraction(tmp_path: Path) -> None:
    path = tmp_path / "graph-crash.db"
    rng = random.Random(15)
    remembered: dict[str, str] = {}
    forgotten: set[str] = set()
    doomed: set[str] = set()  # forget() was called; it may have committed before the kill
    operations: set[str] = set()
    for kill in range(KILLS):
        worker = spawn_worker(str(path), str(kill), script="graph_worker.py", ready=None)
        lines = worker.kill(after=rng.uniform(1.2, 2.2))
        if not path.exists():  # killed while starting (a loaded machine): nothing written
            assert not lines
            continue
        for line in lines:
            kind, *rest = line.split()
            operations.add(kind)
            if kind == "R":
                remembered[rest[0]] = rest[1]
            elif kind == "F":
                forgotten.add(rest[0])
            elif kind == "f":
                doomed.add(rest[0])
        conn = open_raw(path)
        try:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            assert graph_sql.check(conn) == []
            live = {r[0] for r in conn.execute("SELECT id FROM episodic")}
            assert forgotten.isdisjoint(live)
            for memory_id, person in remembered.items():
                if memory_id in forgotten or (memory_id in doomed and memory_id not in live):
                    continue
                assert memory_id in live, f"returned remember() of {memory_id} lost"
                row = conn.execute(
                    "SELECT 1 FROM memory_entities AS m JOIN entity_aliases AS a "
                    "ON a.entity_id = m.entity_id WHERE m.memory_id = ? AND a.norm = ? "
                    "AND m.origin = 'caller'",
                    (memory_id, graph_sql.normalise(person)),
                ).fetchone()
                assert row is not None, f"provenance of {memory_id} lost"
            gone = conn.execute(
                "SELECT count(*) FROM memory_entities WHERE memory_id IN "
                "(SELECT value FROM json_each(?))",
                (repr(sorted(forgotten)).replace("'", '"'),),
            ).fetchone()[0]
            assert gone == 0
        finally:
            conn.close()
    assert {"R", "F", "X", "M"} <= operations, operations
    with AgentMemoryManager.open(path, embedder=None, embed_in_background=False,
                                 extract_in_background=False) as memory:  # fmt: skip
        memory.flush()
        assert memory.statistics().graph.extraction_pending == 0
        assert memory.check_integrity().ok

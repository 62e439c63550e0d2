"""SIGKILL a writer of a file searched by the vector cells, in the middle of its writes.

After every kill the reopened file must find every vector whose write had returned
(searched by that vector: it is its own nearest) and nothing forgotten, and the check
must find no cell holding a code without its committed vector (or with another code).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from persistence.sqlite import SQLiteStore, cell_sync, integrity
from persistence.sqlite.sql import cell_sql

pytestmark = [pytest.mark.crash, pytest.mark.subprocess, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DIM = 128
KILLS = 6

WRITER = """
import sys
import numpy as np
from persistence import Memory, Tier
from persistence.sqlite import SQLiteStore

path, first = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(first)

def vector(n):
    v = np.random.default_rng(n).standard_normal(128).astype(np.float32)
    return v / np.linalg.norm(v)

with SQLiteStore(path, vector_index="cells") as store:
    print("READY", flush=True)
    n = first
    while True:
        ids = []
        with store.transaction():
            for _ in range(40):
                ids.append(f"m{n:07d}")
                store.memories.put_memory(
                    Memory.create(f"text {n}", Tier.EPISODIC, id=ids[-1], embedding=vector(n))
                )
                n += 1
        print("W " + " ".join(ids), flush=True)
        if n % 200 == 0:
            gone = f"m{int(rng.integers(first, n)):07d}"
            print("f " + gone, flush=True)  # a kill from here on may or may not have forgotten it
            if store.memories.forget_memory(gone, reason="test") is not None:
                print("F " + gone, flush=True)
"""


def vector(n: int) -> np.ndarray:
    v = np.random.default_rng(n).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def run_until_killed(path: Path, first: int, delay: float) -> list[str]:
    """The writer's reported lines until it is killed ``delay`` s after it is ready."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(first)],
        stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "READY"
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    lines = child.stdout.read().splitlines()
    child.wait()
    return lines


def test_sigkill_mid_write_keeps_the_cells_equal_to_what_committed(tmp_path: Path) -> None:
    path = tmp_path / "cells.db"
    rng = random.Random(46)
    alive: set[str] = set()
    forgotten: set[str] = set()
    maybe: set[str] = set()  # a forget was under way when the writer was killed
    first = 0
    for kill in range(KILLS):
        reported: set[str] = set()
        for line in run_until_killed(path, first, rng.uniform(0.6, 1.6)):
            kind, *ids = line.split()
            if kind == "W":
                reported.update(ids)
            elif kind == "f":
                maybe.add(ids[0])
            elif kind == "F":
                maybe.discard(ids[0])
                reported.discard(ids[0])
                alive.discard(ids[0])
                forgotten.add(ids[0])
        alive -= maybe
        reported -= maybe
        checked = rng.sample(sorted(alive), min(len(alive), 100))
        checked += rng.sample(sorted(reported), min(len(reported), 100))
        alive |= reported
        first += 100_000  # each writer its own ids: a killed batch may or may not be there
        with SQLiteStore(path, vector_index="cells") as store:
            with store.engine.fresh_read_connection() as conn:
                assert integrity.check(conn, ["vector_cells_match"]) == []
            for memory_id in checked:  # a sample (search is exact enough: each its own nearest)
                found = store.indexes.vector_search(vector(int(memory_id[1:])), 1)
                assert found and found[0][0] == memory_id, f"lost {memory_id} after kill {kill}"
            for memory_id in sorted(forgotten):
                found = store.indexes.vector_search(vector(int(memory_id[1:])), 1)
                assert found[0][0] != memory_id, f"{memory_id} was forgotten"
    assert len(alive) > 1_024  # enough for cells: they were trained and searched
    with SQLiteStore(path, vector_index="cells") as store:
        for memory_id in rng.sample(sorted(alive), 500):
            assert store.indexes.vector_search(vector(int(memory_id[1:])), 1)[0][0] == memory_id
        with store.engine.snapshot() as conn:
            state = cell_sync.read_state(conn)
            listed = {str(i) for i, _ in conn.execute(cell_sql.MEMBERS.sql)}
        assert state is not None and state.members == len(listed)
        assert not alive - listed, "a returned write is in no cell"
        store.indexes.vector_search(vector(0), 1)
        assert store.indexes.vectors.last_search == "cells"

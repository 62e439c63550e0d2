"""Concurrent ``backup(keep=N)`` from many threads and processes: each call leaves a
verified snapshot under a name of its own, none fails because another pruned or took its
file, and the directory ends with the N published last."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest

from persistence import rotation
from tiered_memory import AgentMemoryManager

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]

KEEP = 3
ROUNDS = 3

BACKER = """
import sys, orjson
from tiered_memory import AgentMemoryManager
made = []
with AgentMemoryManager.open(sys.argv[1], embedder=None) as memory:
    for _ in range(int(sys.argv[2])):
        made.append(str(memory.backup(keep=int(sys.argv[3]))))
print(orjson.dumps(made).decode())
"""


def test_backups_with_keep_from_threads_and_processes(tmp_path: Path) -> None:
    db = tmp_path / "soak.db"
    with AgentMemoryManager.open(db, embedder=None) as memory:
        for i in range(200):
            memory.remember(f"memory {i} to back up")
    processes = [
        subprocess.Popen([sys.executable, "-c", BACKER, str(db), str(ROUNDS), str(KEEP)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]  # fmt: skip
    made: list[str] = []
    errors: list[BaseException] = []

    def backer(memory: AgentMemoryManager) -> None:
        try:
            for _ in range(ROUNDS):
                path = memory.backup(keep=KEEP)
                made.append(str(path))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    managers = [AgentMemoryManager.open(db, embedder=None) for _ in range(2)]
    try:
        threads = [threading.Thread(target=backer, args=(managers[i % 2],)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
    finally:
        for manager in managers:
            manager.close()
    for process in processes:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err
        made += orjson.loads(out)
    assert errors == []
    assert len(made) == (6 + 4) * ROUNDS
    assert len(set(made)) == len(made)  # no two calls took one name
    directory = db.with_name("soak-backups")
    left = sorted(p for p in directory.iterdir() if p.suffix == ".db")
    assert len(left) == KEEP
    assert {str(p) for p in left} <= set(made)
    assert not [p for p in directory.iterdir() if p.name.endswith(".partial")]
    for snapshot in left:
        with AgentMemoryManager.open(snapshot, read_only=True, embedder=None) as copy:
            assert copy.check_integrity().ok
            assert sum(copy.statistics().tier_counts.values()) == 200
    assert sorted(p.name for p in directory.iterdir()) == sorted(p.name for p in left)


def test_prune_never_removes_the_callers_own_snapshot(tmp_path: Path) -> None:
    files = [tmp_path / f"s{i}.db" for i in range(5)]
    for path in files:
        path.write_bytes(b"x")
    own = files[0]  # published first: the oldest, yet it is the caller's
    removed = rotation.prune([*files, tmp_path / "vanished.db"], 2, own)
    assert own.exists() and own not in removed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s0.db", "s3.db", "s4.db"]

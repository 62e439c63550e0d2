"""Uncached ``get`` (the fast read path, ``Database.read_row``): what it must still see."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tiered_memory import AgentMemoryManager

pytestmark = [pytest.mark.subprocess]

WORKER = str(Path(__file__).parents[2] / "support" / "worker.py")


def test_uncached_get_sees_another_process_write_and_forgotten_ids(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with AgentMemoryManager.open(db, cache_size=2, embedder=None) as memory:
        mine = [memory.remember(f"mine {n}").id for n in range(5)]  # more than the cache holds
        child = subprocess.run(
            [sys.executable, WORKER, "write", str(db), "3", "child"],
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        theirs = [w for w in child.stdout.split() if w != "READY"]
        assert len(theirs) == 3
        for memory_id in theirs:  # never cached here: read from the file
            found = memory.get(memory_id)
            assert found is not None and found.id == memory_id
        assert memory.get(mine[0]) is not None  # evicted long ago: read again
        assert memory.forget(mine[0])
        assert memory.forget(theirs[0])
        memory._cache.clear()
        assert memory.get(mine[0]) is None and memory.get(theirs[0]) is None
        assert memory.get("no-such-id") is None
        assert [m.id for m in (memory.get(i) for i in mine[1:]) if m] == mine[1:]

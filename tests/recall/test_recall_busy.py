"""A recall never fails because writers are busy: what it writes (reviews, access counts,
the vectors of pending memories) is deferred and counted, then written once the file is
free. Real writer processes: one holds the write lock longer than the busy timeout,
others write in a loop."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import FakeClock
from tests.support.worker import HashEmbedder
from tiered_memory import AgentMemoryManager
from tiered_memory.recall.reviews import MAX_QUEUED

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]

HOLD_S = 30  # longer than the 5 s busy timeout, several times over
RECALL_UNTIL_S = HOLD_S - 8  # after the holder began: the last recall (5 s if it waits
# for the lock) reads before the holder commits, even when the loopers took seconds to start

PACE_S = 0.02  # at most ~1,100 recalls (2 reviews each) in the hold: below MAX_QUEUED
assert 2 * RECALL_UNTIL_S / PACE_S < MAX_QUEUED

HOLDER = """
import sys, time
from tiered_memory import AgentMemoryManager
with AgentMemoryManager.open(sys.argv[1], embedder=None) as memory:
    with memory.store.transaction():
        memory.remember("held in a long transaction")
        print("HOLDING", flush=True)
        time.sleep(float(sys.argv[2]))
"""

LOOPER = """
import sys, time
from tiered_memory import AgentMemoryManager
from persistence import DatabaseBusyError
end = time.monotonic() + float(sys.argv[2])
with AgentMemoryManager.open(sys.argv[1], embedder=None) as memory:
    print("WRITING", flush=True)
    while time.monotonic() < end:
        try:
            memory.remember("loop write " + str(time.monotonic()))
        except DatabaseBusyError:
            pass  # the holder has the lock: writers may be refused, readers may not
"""


def spawn(script: str, *args: str, ready: str, count: int = 1) -> list[subprocess.Popen[str]]:
    """``count`` processes started at once (a loaded machine takes seconds to start
    each), returned once every one has said ``ready``."""
    processes = [
        subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True)
        for _ in range(count)
    ]
    for process in processes:
        assert process.stdout is not None
        assert process.stdout.readline().startswith(ready)
    return processes


def test_recall_returns_while_writers_hold_the_file_and_writes_later(tmp_path: Path) -> None:
    db = tmp_path / "busy.db"
    embedder = HashEmbedder("busy-model", 8)
    clock = FakeClock(int(time.time() * 1000) - 90 * 86_400_000)  # 90 days ago: due now
    with AgentMemoryManager.open(
        db, embedder=embedder, embed_in_background=False, clock=clock
    ) as memory:
        garden = memory.remember("the garden needs water on Sunday")
        memory.flush()
    with AgentMemoryManager.open(
        db, embedder=embedder, embed_in_background=False, recall_review_batch=1
    ) as memory:
        pending = memory.remember("the garden gate is blue")  # waits for its vector
        (holder,) = spawn(HOLDER, str(db), str(HOLD_S), ready="HOLDING")
        started = time.monotonic()
        loopers = spawn(LOOPER, str(db), str(HOLD_S), ready="WRITING", count=3)
        recalls = 0
        try:
            while time.monotonic() - started < RECALL_UNTIL_S:
                hits = memory.recall("garden", k=5)  # never raises
                assert {h.memory.id for h in hits} == {garden.id, pending.id}
                recalls += 1
                # Paced: each recall queues its hits' reviews, and past MAX_QUEUED the
                # oldest are dropped (by design); unpaced, a fast machine overflows it.
                time.sleep(PACE_S)
            stats = memory.statistics()
            assert stats.recall_writes_deferred >= 1
            assert stats.recall_reviews_dropped == 0
            assert memory.schedule(garden.id).review_count == 0  # type: ignore[union-attr]
        finally:
            for process in (holder, *loopers):
                assert process.wait(timeout=120) == 0
        assert recalls >= 2
        deadline = time.monotonic() + 60  # the pause doubles while the file stayed busy
        while memory.schedule(garden.id).review_count == 0:  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the deferred reviews were never written"
            memory.recall("garden", k=5)
            time.sleep(0.5)
        assert memory.get(pending.id).embedding is not None  # type: ignore[union-attr]
        assert memory.get(garden.id).access_count >= 1  # type: ignore[union-attr]
        assert memory.statistics().recall_reviews_dropped == 0

"""A connection waiting for another's write lock tries every few ms for the whole busy
timeout (SQLite's own handler backs off to one try per 100 ms after a second, so a
long waiter lost every race to writers that had just arrived, and failed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from persistence import DatabaseBusyError
from persistence.sqlite import SQLiteStore
from persistence.sqlite.connection import BUSY_POLL_MS, SteadyBusyWait
from tiered_memory import AgentMemoryManager


class Clock:
    """A clock that only moves when the handler sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def __call__(self) -> float:
        return self.now


def test_it_tries_every_few_ms_until_the_timeout_then_gives_up() -> None:
    clock = Clock()
    wait = SteadyBusyWait(5000, sleep=clock.sleep, clock=clock)
    tries = 0
    while wait(tries):
        tries += 1
    assert clock.now - 100.0 == pytest.approx(5.0, abs=0.001)  # the whole timeout
    assert max(clock.sleeps) <= BUSY_POLL_MS[1] / 1000  # never a 100 ms back-off
    assert tries >= 5000 / BUSY_POLL_MS[1]
    assert len(set(clock.sleeps)) > 10  # jittered: waiters do not move in step


def test_a_new_wait_starts_over() -> None:
    clock = Clock()
    wait = SteadyBusyWait(50, sleep=clock.sleep, clock=clock)
    tries = 0
    while wait(tries):
        tries += 1
    assert not wait(tries)
    clock.now += 60
    assert wait(0)  # a new lock's wait: its own 50 ms


def test_a_write_still_gives_up_at_the_timeout(tmp_path: Path) -> None:
    """Another connection holds the write lock throughout: the write waits its
    ``busy_timeout_ms``, then raises the typed error and writes nothing."""
    with SQLiteStore(tmp_path / "held.db", busy_timeout_ms=300) as store:
        other = apsw.Connection(str(tmp_path / "held.db"))
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(DatabaseBusyError, match="300 ms"), store.transaction():
                pass
        finally:
            other.execute("ROLLBACK")
            other.close()
        with store.transaction():  # free again: the writer works
            pass


HOLDER = """
import sys, time, apsw
conn = apsw.Connection(sys.argv[1])
conn.set_busy_timeout(10_000)
end = time.monotonic() + float(sys.argv[2])
first = True
while time.monotonic() < end:
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("CREATE TABLE IF NOT EXISTS holder (n)")
    conn.execute("INSERT INTO holder VALUES (1)")
    if first:
        print("HOLDING", flush=True)
        first = False
    time.sleep(0.3)
    conn.execute("COMMIT")
    time.sleep(0.002)  # a short gap, as between one busy writer's calls (1-5 ms polls
    # find it; SQLite's own handler, at one try per 100 ms after the first second, not)
print("DONE", flush=True)
"""


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_write_gets_through_a_busy_writers_short_gaps(tmp_path: Path) -> None:
    """Another process holds the write lock 300 ms at a time, with 2 ms gaps, for
    longer than the 5 s busy timeout: a write must find a gap, never fail busy."""
    db = tmp_path / "busy.db"
    with AgentMemoryManager.open(db, embedder=None) as memory:
        memory.remember("before the holder")
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(db), "9"],
                                  stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert holder.stdout is not None
        try:
            assert holder.stdout.readline().strip() == "HOLDING"
            written = [memory.remember(f"write {n} beside a busy writer") for n in range(3)]
            assert all(memory.get(m.id) is not None for m in written)
            assert holder.poll() is None  # it was still holding the lock in turns
        finally:
            assert holder.wait(timeout=60) == 0

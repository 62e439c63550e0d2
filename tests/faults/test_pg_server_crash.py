"""The PostgreSQL server crashes (``pg_ctl stop -m immediate``) and comes back under a
running client: every call made while it is down fails with a :class:`TieredMemoryError`
subclass (never a raw psycopg or OS error), the same manager (not reopened) works again
after the restart within a bounded number of calls, every write that returned before
the crash is there after it, and a batch is all there or not at all."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest

from persistence import PoolSettings
from tests.support.pg_server import PgServer
from tiered_memory import AgentMemoryManager, TieredMemoryError

pytestmark = [pytest.mark.crash, pytest.mark.slow, pytest.mark.postgres]

CRASHES = 2
OUTAGE_S = 2.5  # longer than the pool's wait: calls fail during it rather than wait it out
AFTER_RESTART_MAX_FAILURES = 12  # the pool's reconnect backoff, one 1 s wait per call


@dataclass(slots=True)
class Client:
    """A thread remembering, reading, recalling and writing batches in a loop; records
    each call's outcome (the time it ended, the exception, the rows it acknowledged)."""

    memory: AgentMemoryManager
    acked: dict[str, str] = field(default_factory=dict)  # id -> content
    batches: list[list[str]] = field(default_factory=list)  # contents of every batch begun
    calls: list[tuple[float, str, BaseException | None]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            for name, call in (
                ("remember", lambda n=n: self._remember(f"fact {n}")),
                ("get", lambda: self._get()),
                ("recall", lambda n=n: self.memory.recall(f"fact {n}")),
                ("batch", lambda n=n: self._batch(n)),
            ):
                error: BaseException | None = None
                try:
                    call()
                except BaseException as exc:  # noqa: BLE001 - judged by the test
                    error = exc
                self.calls.append((time.monotonic(), name, error))

    def _remember(self, content: str) -> None:
        self.acked[self.memory.remember(content).id] = content

    def _get(self) -> None:
        if self.acked:
            self.memory.get(next(reversed(self.acked)))

    def _batch(self, n: int) -> None:
        contents = [f"batch {n} part {i}" for i in range(3)]
        self.batches.append(contents)
        with self.memory.transaction():
            ids = [self.memory.remember(c).id for c in contents]
        self.acked.update(zip(ids, contents, strict=True))

    def successes_since(self, moment: float) -> int:
        return sum(1 for at, _, error in list(self.calls) if at > moment and error is None)


def stored(pg_server: PgServer, url: str) -> dict[str, str]:
    """Every memory in the database (id -> content), read on a connection of its own."""
    with pg_server.connect(urlsplit(url).path.lstrip("/")) as conn:
        return {row[0]: row[1] for row in conn.execute("SELECT id, content FROM tm_memories")}


def wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout`` seconds pass (False)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_a_running_client_rides_out_server_crashes(pg_server: PgServer, pg_url: str) -> None:
    quick = PoolSettings(wait_timeout_s=1.0, connect_timeout_s=1.0)
    memory = AgentMemoryManager.open(pg_url, embedder=None, pool=quick, synchronous="FULL")
    client = Client(memory)
    thread = threading.Thread(target=client.run, daemon=True)
    outages: list[tuple[float, float]] = []
    try:
        thread.start()
        for _ in range(CRASHES):
            now = time.monotonic()
            assert wait_for(lambda now=now: client.successes_since(now) >= 12, 60), (
                "the client made no progress"
            )
            down = time.monotonic()
            pg_server.crash()
            time.sleep(OUTAGE_S)
            pg_server.start()
            up = time.monotonic()
            outages.append((down, up))
            # The same manager works again: calls succeed after the restart.
            assert wait_for(lambda up=up: client.successes_since(up) >= 8, 60), (
                f"no recovery after the restart: {client.calls[-3:]}"
            )
    finally:
        client.stop.set()
        thread.join(60)
        if not pg_server.running:
            pg_server.start()
    memory.close()
    assert not thread.is_alive()

    errors = [(at, name, e) for at, name, e in client.calls if e is not None]
    raw = [(name, repr(e)) for _, name, e in errors if not isinstance(e, TieredMemoryError)]
    assert raw == [], f"raw errors escaped a public call: {raw[:5]}"
    kinds = Counter(type(e).__name__ for _, _, e in errors)
    for down, up in outages:
        during = [name for at, name, e in errors if down < at <= up + 0.1]
        assert during, f"no call failed during the outage: the check saw nothing ({kinds})"
        after = [at for at, _, e in errors if at > up + 0.1 and at < _next(outages, up)]
        assert len(after) <= AFTER_RESTART_MAX_FAILURES, (len(after), kinds)

    rows = stored(pg_server, pg_url)
    lost = {i: c for i, c in client.acked.items() if rows.get(i) != c}
    assert lost == {}, f"{len(lost)} acknowledged writes lost"
    present = set(rows.values())
    for contents in client.batches:
        there = [c in present for c in contents]
        assert all(there) or not any(there), f"half a batch: {contents} -> {there}"
    assert set(rows) >= set(client.acked)


def _next(outages: list[tuple[float, float]], up: float) -> float:
    """When the outage after the one that ended at ``up`` began (infinity for the last)."""
    later = [down for down, _ in outages if down > up]
    return min(later, default=float("inf"))


def test_after_a_long_outage_the_next_call_works(pg_server: PgServer, pg_url: str) -> None:
    """The pool's background retries back off (1, 2, 4 ... s): with psycopg_pool's default
    300 s of them, calls after an 8 s outage waited for the next retry (5.7 s and 5 failed
    calls, each a misleading "no free connection") once the server was back."""
    quick = PoolSettings(wait_timeout_s=1.0, connect_timeout_s=1.0)
    with AgentMemoryManager.open(
        pg_url,
        embedder=None,
        pool=quick,
        synchronous="FULL",  # NORMAL may lose `kept`
    ) as memory:
        kept = memory.remember("before the outage")
        pg_server.crash()
        try:
            down = time.monotonic()
            while time.monotonic() - down < 8.0:
                with pytest.raises(TieredMemoryError):
                    memory.remember("while down")
        finally:
            pg_server.start()
        failed: list[str] = []
        for _ in range(10):
            try:
                after = memory.remember("after the outage")
                break
            except TieredMemoryError as exc:
                failed.append(type(exc).__name__)
        assert len(failed) <= 1, failed
        assert memory.get(kept.id) is not None and memory.get(after.id) is not None


def test_a_call_made_while_the_server_is_down_waits_for_it(
    pg_server: PgServer, pg_url: str
) -> None:
    """A call waits up to ``wait_timeout_s`` for a connection: one made during a 5 s
    outage gets it once the server is back (the pool is asked to connect again while the
    call waits, though its own retries gave up after 2 s)."""
    patient = PoolSettings(wait_timeout_s=20.0, connect_timeout_s=1.0)
    with AgentMemoryManager.open(pg_url, embedder=None, pool=patient, synchronous="FULL") as memory:
        memory.remember("before the outage")
        pg_server.crash()
        restart = threading.Timer(5.0, pg_server.start)
        restart.start()
        try:
            time.sleep(2.5)  # idle past ping_after_s: the dead connection is checked, not used
            began = time.monotonic()
            during = memory.remember("made while the server was down")
            waited = time.monotonic() - began
        finally:
            restart.join()
        assert waited >= 2.0, f"the call cannot have been served while down ({waited:.1f} s)"
        assert memory.get(during.id) is not None
    assert "made while the server was down" in stored(pg_server, pg_url).values()

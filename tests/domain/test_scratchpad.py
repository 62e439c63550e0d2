"""The scratchpad: keyed, held in RAM, token-budgeted, evicting to episodic by LRU."""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Callable

import pytest

from persistence import InvalidInputError, StoreClosedError, Tier
from persistence.locations import is_server_url
from tests.conftest import FakeClock
from tiered_memory import AgentMemoryManager
from tiered_memory.scratchpad import EVICTION_REASON


class Boom(Exception):
    pass


@pytest.mark.slow  # 1.8 s measured on a busy machine
def test_put_get_delete_items_clear(memory: AgentMemoryManager) -> None:
    pad = memory.scratchpad
    goal = pad.put("goal", "Ship v1 on Friday", tags=("plan",))
    assert pad.get("goal") == goal and goal.tier is Tier.SCRATCHPAD and goal.key == "goal"
    assert memory.get(goal.id) == goal
    pad.put("mood", "calm")
    assert [k for k, _ in pad.items()] == ["goal", "mood"]
    replaced = pad.put("goal", "Ship v1 on Monday")
    assert replaced.id == goal.id and pad.get("goal").content == "Ship v1 on Monday"  # type: ignore[union-attr]
    assert "goal" in pad and len(pad) == 2
    assert pad.delete("mood") is True and pad.delete("mood") is False
    assert pad.clear() == 1
    assert len(pad) == 0 and memory.store.get_all_scratchpad() == []


@pytest.mark.slow  # 1.9 s measured on a busy machine
def test_token_budget_evicts_least_recently_used_to_episodic(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    memory = make_memory(scratchpad_token_budget=10)
    pad = memory.scratchpad
    a = pad.put("a", "x" * 12)  # 3 tokens
    b = pad.put("b", "x" * 12)  # 3 tokens
    pad.put("c", "x" * 12)  # 3 tokens: 9 in all
    pad.get("a")  # a is now more recent than b
    pad.put("d", "x" * 8)  # 2 tokens: 11 > 10, so b (least recent) goes
    assert [k for k, _ in pad.items()] == ["c", "a", "d"]
    assert pad.tokens == 8
    moved = memory.get(b.id)
    assert moved is not None and moved.tier is Tier.EPISODIC
    assert moved.metadata["scratchpad_key"] == "b"
    [record] = memory.promotion_history(b.id)
    assert (record.from_tier, record.to_tier, record.reason) == (
        Tier.SCRATCHPAD,
        Tier.EPISODIC,
        EVICTION_REASON,
    )
    assert memory.get(a.id).tier is Tier.SCRATCHPAD  # type: ignore[union-attr]


@pytest.mark.slow  # 1.5 s measured on a busy machine
def test_an_entry_larger_than_the_budget_is_refused(memory: AgentMemoryManager) -> None:
    memory.scratchpad.put("small", "ok")
    with pytest.raises(InvalidInputError, match="budget"):
        memory.scratchpad.put("huge", "x" * (4 * memory.scratchpad.budget + 4))
    assert [k for k, _ in memory.scratchpad.items()] == ["small"]
    assert memory.statistics().storage.episodic_count == 0


def test_rollback_restores_ram_and_file(memory: AgentMemoryManager) -> None:
    memory.scratchpad.put("keep", "kept")
    with pytest.raises(Boom), memory.transaction():
        memory.scratchpad.put("keep", "changed")
        memory.scratchpad.put("new", "added")
        memory.scratchpad.delete("keep")
        raise Boom
    assert [(k, m.content) for k, m in memory.scratchpad.items()] == [("keep", "kept")]
    assert [m.content for m in memory.store.get_all_scratchpad()] == ["kept"]


def test_promotion_leaves_no_stale_scratchpad_entry(memory: AgentMemoryManager) -> None:
    entry = memory.scratchpad.put("goal", "Ship it")
    memory.promote(entry.id, Tier.SEMANTIC, reason="done")
    assert memory.scratchpad.get("goal") is None
    assert memory.store.get_scratchpad("goal") is None
    assert memory.get(entry.id).tier is Tier.SEMANTIC  # type: ignore[union-attr]


def test_forget_from_the_scratchpad_is_audited(memory: AgentMemoryManager) -> None:
    entry = memory.scratchpad.put("secret", "pin 1234")
    assert memory.forget(entry.id) is True
    assert memory.scratchpad.get("secret") is None
    assert [r.tier for r in memory.forgetting_log(entry.id)] == [Tier.SCRATCHPAD]


@pytest.mark.slow  # 1.5 s measured on a busy machine
def test_scratchpad_survives_restart_in_write_order(any_location: str, clock: FakeClock) -> None:
    with AgentMemoryManager.open(any_location, clock=clock) as memory:
        for key in ("one", "two", "three"):
            clock.advance(10)
            memory.scratchpad.put(key, key.upper())
        clock.advance(10)
        memory.scratchpad.put("one", "ONE again")
    with AgentMemoryManager.open(any_location, clock=clock) as memory:
        assert [(k, m.content) for k, m in memory.scratchpad.items()] == [
            ("two", "TWO"),
            ("three", "THREE"),
            ("one", "ONE again"),
        ]


@pytest.mark.slow  # 1.0 s measured on a busy machine
def test_closed_manager_scratchpad_raises(memory: AgentMemoryManager) -> None:
    memory.shutdown()
    with pytest.raises(StoreClosedError):
        memory.scratchpad.get("x")
    with pytest.raises(StoreClosedError):
        memory.scratchpad.put("x", "y")


def _ops(thread: int, count: int) -> list[tuple[str, str, str]]:
    """A deterministic sequence of scratchpad calls on this thread's own keys (and reads of
    the shared ones): ``(operation, key, content)``."""
    rng = random.Random(thread)
    ops: list[tuple[str, str, str]] = []
    for n in range(count):
        key = f"t{thread}-{rng.randrange(6)}"
        op = rng.choice(("put", "put", "get", "get-shared", "delete", "tokens", "statistics"))
        if op == "get-shared":
            op, key = "get", f"shared-{rng.randrange(SHARED)}"
        ops.append((op, key, f"thread {thread} step {n} " + "word " * rng.randrange(20)))
    return ops


SHARED = 300


def _apply(memory: AgentMemoryManager, op: str, key: str, content: str) -> None:
    pad = memory.scratchpad
    if op == "put":
        pad.put(key, content)
    elif op == "get":
        got = pad.get(key)
        assert got is None or got.key == key
    elif op == "delete":
        pad.delete(key)
    elif op == "tokens":
        assert pad.tokens >= 0
        assert all(k == m.key for k, m in pad.items())
    else:
        statistics = memory.statistics()
        assert statistics.scratchpad_tokens <= statistics.scratchpad_token_budget


def _state(memory: AgentMemoryManager) -> tuple[dict[str, str], int, dict[str, str]]:
    in_ram = {key: m.content for key, m in memory.scratchpad.items()}
    in_file = {m.key or "": m.content for m in memory.store.get_all_scratchpad()}
    return in_ram, memory.scratchpad.tokens, in_file


@pytest.mark.slow
def test_eight_threads_hammering_the_scratchpad_match_a_serial_replay(
    new_location: Callable[[str], str],
) -> None:
    """put/get/delete/tokens/statistics from 8 threads at once: no exception (``tokens``
    once iterated a dict that ``get`` reordered on another thread), and the end state
    equals the same calls made one after another (each thread has its own keys)."""
    threads_at = new_location("threads")
    # a round trip per call on a server: fewer steps keep it near the file's time
    steps = 250 if is_server_url(threads_at) else 1000
    plans = {thread: _ops(thread, steps) for thread in range(8)}
    budget = 1_000_000  # nothing is evicted, so the end state does not depend on timing
    switch = sys.getswitchinterval()

    def fresh(path: str) -> AgentMemoryManager:
        memory = AgentMemoryManager.open(path, embedder=None, scratchpad_token_budget=budget)
        with memory.transaction():
            for i in range(SHARED):
                memory.scratchpad.put(f"shared-{i}", f"shared entry {i} " + "word " * 10)
        return memory

    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def run(memory: AgentMemoryManager, thread: int) -> None:
        start.wait()
        try:
            for op in plans[thread]:
                _apply(memory, *op)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    sys.setswitchinterval(1e-6)  # switch threads as often as possible: more interleavings
    try:
        with fresh(threads_at) as memory:
            threads = [threading.Thread(target=run, args=(memory, t)) for t in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            concurrent = _state(memory)
    finally:
        sys.setswitchinterval(switch)
    assert errors == [], f"{len(errors)} thread(s) failed, first: {errors[0]!r}"
    with fresh(new_location("serial")) as memory:
        for thread in range(8):
            for op in plans[thread]:
                _apply(memory, *op)
        serial = _state(memory)
    assert concurrent == serial
    assert concurrent[0] == concurrent[2]  # RAM and file agree


@pytest.mark.slow  # 1.2 s measured on a busy machine
def test_a_get_during_another_threads_transaction_keeps_its_recency(
    memory: AgentMemoryManager,
) -> None:
    pad = memory.scratchpad
    pad.put("a", "first")
    pad.put("b", "second")
    inside, release = threading.Event(), threading.Event()

    def writer() -> None:
        with memory.transaction():
            pad.put("c", "third")
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=writer)
    thread.start()
    assert inside.wait(10)
    assert pad.get("a") is not None  # used after "c" was written: now the most recent
    release.set()
    thread.join()
    assert [k for k, _ in pad.items()] == ["b", "c", "a"]

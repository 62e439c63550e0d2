"""The manager shared by threads and processes: no uncommitted or stale reads."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from persistence import InvalidInputError, InvalidTypeError, Tier
from tests.conftest import FakeClock
from tiered_memory import AgentMemoryManager


def test_other_threads_never_see_uncommitted_scratchpad_changes(
    memory: AgentMemoryManager,
) -> None:
    memory.scratchpad.put("k", "committed")
    inside = threading.Event()
    release = threading.Event()
    seen: list[object] = []

    def writer() -> None:
        try:
            with memory.transaction():
                memory.scratchpad.put("k", "uncommitted")
                memory.scratchpad.put("new", "uncommitted too")
                inside.set()
                release.wait(10)
                raise RuntimeError("roll back")
        except RuntimeError:
            pass

    thread = threading.Thread(target=writer)
    thread.start()
    assert inside.wait(10)
    got = memory.scratchpad.get("k")
    seen += [got.content if got else None, "new" in memory.scratchpad, len(memory.scratchpad)]
    release.set()
    thread.join()
    assert seen == ["committed", False, 1]
    assert [(k, m.content) for k, m in memory.scratchpad.items()] == [("k", "committed")]


def test_a_reader_racing_a_promotion_never_keeps_a_stale_tier(memory: AgentMemoryManager) -> None:
    entries = [memory.scratchpad.put(f"k{i}", f"entry {i}") for i in range(40)]
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            for entry in entries:
                memory.get(entry.id)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for entry in entries:
            memory.promote(entry.id, Tier.EPISODIC)
    finally:
        stop.set()
        thread.join()
    assert {memory.get(e.id).tier for e in entries} == {Tier.EPISODIC}  # type: ignore[union-attr]


@pytest.mark.slow
def test_eight_threads_through_the_manager_lose_nothing(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    memory = make_memory(clock=None, scratchpad_token_budget=200)
    deadline = time.monotonic() + 2.0
    errors: list[BaseException] = []
    remembered: dict[int, set[str]] = {n: set() for n in range(8)}

    def work(n: int) -> None:
        rng = random.Random(n)
        try:
            while time.monotonic() < deadline:
                roll = rng.random()
                if roll < 0.4:
                    remembered[n].add(memory.remember(f"t{n}", tags=[f"t{n}"]).id)
                elif roll < 0.55:
                    memory.scratchpad.put(f"t{n}-{rng.randrange(20)}", "x" * rng.randrange(80))
                elif roll < 0.65 and remembered[n]:
                    memory_id = rng.choice(sorted(remembered[n]))
                    found = memory.get(memory_id)
                    if found is not None and found.tier is Tier.EPISODIC:
                        memory.promote(memory_id, Tier.SEMANTIC)
                elif roll < 0.75 and remembered[n]:
                    memory.review(rng.choice(sorted(remembered[n])), rng.randrange(6))
                elif remembered[n]:
                    assert memory.get(rng.choice(sorted(remembered[n]))) is not None
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for n, ids in remembered.items():
        found = {m.id for m in memory.query(tags=[f"t{n}"], limit=None)}
        assert found == ids
    assert memory.scratchpad.tokens <= 200
    assert memory.check_integrity().ok


def test_another_processes_commits_are_seen(db_path: Path, clock: FakeClock) -> None:
    with AgentMemoryManager.open(db_path, clock=clock, external_change_check_ms=0) as agent:
        kept = agent.remember("kept")
        gone = agent.remember("to be forgotten by the operator")
        agent.scratchpad.put("goal", "old goal")
        assert agent.get(gone.id) is not None  # cached now
        with AgentMemoryManager.open(db_path, clock=clock) as operator:
            operator.forget(gone.id)
            operator.scratchpad.put("goal", "new goal")
        assert agent.get(gone.id) is None
        assert agent.scratchpad.get("goal").content == "new goal"  # type: ignore[union-attr]
        assert agent.get(kept.id) is not None


def test_update_keeps_the_scratchpad_budget(make_memory: Callable[..., AgentMemoryManager]) -> None:
    memory = make_memory(scratchpad_token_budget=10)
    first = memory.scratchpad.put("a", "x" * 16)  # 4 tokens
    second = memory.scratchpad.put("b", "x" * 16)  # 4 tokens
    memory.update(second.id, content="x" * 28)  # 7 tokens: a must go
    assert memory.scratchpad.tokens <= 10
    assert memory.get(first.id).tier is Tier.EPISODIC  # type: ignore[union-attr]
    with pytest.raises(InvalidInputError, match="budget"):
        memory.update(second.id, content="x" * 200)
    assert memory.get(second.id).content == "x" * 28  # type: ignore[union-attr]


def test_remember_refuses_what_it_cannot_honour(memory: AgentMemoryManager) -> None:
    session = memory.start_session()
    memory.end_session(session.session_id)
    with pytest.raises(InvalidInputError, match="ended"):
        memory.remember("late", session_id=session.session_id)
    with pytest.raises(InvalidInputError, match="scratchpad"):
        memory.remember("x", tier=Tier.EPISODIC, key="k")
    with pytest.raises(InvalidTypeError):
        memory.remember("x", metadata=0)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        memory.scratchpad.put("k", "x", metadata="ab")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        memory.scratchpad.put("k", "x", tags=None)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        memory.start_session(metadata="ab")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        AgentMemoryManager.open(123)  # type: ignore[arg-type]
    assert memory.query() == [] and len(memory.scratchpad) == 0

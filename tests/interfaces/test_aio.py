"""AsyncAgentMemoryManager: the whole API as coroutines, cancellation that never leaves a
call half done, and many tasks on one file."""

from __future__ import annotations

import asyncio
import inspect
import random
import threading

import pytest

from persistence import InvalidTypeError, StoreClosedError, Tier
from tiered_memory import AgentMemoryManager, AsyncAgentMemoryManager

LIFECYCLE = {"open", "in_memory", "initialize", "shutdown", "close", "transaction"}


def test_every_public_method_of_the_manager_has_a_coroutine() -> None:
    public = {
        name
        for name, value in inspect.getmembers(AgentMemoryManager)
        if not name.startswith("_") and inspect.isfunction(value) and name not in LIFECYCLE
    }
    missing = sorted(
        name
        for name in public
        if not inspect.iscoroutinefunction(getattr(AsyncAgentMemoryManager, name, None))
    )
    assert missing == []
    for name in public:  # same documentation as the manager's method
        assert getattr(AsyncAgentMemoryManager, name).__doc__


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_round_trip_on_a_file_and_reopen(any_location: str) -> None:
    async def main() -> str:
        async with await AsyncAgentMemoryManager.open(
            any_location, embedder=None, embed_in_background=False
        ) as memory:
            session = await memory.start_session()
            m = await memory.remember(
                "The user prefers dark mode", session_id=session.session_id, tags=["ui"]
            )
            await memory.append_transcript(session.session_id, "user", "dark mode please")
            hits = await memory.recall("dark mode", k=3)
            assert [h.memory.id for h in hits] == [m.id] and hits[0].explanation.signals
            await memory.promote(m.id, Tier.SEMANTIC, reason="confirmed")
            both = await memory.remember_many(["one", {"content": "two", "tags": ["x"]}])
            assert [b.content for b in both] == ["one", "two"]
            assert [q.content for q in await memory.query(tags=["x"])] == ["two"]
            await memory.run(lambda mm: mm.scratchpad.put("goal", "ship"))
            await memory.end_session(session.session_id)
            stats = await memory.statistics()
            assert stats.storage.promotion_count == 1
            return m.id

    memory_id = asyncio.run(main())
    with AgentMemoryManager.open(any_location, embedder=None, embed_in_background=False) as memory:
        found = memory.get(memory_id)
        assert found is not None and found.tier is Tier.SEMANTIC
        assert memory.scratchpad.get("goal") is not None


def test_errors_are_the_managers_own_and_a_closed_manager_says_so() -> None:
    async def main() -> None:
        memory = await AsyncAgentMemoryManager.in_memory(embedder=None)
        with pytest.raises(InvalidTypeError, match="content"):
            await memory.remember(42)  # type: ignore[arg-type]
        await memory.shutdown()
        await memory.shutdown()  # twice is harmless
        with pytest.raises(StoreClosedError):
            await memory.remember("too late")

    asyncio.run(main())


def _blocking(started: threading.Event, release: threading.Event):  # type: ignore[no-untyped-def]
    def run(memory: AgentMemoryManager, content: str) -> str:
        started.set()
        assert release.wait(10)
        with memory.transaction():  # two writes: both land or neither
            m = memory.remember(content, tags=["pair"])
            memory.remember(content + " (second half)", tags=["pair"])
        return m.id

    return run


def test_a_cancelled_call_that_was_running_finishes_before_cancellation_is_raised(
    any_location: str,
) -> None:
    async def main() -> None:
        async with await AsyncAgentMemoryManager.open(
            any_location, embedder=None, embed_in_background=False, workers=1
        ) as memory:
            started, release = threading.Event(), threading.Event()
            task = asyncio.create_task(memory.run(_blocking(started, release), "running"))
            assert await asyncio.to_thread(started.wait, 10)
            task.cancel()
            await asyncio.sleep(0.01)
            task.cancel()  # cancelled twice: still waits for the call, raises once
            release.set()
            with pytest.raises(asyncio.CancelledError):
                await task
            # the call committed before the cancellation surfaced: both halves are there
            # (read at once from this thread, not queued behind the call)
            assert len(memory.manager.query(tags=["pair"])) == 2

    asyncio.run(main())


def test_a_cancelled_call_still_queued_never_runs(any_location: str) -> None:
    async def main() -> None:
        async with await AsyncAgentMemoryManager.open(
            any_location, embedder=None, embed_in_background=False, workers=1
        ) as memory:
            started, release = threading.Event(), threading.Event()
            busy = asyncio.create_task(memory.run(_blocking(started, release), "first"))
            assert await asyncio.to_thread(started.wait, 10)
            queued = asyncio.create_task(memory.remember("never written", tags=["queued"]))
            await asyncio.sleep(0.01)
            queued.cancel()
            with pytest.raises(asyncio.CancelledError):
                await queued
            release.set()
            await busy
            await memory.statistics()  # the worker has moved past where it was queued
            assert await memory.query(tags=["queued"]) == []

    asyncio.run(main())


@pytest.mark.slow  # 1.2 s measured on a busy machine
def test_a_timeout_around_a_call_leaves_it_whole(any_location: str) -> None:
    async def main() -> None:
        async with await AsyncAgentMemoryManager.open(
            any_location, embedder=None, embed_in_background=False
        ) as memory:
            started, release = threading.Event(), threading.Event()
            threading.Timer(0.2, release.set).start()
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.05):
                    await memory.run(_blocking(started, release), "slow")
            assert len(memory.manager.query(tags=["pair"])) == 2

    asyncio.run(main())


@pytest.mark.slow  # 3.9 s measured on a busy machine
def test_remembers_cancelled_at_random_moments_are_stored_whole_or_not_at_all(
    any_location: str,
) -> None:
    rng = random.Random(16)

    async def main() -> None:
        async with await AsyncAgentMemoryManager.open(
            any_location, embedder=None, embed_in_background=False
        ) as memory:
            session = await memory.start_session()
            tasks = [
                asyncio.create_task(
                    memory.remember(f"note {n}", session_id=session.session_id, tags=[f"t{n}"])
                )
                for n in range(60)
            ]
            for task in tasks:
                if rng.random() < 0.6:
                    await asyncio.sleep(rng.choice([0, 0, 0.0005, 0.002]))
                    task.cancel()
            outcomes = await asyncio.gather(*tasks, return_exceptions=True)
            cancelled = [isinstance(o, asyncio.CancelledError) for o in outcomes]
            assert any(cancelled) and not all(cancelled)
            for n, outcome in enumerate(outcomes):
                found = await memory.query(tags=[f"t{n}"])
                if not cancelled[n]:
                    assert [m.id for m in found] == [outcome.id]  # type: ignore[union-attr]
                assert len(found) <= 1
                for m in found:  # a stored one is whole: its schedule came with it
                    assert await memory.schedule(m.id) is not None
            assert (await memory.run(lambda m: m.check_integrity())).ok

    asyncio.run(main())


@pytest.mark.slow  # 19.1 s measured on a busy machine
def test_200_tasks_remember_recall_and_promote_on_one_file(any_location: str) -> None:
    async def agent(memory: AsyncAgentMemoryManager, n: int) -> str:
        m = await memory.remember(f"fact {n} about topic{n % 7} and word{n}", tags=[f"a{n}"])
        hits = await memory.recall(f"word{n}", k=3)
        assert m.id in [h.memory.id for h in hits]
        await memory.promote(m.id, Tier.SEMANTIC, reason=f"agent {n}")
        return m.id

    async def main() -> None:
        async with await AsyncAgentMemoryManager.open(
            any_location, embedder=None, embed_in_background=False
        ) as memory:
            ids = await asyncio.gather(*(agent(memory, n) for n in range(200)))
            assert len(set(ids)) == 200
            stats = (await memory.statistics()).storage
            assert stats.promotion_count == 200
            semantic = await memory.query(Tier.SEMANTIC, limit=None)
            assert {m.id for m in semantic} == set(ids)
            assert (await memory.run(lambda m: m.check_integrity())).ok

    asyncio.run(main())

"""Event-loop lag and throughput of AsyncAgentMemoryManager, by number of workers.

Run: ``.venv/bin/python -m pytest benchmarks/test_aio_bench.py -s`` (a minute or so).

``TASKS`` concurrent tasks each remember a memory, recall it and promote it, on one file
(keyword recall, no embedder: the work is SQLite's and the library's Python). Beside
them a ticker sleeps 1 ms in a loop and records how late it wakes: that is how long the
event loop was blocked. The target is a worst lag under 20 ms. The raw floor is the same
calls made one after another through the synchronous manager, in the same run.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks.smoke import size, smoke
from persistence import Tier
from tiered_memory import AgentMemoryManager, AsyncAgentMemoryManager

TASKS = size(200, 10)
ROUNDS = 1 if smoke() else 3
LINES: list[str] = []


def _work(memory: AgentMemoryManager, n: int) -> None:
    m = memory.remember(f"fact {n} about topic{n % 7} and word{n}", tags=[f"a{n}"])
    memory.recall(f"word{n} topic{n % 7}", k=5)
    memory.promote(m.id, Tier.SEMANTIC, reason="bench")


async def _agent(memory: AsyncAgentMemoryManager, n: int) -> None:
    m = await memory.remember(f"fact {n} about topic{n % 7} and word{n}", tags=[f"a{n}"])
    await memory.recall(f"word{n} topic{n % 7}", k=5)
    await memory.promote(m.id, Tier.SEMANTIC, reason="bench")


async def _run(path: Path, workers: int) -> tuple[float, list[float]]:
    """Seconds for TASKS agents, and every lag the ticker saw (seconds)."""
    lags: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            t0 = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - t0 - 0.001)

    async with await AsyncAgentMemoryManager.open(
        path, embedder=None, embed_in_background=False, workers=workers
    ) as memory:
        tick = asyncio.create_task(ticker())
        t0 = time.perf_counter()
        await asyncio.gather(*(_agent(memory, n) for n in range(TASKS)))
        elapsed = time.perf_counter() - t0
        stop.set()
        await tick
    return elapsed, lags


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_loop_lag_and_throughput(benchmark: Any, tmp_path: Path, workers: int) -> None:
    runs: list[tuple[float, list[float]]] = []

    def once() -> None:
        path = tmp_path / f"aio-{workers}-{len(runs)}.db"
        runs.append(asyncio.run(_run(path, workers)))

    benchmark.pedantic(once, rounds=ROUNDS, iterations=1)
    raw_path = tmp_path / f"sync-{workers}.db"
    with AgentMemoryManager.open(raw_path, embedder=None, embed_in_background=False) as memory:
        t0 = time.perf_counter()
        for n in range(TASKS):
            _work(memory, n)
        raw = time.perf_counter() - t0
    elapsed = float(np.median([e for e, _ in runs]))
    lags = np.array([lag for _, run_lags in runs for lag in run_lags]) * 1000
    worst = float(lags.max()) if lags.size else 0.0
    LINES.append(
        f"workers={workers}: {TASKS} tasks in {elapsed * 1000:.0f} ms "
        f"(sync, one after another: {raw * 1000:.0f} ms, ratio {elapsed / raw:.2f}x); "
        f"loop lag p50 {np.median(lags):.2f} ms, p99 {np.percentile(lags, 99):.2f} ms, "
        f"max {worst:.2f} ms ({'under' if worst < 20 else 'OVER'} the 20 ms target)"
    )
    print("\n" + "\n".join(LINES))

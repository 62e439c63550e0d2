#!/usr/bin/env python3
"""p50 of ``context()`` at 250/500/1,000/2,000 tokens and of ``recall(k=10)`` on a saved
LoCoMo conversation, for whichever commit ``PYTHONPATH`` names: one JSON line.

Each call asks a new question and embeds it (the manager's query vectors are dropped
before each call); the manager's RAM copies are warmed first with 30 contexts, as in a
running agent. Wall time, the process's CPU time and the calling thread's CPU time are
reported (medians, ms): on a shared machine the wall time is mostly waiting for a core,
so compare two commits run one after the other, alternately, at the same load::

    for i in 1 2 3; do for c in BEFORE AFTER; do
      PYTHONPATH=$c .venv/bin/python benchmarks/locomo_context_speed.py $c; done; done

``embed alone`` is the query's embedding by itself (the ONNX call: every call above
pays it), the floor under the rest; ``load`` is the load average as the run ended.

The conversation's file is the one ``benchmarks/locomo_same_answers.py`` saves
(``--files``, made if missing); each run opens a fresh copy of it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.eval_locomo import DEFAULT_DATA, WHERE_TO_GET, load_locomo
from benchmarks.locomo_adapter import ContextAdapter
from benchmarks.locomo_same_answers import saved_file
from tiered_memory import AgentMemoryManager

BUDGETS = (250, 500, 1000, 2000)
WARM = 30
CALLS = 100


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("label", help="names the run in the output (before, after)")
    ap.add_argument("--data", default=str(DEFAULT_DATA) if DEFAULT_DATA.exists() else None)
    ap.add_argument("--conv", default="conv-26")
    ap.add_argument("--files", default="/tmp/locomo-same-answers")
    a = ap.parse_args(argv)
    if a.data is None or not Path(a.data).exists():
        raise SystemExit(WHERE_TO_GET)
    adapter = ContextAdapter()
    conv = next(c for c in load_locomo(a.data) if c.conv_id == a.conv)
    Path(a.files).mkdir(parents=True, exist_ok=True)
    saved, now = saved_file(adapter, conv, Path(a.files))
    work = tempfile.TemporaryDirectory(prefix="context-speed-")
    memory = AgentMemoryManager.open(
        shutil.copy(saved, work.name), embedder=adapter._embedder, recall_review_quality=None,
        clock=lambda: now, embed_in_background=False,
    )  # fmt: skip
    questions = [q.question for q in conv.questions]
    for question in questions[:WARM]:
        memory.context(question, max_tokens=BUDGETS[-1])
    calls: list[tuple[str, Callable[[str], object]]] = [
        (f"context {b}", lambda q, b=b: memory.context(q, max_tokens=b)) for b in BUDGETS
    ]
    calls.append(("recall k=10", lambda q: memory.recall(q, k=10)))
    calls.append(("embed alone", memory.embeddings.embed_query))  # the query's floor
    out: dict[str, list[float]] = {}
    for name, call in calls:
        wall, cpu, thread = [], [], []
        for question in questions[WARM : WARM + CALLS]:
            memory.embeddings._queries.clear()  # each call embeds its question
            w, c, t = time.perf_counter(), time.process_time(), time.thread_time()
            call(question)
            wall.append(time.perf_counter() - w)
            cpu.append(time.process_time() - c)
            thread.append(time.thread_time() - t)
        out[name] = [round(1000 * statistics.median(x), 1) for x in (wall, cpu, thread)]
    memory.shutdown()
    work.cleanup()
    load = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps({"label": a.label, "conv": a.conv, "load": load, "p50": out}), flush=True)


if __name__ == "__main__":
    main()

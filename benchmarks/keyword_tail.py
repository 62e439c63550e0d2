"""The keyword leg's tail at scale (issue 46): p50 / p90 / p99 / max, wall and CPU time
per call, over varied queries, beside the raw FTS5 baseline in the same process.

    .venv/bin/python -m benchmarks.keyword_tail --file DIR/memories_1000000.db [--queries 1000]

``--file`` is a file ``benchmarks/million.py`` built (words drawn as in text). The
queries (:func:`queries`, fixed seed) are LoCoMo-like questions of 1 to 12 content
words, common and rare ones and some the file never saw, each searched as recall
searches it: :func:`~persistence.sqlite.keyword_search.keyword_search`, the best 100
by bm25 over the memory and its window. The raw baseline is the plain bm25 top 100 of
the ``OR`` of the words (every match ranked: the search without the library's rules).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from benchmarks.test_recall_bench import WORDS, word_odds

OPENERS = ("what did", "when did", "how many times has", "where does", "why did", "who is", "")
"""Question openers (stopwords: :func:`~tiered_memory.recall.settings.keywords` drops
them, as it does LoCoMo's)."""


def queries(count: int, seed: int = 46) -> list[str]:
    """``count`` question-like queries of 1-12 content words: each word common (drawn
    as the file's words are), rare (drawn evenly over the vocabulary, most of which is
    rare) or unknown (one word in ten), after a stopword opener."""
    rng = np.random.default_rng(seed)
    odds = word_odds(True)
    made = []
    for _ in range(count):
        words = []
        for _ in range(int(rng.integers(1, 13))):
            pick = rng.random()
            if pick < 0.1:
                words.append(f"never{rng.integers(10**6)}")
            elif pick < 0.55:
                words.append(WORDS[int(rng.choice(len(WORDS), p=odds))])
            else:
                words.append(WORDS[int(rng.integers(len(WORDS)))])
        made.append(f"{OPENERS[int(rng.integers(len(OPENERS)))]} {' '.join(words)}?".strip())
    return made


def timed(call: Callable[[], object], runs: Sequence[object]) -> dict[str, float]:
    """Wall and CPU milliseconds per call of ``call`` once per item of ``runs``
    (``call`` reads the current item through a closure): percentiles and max."""
    wall, cpu = [], []
    for _ in runs:
        start, used = time.perf_counter(), time.thread_time()
        call()
        wall.append(time.perf_counter() - start)
        cpu.append(time.thread_time() - used)
    w, c = np.array(wall) * 1000, np.array(cpu) * 1000
    return {
        "p50": float(np.percentile(w, 50)),
        "p90": float(np.percentile(w, 90)),
        "p99": float(np.percentile(w, 99)),
        "max": float(w.max()),
        "cpu_p50": float(np.percentile(c, 50)),
        "cpu_p99": float(np.percentile(c, 99)),
        "cpu_max": float(c.max()),
    }


def measure(path: Path, count: int, raw: bool = True) -> dict[str, object]:
    """The keyword leg over :func:`queries` (``count`` of them, after 20 to warm up) on
    the file at ``path``, and the raw baseline over the same queries (``raw``)."""
    from benchmarks.raw_sql import raw_keyword
    from persistence import MemoryFilter
    from persistence.sqlite import keyword_search as leg
    from persistence.sqlite.sql.index_sql import fts5_match
    from tiered_memory import AgentMemoryManager
    from tiered_memory.recall.settings import RecallSettings, keywords

    settings = RecallSettings()
    texts = queries(count + 20)
    words = [keywords(q) for q in texts]
    result: dict[str, object] = {"queries": count}
    with (
        AgentMemoryManager.open(path, embedder=None, recall_review_quality=None) as memory,
        memory.store.engine.reading() as conn,
    ):
        at = iter(words)
        for w in words[:20]:
            leg.keyword_search(conn, w, settings.depth, MemoryFilter(), 0.5, 0.5)
        explained = 0

        def library() -> None:
            nonlocal explained
            hits = leg.keyword_search(
                conn, next(at), settings.depth, MemoryFilter(),
                settings.context_weight, settings.after_weight,
            )  # fmt: skip
            explained += bool(hits.skipped)

        result["leg"] = timed(library, words[20:])
        result["bounded"] = explained
        if raw:
            at = iter(words)
            result["raw"] = timed(
                lambda: raw_keyword(conn, fts5_match(next(at)), settings.depth), words[20:]
            )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", required=True, type=Path)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--no-raw", action="store_true")
    args = parser.parse_args()
    found = measure(args.file, args.queries, not args.no_raw)
    found["load"] = round(os.getloadavg()[0], 2)
    for side in ("leg", "raw"):
        if side in found:
            t: dict[str, float] = found[side]  # type: ignore[assignment]
            print(
                f"{side:>4}: p50 {t['p50']:.2f} p90 {t['p90']:.2f} p99 {t['p99']:.2f} "
                f"max {t['max']:.2f} ms (p99/p50 {t['p99'] / t['p50']:.2f}); CPU p50 "
                f"{t['cpu_p50']:.2f} p99 {t['cpu_p99']:.2f} max {t['cpu_max']:.2f} ms"
            )
    if "raw" in found:
        leg_p, raw_p = found["leg"], found["raw"]  # type: ignore[index]
        print(
            f"leg / raw: p50 {leg_p['p50'] / raw_p['p50']:.2f}x, "  # type: ignore[index]
            f"p99 {leg_p['p99'] / raw_p['p99']:.2f}x; load {found['load']}"  # type: ignore[index]
        )
    print(json.dumps(found))


if __name__ == "__main__":
    main()

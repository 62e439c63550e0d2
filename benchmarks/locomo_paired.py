#!/usr/bin/env python3
"""Paired LoCoMo comparison of recall settings: one indexing, every variant on it.

Two indexings of the same conversations differ a little (the graph signal's one-hop
walk; README), so a setting is judged against the defaults on the same index: this
script indexes the development conversations once with the eval's adapter, then asks
every question under each variant (``RecallSettings`` fields swapped on the open
managers, in turn per question so load drifts hit all alike) through the public
``recall()``, and prints recall@5 / @10 per half (tuning conv-26/30/41, check
conv-42/43) and category, as differences from the first variant, with each variant's
p50 per query (query embedding included). ``--indexings N`` repeats it on fresh
indexes. Experiment code: the settings it swaps are the library's own::

    .venv/bin/python benchmarks/locomo_paired.py --indexings 2 \\
        --variant defaults: --variant adj0.3:adjacency_weight=0.3
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.eval_locomo import (  # noqa: E402
    CATEGORY_NAMES,
    DEFAULT_DATA,
    SCORED_CATEGORIES,
    load_locomo,
)
from benchmarks.locomo_adapter import TieredMemoryAdapter, flag  # noqa: E402
from tiered_memory.recall.settings import RecallSettings  # noqa: E402

TUNING = ("conv-26", "conv-30", "conv-41")


def parse_variant(spec: str) -> tuple[str, dict[str, Any]]:
    """``name:field=value,field=value`` -> (name, RecallSettings overrides)."""
    name, _, rest = spec.partition(":")
    kinds = {f.name: f.type for f in dataclasses.fields(RecallSettings)}
    casts = {"int": int, "float": float, "str": str, "bool": flag}
    overrides: dict[str, Any] = {}
    for pair in filter(None, rest.split(",")):
        key, _, value = pair.partition("=")
        if key not in kinds:
            raise SystemExit(f"unknown RecallSettings field {key!r}")
        overrides[key] = casts.get(str(kinds[key]), float)(value)
    RecallSettings(**overrides)  # fail early on a bad value
    return name or "defaults", overrides


def one_indexing(convs: list[Any], variants: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Index once; per variant: per (half, category) lists of recall@5/@10, latencies."""
    adapter = TieredMemoryAdapter()
    started = time.perf_counter()
    for conv in convs:
        adapter.index(conv.conv_id, conv.memories)
    index_s = time.perf_counter() - started
    scores: dict[str, dict[tuple[str, str], list[tuple[float, float]]]] = {
        name: defaultdict(list) for name, _ in variants
    }
    times: dict[str, list[float]] = {name: [] for name, _ in variants}
    for conv in convs:
        manager = adapter._managers[conv.conv_id]  # the open manager of this conversation
        recaller = manager._recall
        base = recaller.settings
        chosen = [(name, dataclasses.replace(base, **o)) for name, o in variants]
        half = "tuning" if conv.conv_id in TUNING else "check"
        for q in conv.questions:
            if q.category not in SCORED_CATEGORIES or not q.evidence:
                continue
            evidence = set(q.evidence)
            for name, settings in chosen:
                recaller.settings = settings
                with manager.embeddings._queries_lock:  # every variant embeds its query
                    manager.embeddings._queries.clear()
                t0 = time.perf_counter()
                hits = manager.recall(q.question, k=10)
                times[name].append(time.perf_counter() - t0)
                ids = [adapter._dia_ids[h.memory.id] for h in hits]
                r5 = len(evidence & set(ids[:5])) / len(evidence)
                r10 = len(evidence & set(ids[:10])) / len(evidence)
                for key in ((half, "overall"), (half, CATEGORY_NAMES[q.category])):
                    scores[name][key].append((r5, r10))
        recaller.settings = base
    adapter.close()
    return {"scores": scores, "times": times, "index_s": index_s}


def table(runs: list[dict[str, Any]], names: list[str]) -> str:
    """Mean over indexings; first variant absolute, the others as differences."""
    cols = [(h, c) for c in ("overall", "multi-hop", "temporal", "open-domain", "single-hop")
            for h in ("tuning", "check")]  # fmt: skip
    head = "| variant | p50 ms | " + " | ".join(f"{c} {h}" for h, c in cols) + " |"
    lines = [head, "|" + "---|" * (len(cols) + 2)]
    means: dict[str, dict[tuple[str, str], tuple[float, float]]] = {}
    for name in names:
        means[name] = {}
        for col in cols:
            pairs = [p for run in runs for p in run["scores"][name][col]]
            means[name][col] = (statistics.fmean(p[0] for p in pairs),
                                statistics.fmean(p[1] for p in pairs))  # fmt: skip
    first = names[0]
    for name in names:
        p50 = statistics.median(t for run in runs for t in run["times"][name]) * 1000
        cells = []
        for col in cols:
            r5, r10 = means[name][col]
            if name == first:
                cells.append(f"{r5:.3f} / {r10:.3f}")
            else:
                b5, b10 = means[first][col]
                cells.append(f"{r5 - b5:+.3f} / {r10 - b10:+.3f}")
        lines.append(f"| {name} | {p50:.1f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument(
        "--variant", action="append", default=[],
        help="name:field=value,... (the first is the reference; repeatable)",
    )  # fmt: skip
    ap.add_argument("--indexings", type=int, default=1)
    args = ap.parse_args()
    variants = [parse_variant(v) for v in (args.variant or ["defaults:"])]
    convs = load_locomo(args.data)
    runs = []
    for n in range(args.indexings):
        run = one_indexing(convs, variants)
        runs.append(run)
        print(f"indexing {n + 1}: {run['index_s']:.1f} s", flush=True)
        print(table([run], [name for name, _ in variants]), flush=True)
    if len(runs) > 1:
        print(f"mean over {len(runs)} indexings")
        print(table(runs, [name for name, _ in variants]))


if __name__ == "__main__":
    main()

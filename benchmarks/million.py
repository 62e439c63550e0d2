"""The million-memory figures (issue 32): RSS with the default model, and recall p50.

    .venv/bin/python -m benchmarks.million --dir /somewhere/big [--count 1000000]

Builds ``--dir``/million.db once (kept: a rerun measures the same file) as
``benchmarks/test_recall_bench.py`` does, as cheaply as possible: clustered random
384-d vectors given at write time, rows bulk-loaded with the index triggers off and the
indexes rebuilt once, then ``maintain()`` (which writes the vector codes). Then, each in a
fresh process:

- RSS: open the file with the default (compact) MiniLM, recall once (query embedding
  included), then write ``--writes`` memories with ``remember()`` (the model embeds them
  in the background; ``flush()`` waits for the last); peak RSS (VmHWM) after the first
  recall and at the end, and RSS held at the end (VmRSS). Goal: peak <= 400 MB.
- recall p50 / p99 with the query vectors precomputed (query embedding excluded), against
  a numpy exact scan of the float vectors in RAM in the same process. Goal: p50 <= 50 ms.
  Then the keyword leg alone, p50 with its bound
  (``persistence.sqlite.keyword_search.bounded``) and with every match ranked.

The memories' words are drawn as in text (``zipf``: a few common words, many rare
ones); files are named by size (``memories_<count>.db``), their build time beside them
(``.build.json``). ``benchmarks/scale_run.py`` measures several sizes in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

RSS_PROBE = """
import json, os, sys, time
sys.path.insert(0, sys.argv[3])
from tiered_memory import AgentMemoryManager
from tiered_memory.embedding import compact_model
from tiered_memory.embedding.embedders import OnnxEmbedder

def status():
    lines = [ln for ln in open("/proc/self/status") if ln.startswith(("VmHWM", "VmRSS"))]
    return {k: int(v.split()[0]) / 1024 for k, v in (ln.split(":", 1) for ln in lines)}

start = time.perf_counter()
model = OnnxEmbedder(compact_model.build(None), model_id="bench-random")  # the file's id
options = json.loads(os.environ.get("TM_OPEN_OPTIONS", "{}"))  # e.g. vector_index
with AgentMemoryManager.open(sys.argv[1], embedder=model, recall_review_quality=None,
                             **options) as memory:
    memory.recall("w1 w7 w13 question", k=10)
    first = time.perf_counter() - start
    after_first = status()
    for n in range(int(sys.argv[2])):
        memory.remember(f"new memory {n} about w{n % 5000} and w{n * 7 % 5000}",
                        session_id=None)
    memory.flush()
    end = status()
print({"first_s": first, "after_first": after_first, "end": end})
"""

RECALL_PROBE = """
import json, os, sys, time
sys.path.insert(0, sys.argv[3])
import numpy as np
from benchmarks.test_recall_bench import LookupEmbedder, WORDS, _unit
from tiered_memory import AgentMemoryManager

vectors = np.load(sys.argv[1] + ".npy", mmap_mode="r")
count, n = len(vectors), int(sys.argv[2])
rng = np.random.default_rng(5)
embedder = LookupEmbedder()
queries = []
for q in range(n + 10):
    text = " ".join(rng.choice(WORDS, 4)) + f" query{q}"
    noisy = vectors[rng.integers(count)] + 0.5 * _unit(rng, 1)[0]
    embedder.vectors[text] = (noisy / np.linalg.norm(noisy)).astype(np.float32)
    queries.append(text)
options = json.loads(os.environ.get("TM_OPEN_OPTIONS", "{}"))  # e.g. vector_index
with AgentMemoryManager.open(sys.argv[1], embedder=embedder, recall_review_quality=None,
                             **options) as memory:
    for q in queries[:10]:
        memory.recall(q, k=10)
    took, cpu = [], []
    for q in queries[10:]:
        start, used = time.perf_counter(), time.process_time()
        memory.recall(q, k=10)
        took.append(time.perf_counter() - start)
        cpu.append(time.process_time() - used)
    # The keyword leg alone, with its bound and without (every match ranked)
    from persistence import MemoryFilter
    from persistence.sqlite import keyword_search as index_sql  # (index_sql before issue 41)
    from tiered_memory.recall.settings import keywords
    leg = {}
    caps = (("keyword_rule", getattr(index_sql, "RANK_CAP", 0)), ("keyword_all", 2**62))
    with memory.store.engine.reading() as conn:  # (files before the rule: not measured)
        for name, cap in caps if hasattr(index_sql, "RANK_CAP") else ():
            spent = []
            for q in queries[10:60]:
                start = time.perf_counter()
                index_sql.keyword_search(conn, keywords(q), 100, MemoryFilter(), 0.5, 0.5,
                                         rank_cap=cap)
                spent.append(time.perf_counter() - start)
            leg[name] = float(np.median(spent) * 1000)
ms = np.array(took) * 1000
matrix = np.array(vectors)  # in RAM
matrix @ embedder.vectors[queries[0]]  # warm
scan = []
for q in queries[10:60]:
    start = time.perf_counter()
    np.argpartition(-(matrix @ embedder.vectors[q]), 100)[:100]
    scan.append(time.perf_counter() - start)
print({"p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)),
       "cpu_p50": float(np.median(cpu) * 1000), "scan_p50": float(np.median(scan) * 1000),
       **leg})
"""


def library(folder: Path, count: int) -> Path:
    """Where the file of ``count`` memories is kept in ``folder`` (built once, reused)."""
    return folder / f"memories_{count}.db"


def build(path: Path, count: int) -> None:
    """The file (and its vectors beside it, for the queries), unless it is there."""
    if path.exists() and Path(f"{path}.npy").exists():
        return
    import numpy as np

    from benchmarks.test_recall_bench import _build
    from tiered_memory import AgentMemoryManager

    start = time.perf_counter()
    vectors = _build(path, count, zipf=True)
    np.save(f"{path}.npy", vectors)
    built = time.perf_counter() - start
    with AgentMemoryManager.open(path, embedder=None) as memory:
        memory.maintain()
    maintained = time.perf_counter() - start - built
    Path(f"{path}.build.json").write_text(json.dumps({"build_s": built, "maintain_s": maintained}))
    print(f"built {count:,} memories in {built:.0f} s, maintain() {maintained:.0f} s", flush=True)


def probe(script: str, *args: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", script, *args, str(ROOT)],
        capture_output=True, text=True, check=True, timeout=7200, cwd=ROOT,
    ).stdout  # fmt: skip
    return dict(eval(out.strip().splitlines()[-1]))  # noqa: S307 (our own probe's dict)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--writes", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--skip", default="", help="comma list of parts to skip: rss,recall")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    path = library(args.dir, args.count)
    build(path, args.count)
    load = os.getloadavg()[0]
    result: dict[str, object] = {"count": args.count, "load": round(load, 1)}
    if "rss" not in args.skip:
        rss = probe(RSS_PROBE, str(path), str(args.writes))
        result["rss"] = rss
        first, end = rss["after_first"], rss["end"]
        print(
            f"{args.count:,} memories, default (compact) model: open + first recall "
            f"{rss['first_s']:.2f} s, peak RSS {first['VmHWM']:.0f} MiB after it "  # type: ignore[index]
            f"(held {first['VmRSS']:.0f}); after {args.writes:,} remember() calls embedded: "  # type: ignore[index]
            f"peak {end['VmHWM']:.0f} MiB, held {end['VmRSS']:.0f} MiB (goal: peak <= 400 MB "  # type: ignore[index]
            f"= 381 MiB); load {load:.1f}",
            flush=True,
        )
    if "recall" not in args.skip:
        rec = probe(RECALL_PROBE, str(path), str(args.queries))
        result["recall"] = rec
        print(
            f"{args.count:,} memories: recall() p50 {rec['p50']:.1f} ms p99 {rec['p99']:.1f} ms "
            f"(query embedding excluded, goal p50 <= 50 ms; CPU p50 {rec['cpu_p50']:.1f} ms, "
            f"both threads); numpy exact scan of the floats "
            f"in RAM p50 {rec['scan_p50']:.1f} ms; keyword leg p50 "
            f"{rec.get('keyword_rule', float('nan')):.1f} ms (every match ranked: "
            f"{rec.get('keyword_all', float('nan')):.1f} ms); load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()

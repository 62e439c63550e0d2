"""Issue 46's scale run: every figure of the issue, per file size, in one run, with the
issue's targets and the slope between sizes.

    .venv/bin/python -m benchmarks.scale_run --dir /somewhere/big \
        --sizes 100000,1000000,3000000 [--vector-index ram|cells] [--smoke]

Files are built once in ``--dir`` by :mod:`benchmarks.million` (clustered 384-d vectors,
words drawn as in text) and reused. Each part runs in a fresh process:

- open + first recall (the compact model embeds the query) and peak RSS after it, then
  ``--writes`` embedded ``remember()`` calls and peak RSS after them (on a copy: the kept
  file stays as built);
- ``recall()`` p50 / p99 with the query vectors precomputed (no query embedding);
- the keyword leg alone, p50 / p99 over varied queries (:mod:`benchmarks.keyword_tail`);
- vector recall@10 against an exact numpy scan on a sample, unfiltered and with a time
  filter that accepts about a tenth of the file;
- ``remember()`` taking turns with its write floor (the raw SQL writing the same rows
  and indexes) on two copies of the file: the ratio of medians.

``--vector-index`` is passed to the store when it has that option (``MemoryConfig``'s
``vector_index``); otherwise only ``ram`` (the vector copy in RAM) exists. A JSON line
per run goes to ``benchmarks/results/scale_run.jsonl`` (``--no-record``: not).
``--smoke`` runs each part once at 2,000 memories with a handful of queries and writes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.million import RECALL_PROBE, RSS_PROBE, build, library
from benchmarks.results_file import record_run

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "scale_run.jsonl"

VECTOR_PROBE = """
import json, os, sys
sys.path.insert(0, sys.argv[3])
import numpy as np
from benchmarks.test_recall_bench import _unit
from persistence import MemoryFilter
from tiered_memory import AgentMemoryManager

path, n = sys.argv[1], int(sys.argv[2])
vectors = np.load(path + ".npy", mmap_mode="r")
count = len(vectors)
rng = np.random.default_rng(46)
queries = vectors[rng.integers(count, size=n)] + 0.5 * _unit(rng, n)
queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
options = json.loads(os.environ.get("TM_OPEN_OPTIONS", "{}"))
with AgentMemoryManager.open(path, embedder=None, recall_review_quality=None,
                             **options) as memory:
    store = memory.store
    # A time filter that accepts about a tenth of the memories (built in id order).
    lo, hi = int(count * 0.45), int(count * 0.55)
    with store.engine.reading() as conn:
        at = lambda i: conn.execute(
            "SELECT created_at FROM episodic WHERE id = ?", (f"m{i:07d}",)).fetchone()[0]
        after, before = at(lo), at(hi)
        inside = np.array([int(r[0][1:]) for r in conn.execute(
            "SELECT id FROM episodic WHERE created_at >= ? AND created_at < ? "
            "AND id LIKE 'm%'", (after, before))])
    where = MemoryFilter(created_after=after, created_before=before)
    matrix = np.asarray(vectors)
    found = {"plain": [], "filtered": []}
    for q in queries:
        exact = set(np.argsort(-(matrix @ q))[:10])
        got = {int(m[1:]) for m, _ in store.indexes.vector_search(q, 10)}
        found["plain"].append(len(exact & got) / 10)
        scores = matrix[inside] @ q
        exact = set(inside[np.argsort(-scores)[:10]])
        got = {int(m[1:]) for m, _ in store.indexes.vector_search(q, 10, where=where)}
        found["filtered"].append(len(exact & got) / 10)
print({"recall": float(np.mean(found["plain"])),
       "filtered_recall": float(np.mean(found["filtered"])),
       "filter_share": len(inside) / count, "queries": n})
"""

FLOOR_PROBE = """
import json, os, statistics, sys, time
sys.path.insert(0, sys.argv[4])
from benchmarks.test_manager_bench import _raw_insert
from persistence import Memory
from persistence.sqlite.connection import ConnectionOptions, connect, connection_wal
from tiered_memory import AgentMemoryManager

calls = int(sys.argv[3])
options = json.loads(os.environ.get("TM_OPEN_OPTIONS", "{}"))
raw = connect(sys.argv[2], ConnectionOptions())
connection_wal(raw)
with AgentMemoryManager.open(sys.argv[1], embedder=None, **options) as memory:
    library, floor = [], []
    for n in range(calls):
        start = time.perf_counter()
        memory.remember(f"turns memory {n}", tags=["bench"])
        library.append(time.perf_counter() - start)
        row = Memory.create(f"turns memory {n}", tags=("bench",))
        start = time.perf_counter()
        _raw_insert(raw, row)
        floor.append(time.perf_counter() - start)
raw.close()
lib, low = statistics.median(library) * 1e6, statistics.median(floor) * 1e6
print({"library_us": lib, "floor_us": low, "ratio": lib / low, "calls": calls})
"""

KEYWORD_PROBE = """
import sys
sys.path.insert(0, sys.argv[3])
from pathlib import Path
from benchmarks.keyword_tail import measure
print(measure(Path(sys.argv[1]), int(sys.argv[2]), raw=False))
"""

TARGETS = {
    "open_first_ms": "<= 150 ms at 1M, 250 at 10M",
    "rss_first_mib": "<= 200 MiB at 1M; 10M <= 1M + 30",
    "rss_writes_mib": "(after the writes)",
    "recall_p50_ms": "<= 40 ms at 1M, 80 at 10M",
    "recall_p99_ms": "<= 3x p50",
    "keyword_p50_ms": "",
    "keyword_p99_ms": "<= 3x p50",
    "vector_recall": ">= 0.95",
    "vector_recall_filtered": ">= 0.95",
    "remember_vs_floor": "<= 2x",
    "build_s": "",
    "file_mib": "",
}


def vector_index_option(choice: str) -> dict[str, str]:
    """The open option that selects the vector stage, when the store has one (a guarded
    look-up: ``MemoryConfig.vector_index``); ``{}`` for ``ram`` otherwise."""
    from tiered_memory.config import MemoryConfig

    if "vector_index" in {f.name for f in dataclasses.fields(MemoryConfig)}:
        return {"vector_index": choice}
    if choice != "ram":
        raise SystemExit(f"--vector-index {choice}: this library has only the RAM vector copy")
    return {}


def run(script: str, *args: str, options: dict[str, str]) -> dict[str, object]:
    env = {**os.environ, "TM_OPEN_OPTIONS": json.dumps(options)}
    done = subprocess.run(
        [sys.executable, "-c", script, *args, str(ROOT)],
        capture_output=True, text=True, timeout=7200, cwd=ROOT, env=env,
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(f"probe failed:\n{done.stderr[-3000:]}")
    return dict(eval(done.stdout.strip().splitlines()[-1]))  # noqa: S307 (our own probe's dict)


def copy(path: Path, to: Path) -> Path:
    """A copy of the file (and its WAL, if any) at ``to``."""
    for suffix in ("", "-wal"):
        if Path(f"{path}{suffix}").exists():
            shutil.copyfile(f"{path}{suffix}", f"{to}{suffix}")
    return to


def measure(path: Path, count: int, args: argparse.Namespace, options: dict[str, str]) -> dict:
    """Every figure for the file of ``count`` memories at ``path``."""
    built = json.loads(Path(f"{path}.build.json").read_text())
    row: dict[str, object] = {
        "count": count,
        "build_s": round(built["build_s"] + built["maintain_s"], 1),
        "file_mib": round(path.stat().st_size / 2**20, 1),
        "load_before": round(os.getloadavg()[0], 2),
    }
    scratch = args.dir / "scratch"
    scratch.mkdir(exist_ok=True)
    try:
        lib, raw = copy(path, scratch / "lib.db"), copy(path, scratch / "raw.db")
        rss = run(RSS_PROBE, str(lib), str(args.writes), options=options)
        row["open_first_ms"] = round(float(rss["first_s"]) * 1000, 1)  # type: ignore[arg-type]
        row["rss_first_mib"] = round(rss["after_first"]["VmHWM"], 1)  # type: ignore[index]
        row["rss_writes_mib"] = round(rss["end"]["VmHWM"], 1)  # type: ignore[index]
        floor = run(FLOOR_PROBE, str(lib), str(raw), str(args.floor_calls), options=options)
        row["remember_vs_floor"] = round(float(floor["ratio"]), 2)  # type: ignore[arg-type]
        row["remember_us"] = round(float(floor["library_us"]), 1)  # type: ignore[arg-type]
        row["floor_us"] = round(float(floor["floor_us"]), 1)  # type: ignore[arg-type]
    finally:
        shutil.rmtree(scratch)
    recall = run(RECALL_PROBE, str(path), str(args.queries), options=options)
    row["recall_p50_ms"] = round(float(recall["p50"]), 1)  # type: ignore[arg-type]
    row["recall_p99_ms"] = round(float(recall["p99"]), 1)  # type: ignore[arg-type]
    row["recall_cpu_p50_ms"] = round(float(recall["cpu_p50"]), 1)  # type: ignore[arg-type]
    keyword = run(KEYWORD_PROBE, str(path), str(args.keyword_queries), options=options)
    leg: dict[str, float] = keyword["leg"]  # type: ignore[assignment]
    row["keyword_p50_ms"] = round(leg["p50"], 1)
    row["keyword_p99_ms"] = round(leg["p99"], 1)
    row["keyword_cpu_p50_ms"] = round(leg["cpu_p50"], 1)
    row["keyword_cpu_p99_ms"] = round(leg["cpu_p99"], 1)
    vector = run(VECTOR_PROBE, str(path), str(args.vector_queries), options=options)
    row["vector_recall"] = round(float(vector["recall"]), 3)  # type: ignore[arg-type]
    row["vector_recall_filtered"] = round(float(vector["filtered_recall"]), 3)  # type: ignore[arg-type]
    row["filter_share"] = round(float(vector["filter_share"]), 3)  # type: ignore[arg-type]
    row["load_after"] = round(os.getloadavg()[0], 2)
    return row


def table(rows: list[dict]) -> str:
    """The figures per size, the issue's target, and each figure's slope from one size
    to the next (its ratio)."""
    sizes = [f"{r['count']:,}" for r in rows]
    slopes = [f"{a['count']:,}->{b['count']:,}" for a, b in zip(rows, rows[1:], strict=False)]
    head = ["figure", *sizes, *(f"slope {s}" for s in slopes), "target"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for key, target in TARGETS.items():
        values = [r.get(key) for r in rows]
        ratios = [
            f"{b / a:.2f}x" if isinstance(a, int | float) and isinstance(b, int | float) and a
            else "-"
            for a, b in zip(values, values[1:], strict=False)
        ]  # fmt: skip
        lines.append("| " + " | ".join([key, *map(str, values), *ratios, target]) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--vector-index", choices=("ram", "cells"), default="ram")
    parser.add_argument("--writes", type=int, default=10_000)
    parser.add_argument("--floor-calls", type=int, default=2_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--keyword-queries", type=int, default=1_000)
    parser.add_argument("--vector-queries", type=int, default=100)
    parser.add_argument("--smoke", action="store_true", help="2,000 memories, a few calls")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.writes, args.floor_calls = "2000", 20, 20
        args.queries, args.keyword_queries, args.vector_queries = 10, 20, 5
    args.dir.mkdir(parents=True, exist_ok=True)
    options = vector_index_option(args.vector_index)
    rows = []
    for count in (int(n) for n in args.sizes.split(",")):
        path = library(args.dir, count)
        start = time.perf_counter()
        build(path, count)
        rows.append(measure(path, count, args, options))
        print(json.dumps(rows[-1]), f"({time.perf_counter() - start:.0f} s)", flush=True)
    record = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "vector_index": args.vector_index,
        "smoke": args.smoke,
        "sizes": rows,
    }
    print(table(rows))
    record_run(RESULTS, record, keep=not args.no_record)


if __name__ == "__main__":
    main()

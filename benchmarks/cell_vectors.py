"""The vector cells (``vector_index="cells"``, issue 46) against the RAM copy, one file.

    .venv/bin/python -m benchmarks.cell_vectors --dir /work/vecdata --count 100000

Builds ``--dir``/cells_<count>.db once (kept: a rerun measures the same file): clustered
384-d vectors (the recipe of ``benchmarks/test_recall_bench.py``), bulk-loaded, a tenth
of the memories tagged ``tenth``; then ``maintain()``'s vector part for both indexes, so
the RAM copy loads its stored codes (today's default after ``maintain()``) and the cells
are trained. Queries are stored vectors plus noise of norm 0.5, normalised (as
``benchmarks/million.py``); the exact answers come from numpy over every vector.

Each index is then measured in a FRESH process through the store's vector search
(``store.indexes.vector_search``, no keyword leg, no query embedding): RSS after open +
first search (VmHWM, and above a process that imported the same modules and opened
nothing), open + first search, p50/p99 of ``--queries`` searches, recall@10 against exact,
and the same with the filter ``tags=("tenth",)`` (10k of 100k accepted: more than the
exact-scan bound, so the index is searched). The RAM copy is the baseline; the ratios
are cells / RAM. One JSON line per run is printed and appended to
``benchmarks/results/cell_vectors.jsonl`` (not with ``--no-record``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from benchmarks.results_file import record_run

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "cell_vectors.jsonl"
DIM = 384
K = 10
WARM = 10

PROBE = """
import json, sys, time
sys.path.insert(0, sys.argv[4])
import numpy as np
from persistence import MemoryFilter
from persistence.sqlite import SQLiteStore

K, WARM = 10, 10  # as the parent's

def status():
    lines = [ln for ln in open("/proc/self/status") if ln.startswith(("VmHWM", "VmRSS"))]
    return {k: int(v.split()[0]) / 1024 for k, v in (ln.split(":", 1) for ln in lines)}

path, kind = sys.argv[1], sys.argv[2]
queries = np.load(sys.argv[3])
filters = json.loads(sys.argv[5])
bare = status()["VmHWM"]
start = time.perf_counter()
store = SQLiteStore(path, vector_index=kind).open()
store.indexes.vector_search(queries[0], K)
first = time.perf_counter() - start
rss = status()["VmHWM"]
out = {"kind": kind, "open_first_ms": first * 1000, "rss_mib": rss, "above_bare_mib": rss - bare}
for name, fields in [("plain", None), *filters]:
    filt = None if fields is None else MemoryFilter(**fields)
    for q in queries[1:WARM]:
        store.indexes.vector_search(q, K, where=filt)
    took, found, used = [], [], set()
    for q in queries[WARM:]:
        t = time.perf_counter()
        hits = store.indexes.vector_search(q, K, where=filt)
        took.append(time.perf_counter() - t)
        found.append([int(m[1:]) for m, _ in hits])
        used.add(getattr(store.indexes.vectors, "last_search", "ram"))
    ms = np.array(took) * 1000
    out[name] = {"p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)),
                 "found": found, "answered_by": sorted(used)}
out["rss_end_mib"] = status()["VmHWM"]
store.close()
print(repr(out))
"""


def unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def build(path: Path, count: int) -> np.ndarray:
    """The file and its vectors (``.npy`` beside it), unless they are there."""
    vectors_path = Path(f"{path}.npy")
    if path.exists() and vectors_path.exists():
        return np.load(vectors_path, mmap_mode="r")
    from persistence import Memory, SessionState, Tier
    from persistence.sqlite import SQLiteStore, bulk_index, memory_steps
    from persistence.sqlite.sql import memory_sql

    started = time.perf_counter()
    rng = np.random.default_rng(count)
    centres = unit(rng, max(count // 50, 1))
    vectors = np.empty((count, DIM), dtype=np.float32)
    for s in range(0, count, 50_000):
        n = min(50_000, count - s)
        part = centres[rng.integers(len(centres), size=n)] + 0.6 * unit(rng, n)
        vectors[s : s + n] = part / np.linalg.norm(part, axis=1, keepdims=True)
    path.unlink(missing_ok=True)
    with SQLiteStore(path) as store:
        store.memories.put_memory(
            Memory.create("first", Tier.EPISODIC, id="first", embedding=vectors[0])
        )
        store.memories.forget_memory("first", reason="the file now records the dimension")
        with store.transaction() as conn, bulk_index.triggers_suspended(conn):
            for s in range(0, count, 50):
                store.put_session(SessionState(f"s{s}", started_at=1, last_active_at=1))
            for i in range(count):
                memory = Memory.create(
                    f"memory {i} w{i % 997} w{i % 991}", Tier.EPISODIC, id=f"m{i:07d}",
                    embedding=vectors[i], session_id=f"s{i - i % 50}",
                    tags=("tenth",) if i % 10 == 0 else (),
                )  # fmt: skip
                memory_steps.write(
                    conn, memory, memory_sql.encode_row(memory, vectors[i].tobytes())
                )
    built = time.perf_counter() - started
    for kind in ("ram", "cells"):  # maintain()'s vector part for each index
        store = SQLiteStore(path, vector_index=kind).open()
        with store.engine.exclusive_connection() as conn:
            store.indexes.vectors.maintain(conn)
        store.close()
    np.save(vectors_path, vectors)
    print(f"built {count:,} in {built:.0f} s, both indexes in "
          f"{time.perf_counter() - started - built:.0f} s", flush=True)  # fmt: skip
    return vectors


def exact_top(vectors: np.ndarray, queries: np.ndarray, keep: np.ndarray | None) -> np.ndarray:
    best = np.full((len(queries), K), -1, dtype=np.int64)
    best_sim = np.full((len(queries), K), -np.inf, dtype=np.float32)
    for start in range(0, len(vectors), 50_000):
        sim = queries @ np.asarray(vectors[start : start + 50_000]).T
        if keep is not None:
            sim[:, ~keep[start : start + 50_000]] = -np.inf
        ids = np.broadcast_to(np.arange(start, start + sim.shape[1]), sim.shape)
        both_sim, both_ids = np.concatenate([best_sim, sim], 1), np.concatenate([best, ids], 1)
        top = np.argpartition(-both_sim, K - 1, axis=1)[:, :K]
        best_sim, best = np.take_along_axis(both_sim, top, 1), np.take_along_axis(both_ids, top, 1)
    return best


def recall(found: list[list[int]], truth: np.ndarray) -> float:
    return float(
        np.mean([len(set(f) & set(t.tolist())) / K for f, t in zip(found, truth, strict=True)])
    )


def filters(path: Path, count: int) -> list[tuple[str, dict[str, object], np.ndarray]]:
    """``(name, MemoryFilter fields, accepted mask)``: narrow and wide, by an index each
    (a session of 50, a time range of 2,000, a tag on a tenth, a time range of a tenth)."""
    import apsw

    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    created = np.zeros(count, dtype=np.int64)
    for memory_id, at in conn.execute("SELECT id, created_at FROM episodic WHERE id LIKE 'm%'"):
        created[int(memory_id[1:])] = at
    conn.close()
    index = np.arange(count)

    def span(first: int, last: int) -> tuple[dict[str, object], np.ndarray]:
        low, high = int(created[first]), int(created[min(last, count - 1)])
        high = max(high, low + 1)
        return {"created_after": low, "created_before": high}, (created >= low) & (created < high)

    session = count // 2 - (count // 2) % 50
    narrow_time, narrow_keep = span(count // 3, count // 3 + min(2_000, count // 10))
    wide_time, wide_keep = span(3 * count // 10, 4 * count // 10)
    return [
        ("session (50)", {"session_id": f"s{session}"}, index - index % 50 == session),
        ("time (2,000)", narrow_time, narrow_keep),
        ("tag (a tenth)", {"tags": ["tenth"]}, index % 10 == 0),
        ("time (a tenth)", wide_time, wide_keep),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--before", type=Path, help="also measure the cells with this checkout's code"
    )
    parser.add_argument("--cells-only", action="store_true", help="no RAM copy (with --before)")
    parser.add_argument("--no-record", action="store_true", help="append no JSON line")
    args = parser.parse_args()
    path = args.dir / f"cells_{args.count}.db"
    vectors = build(path, args.count)
    rng = np.random.default_rng(5)
    picked = np.asarray(vectors[rng.integers(len(vectors), size=args.queries + WARM)])
    noisy = picked + 0.5 * unit(rng, len(picked))
    queries = (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)
    queries_file = tempfile.NamedTemporaryFile(suffix=".npy", delete=False)  # noqa: SIM115
    np.save(queries_file, queries)
    queries_file.close()
    chosen = filters(path, args.count)
    truth = {"plain": exact_top(vectors, queries[WARM:], None)}
    truth |= {name: exact_top(vectors, queries[WARM:], keep) for name, _, keep in chosen}
    shown = json.dumps([[name, fields] for name, fields, _ in chosen])
    runs = [("cells", "cells", ROOT)] if args.cells_only else [("ram", "ram", ROOT)]
    runs += [] if args.cells_only else [("cells", "cells", ROOT)]
    if args.before:
        runs.append(("cells (before)", "cells", args.before))
    results = {}
    for label, kind, root in runs:
        done = subprocess.run(
            [sys.executable, "-c", PROBE, str(path), kind, queries_file.name, str(root), shown],
            capture_output=True, text=True, timeout=3600, cwd=ROOT,
        )  # fmt: skip
        if done.returncode:
            sys.exit(f"{label} failed:\n{done.stderr}")
        result = eval(done.stdout.strip().splitlines()[-1])  # noqa: S307 (our own probe's dict)
        for name, exact in truth.items():
            result[name]["recall"] = recall(result[name].pop("found"), exact)
        results[label] = result
        print(f"{label} measured", flush=True)
    Path(queries_file.name).unlink()
    load = os.getloadavg()[0]
    print(f"{args.count:,} vectors, {args.queries} queries [load {load:.1f}]")
    print("| index | peak RSS (above bare) | open + first | "
          + " | ".join(f"{name} p50 / p99, recall@10" for name in truth) + " |")  # fmt: skip
    print("| --- " * (3 + len(truth)) + "|")
    for label, r in results.items():
        cells = [f"{r[n]['p50']:.1f} / {r[n]['p99']:.1f} ms, {r[n]['recall']:.3f}" for n in truth]
        print(f"| {label} | {r['rss_mib']:.0f} MiB ({r['above_bare_mib']:.0f}) | "
              f"{r['open_first_ms']:.0f} ms | " + " | ".join(cells) + " |")  # fmt: skip
    cells_now = results["cells"]
    if "ram" in results:
        ram = results["ram"]
        print("cells / ram p50: " + ", ".join(
            f"{n} {cells_now[n]['p50'] / ram[n]['p50']:.2f}x" for n in truth))  # fmt: skip
    if "cells (before)" in results:
        before = results["cells (before)"]
        print("cells now / before p50: " + ", ".join(
            f"{n} {cells_now[n]['p50'] / before[n]['p50']:.2f}x" for n in truth))  # fmt: skip
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    record = {"at": stamp, "count": args.count, "load": load, **results}
    record_run(RESULTS, record, keep=not args.no_record)


if __name__ == "__main__":
    main()

"""The cells' centroids in RAM (issue 46): bytes, ranking time and probed cells by form.

    OPENBLAS_NUM_THREADS=1 nice -n 10 .venv/bin/python -m benchmarks.centroid_ranking \\
        [--cells 3000,9000,30000] [--queries 60] [--before OLD] [--load-only]

For each count of 384-d unit centroids (3,000 about 1M memories, 9,000 3M, 30,000 10M;
trained cells' shape: a few per topic), one query ranked against every centroid in:
``float32`` (the raw baseline: ``centroids @ query``), ``float16`` widened to float32
``WIDEN_ROWS`` rows at a time, ``int16`` (the library's
:class:`~persistence.sqlite.cell_centroids.Centroids`, a scale per row) and ``int8``
(a scale per row, widened the same way). Printed: bytes held, median ms per query and its
ratio to float32 in the same run, and how many of 200 queries probe other cells (the 24
best) than float64 does, with the largest similarity gap at which they differ. Then
assigning a write's chunk (``--assign`` vectors) to its nearest cell, float32 against
the library's form. Then the peak RSS (VmHWM, fresh processes) of loading the
centroids from a file: the float32 copy (``cell_sync.centroids_of``) against what a
reader caches (``cell_sync.cached_centroids``), and with ``--before OLD`` (a checkout
of the library before, ``git archive``) what that one's reader caches.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import apsw
import numpy as np

from persistence.sqlite.cell_centroids import WIDEN_ROWS, Centroids
from persistence.sqlite.cell_kmeans import nearest_cells

DIM = 384
PROBES = 24
ROOT = Path(__file__).resolve().parent.parent


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    out: np.ndarray = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def trained_like(rng: np.random.Generator, cells: int) -> np.ndarray:
    """Unit centroids a few per topic, as bisected cells' are."""
    topics = unit(rng, max(cells // 8, 1))
    near = topics[rng.integers(len(topics), size=cells)] + 0.6 * unit(rng, cells)
    out: np.ndarray = (near / np.linalg.norm(near, axis=1, keepdims=True)).astype(np.float32)
    return out


def widened(stored: np.ndarray, scales: np.ndarray | None) -> Callable[[np.ndarray], np.ndarray]:
    """Ranking of centroids stored as ``stored`` (times ``scales``), widened per chunk."""

    def rank(query: np.ndarray) -> np.ndarray:
        out = np.empty(len(stored), dtype=np.float32)
        buffer = np.empty((min(WIDEN_ROWS, len(stored)), DIM), dtype=np.float32)
        for start in range(0, len(stored), WIDEN_ROWS):
            wide = buffer[: min(WIDEN_ROWS, len(stored) - start)]
            np.copyto(wide, stored[start : start + len(wide)], casting="unsafe")
            np.matmul(wide, query, out=out[start : start + len(wide)])
        return out if scales is None else out * scales

    return rank


def forms(floats: np.ndarray) -> dict[str, tuple[int, Callable[[np.ndarray], np.ndarray]]]:
    half = floats.astype(np.float16)
    compact = Centroids.of(floats)
    scales8 = (np.abs(floats).max(axis=1) / 127).astype(np.float32)
    small = np.rint(floats / scales8[:, None]).astype(np.int8)
    return {
        "float32": (floats.nbytes, lambda q: floats @ q),
        "float16": (half.nbytes, widened(half, None)),
        "int16 (library)": (compact.nbytes, compact.similarities),
        "int8": (small.nbytes + scales8.nbytes, widened(small, scales8)),
    }


def median_ms(rank: Callable[[np.ndarray], np.ndarray], queries: np.ndarray) -> float:
    took = []
    for query in queries:
        start = time.perf_counter()
        rank(query)
        took.append(time.perf_counter() - start)
    return 1000 * float(np.median(took))


def ranking(cells: int, queries: int, assign: int) -> None:
    rng = np.random.default_rng(cells)
    floats = trained_like(rng, cells)
    asked = floats[rng.integers(cells, size=200)] + 0.8 * unit(rng, 200)
    asked = (asked / np.linalg.norm(asked, axis=1, keepdims=True)).astype(np.float32)
    exact = asked.astype(np.float64) @ floats.T.astype(np.float64)
    base = 0.0
    for name, (nbytes, rank) in forms(floats).items():
        rank(asked[0])  # warm
        ms = median_ms(rank, asked[:queries])
        base = base or ms
        differ, gap = 0, 0.0
        for query, sims in zip(asked, exact, strict=True):
            want = set(np.argpartition(-sims, PROBES - 1)[:PROBES].tolist())
            got = set(np.argpartition(-rank(query), PROBES - 1)[:PROBES].tolist())
            if want != got:
                differ += 1
                kth = np.sort(sims)[-PROBES]
                gap = max(gap, max(abs(sims[c] - kth) for c in want ^ got))
        print(
            f"cells {cells:>6,}  {name:<16} {nbytes / 2**20:6.2f} MiB  {ms:7.3f} ms "
            f"(x{ms / base:4.2f})  probed cells differ {differ:>3}/200 (gap <= {gap:.1e})",
            flush=True,
        )
    vectors = asked[:assign] if assign <= 200 else unit(rng, assign)
    compact = Centroids.of(floats)
    start = time.perf_counter()
    plain = nearest_cells(vectors, floats)
    mid = time.perf_counter()
    ours = nearest_cells(vectors, compact)
    end = time.perf_counter()
    print(
        f"cells {cells:>6,}  assigning {assign} vectors: float32 {1000 * (mid - start):.1f} ms, "
        f"int16 {1000 * (end - mid):.1f} ms (x{(end - mid) / (mid - start):.2f}), "
        f"same cell {float((plain == ours).mean()):.3f}",
        flush=True,
    )


LOAD = """
import sys
sys.path.insert(0, sys.argv[4])
import apsw
from persistence.sqlite import cell_sync
from persistence.sqlite.sql.cell_sql import CellState

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024

conn = apsw.Connection(sys.argv[1], flags=apsw.SQLITE_OPEN_READONLY)
cells = int(sys.argv[3])
conn.execute("SELECT count(*) FROM vector_cells").fetchall()  # the pages in SQLite's cache
bare = hwm()
if sys.argv[2] == "float32":
    held = cell_sync.centroids_of(conn, 384).nbytes
else:
    state = CellState(384, 0, 0.0, b"", cells, 0, 0, 1, 0, None)
    held = cell_sync.cached_centroids(conn, state).nbytes
print(f"{held / 2**20:.1f} {hwm() - bare:.1f}")
"""


def load_rss(cells: int, before: str | None) -> None:
    """Peak RSS of loading ``cells`` centroids from a file, each way (fresh processes;
    with ``before``, also what that checkout's reader caches)."""
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "centroids.db")
        conn = apsw.Connection(path)
        conn.execute("PRAGMA cache_size = -200000")
        conn.execute("CREATE TABLE vector_cells (cell INTEGER PRIMARY KEY, centroid BLOB)")
        with conn:
            for start in range(0, cells, 4_096):
                part = trained_like(rng, min(4_096, cells - start))
                conn.executemany(
                    "INSERT INTO vector_cells VALUES (?, ?)",
                    ((start + i, row.tobytes()) for i, row in enumerate(part)),
                )
        conn.close()
        runs = [("float32", ROOT), ("cached", ROOT)]
        runs += [] if before is None else [("cached", Path(before))]
        for kind, root in runs:
            out = subprocess.run(
                [sys.executable, "-c", LOAD, path, kind, str(cells), str(root)],
                check=True, capture_output=True, text=True,
            ).stdout.split()  # fmt: skip
            which = f"{kind} ({'before' if root != ROOT else 'this checkout'})"
            print(
                f"cells {cells:>6,}  load {which:<28}: held {out[0]} MiB, "
                f"peak RSS +{out[1]} MiB above the opened file",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", default="3000,9000,30000")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--assign", type=int, default=64)
    parser.add_argument("--before", help="an older checkout: its reader's load measured too")
    parser.add_argument("--load-only", action="store_true", help="only the loads' peak RSS")
    args = parser.parse_args()
    print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    for cells in [] if args.load_only else (int(c) for c in args.cells.split(",")):
        ranking(cells, args.queries, args.assign)
    for cells in (int(c) for c in args.cells.split(",")):
        load_rss(cells, args.before)


if __name__ == "__main__":
    main()

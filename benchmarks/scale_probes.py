"""The probes of :mod:`benchmarks.scale_run` that only it runs, each a script run in a
fresh process by :func:`run` (``argv``: the probe's arguments, then the repository's root;
the open options, e.g. ``vector_index``, in ``TM_OPEN_OPTIONS``), printing one dict.

- :data:`VECTOR_PROBE`: vector recall@10 against an exact numpy scan, unfiltered and with
  a time filter that accepts about a tenth of the file;
- :data:`FLOOR_PROBE`: ``remember()`` taking turns with its write floor (the raw SQL
  writing the same rows and indexes) on two copies of the file;
- :data:`KEYWORD_PROBE`: the keyword leg alone (:mod:`benchmarks.keyword_tail`).

The open + first recall and RSS probes are :mod:`benchmarks.million`'s and
:mod:`benchmarks.open_first`'s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

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


def run(script: str, *args: str, options: dict[str, str]) -> dict[str, object]:
    """The dict ``script`` prints, run in a fresh process with ``args`` and the root, the
    store opened with ``options``; .pyc files kept, as :func:`benchmarks.open_first.probe`
    keeps them (an installed package has them)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["TM_OPEN_OPTIONS"] = json.dumps(options)
    done = subprocess.run(
        [sys.executable, "-c", script, *args, str(ROOT)],
        capture_output=True, text=True, timeout=7200, cwd=ROOT, env=env,
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(f"probe failed:\n{done.stderr[-3000:]}")
    return dict(eval(done.stdout.strip().splitlines()[-1]))  # noqa: S307 (our own probe's dict)

"""Latency and memory against N: ``remember()``, an uncached ``get`` and ``recall()`` of
tiered-memory on a file, beside the raw SQLite floor and a peer (LangGraph's SqliteStore, or
its InMemoryStore where this Python's sqlite3 cannot load sqlite-vec for the SqliteStore's
vector index) on the same data, at each size; and the peak RSS of a fresh process of each
that opens the data and answers queries. Writes the JSON that ``benchmarks/report.py`` draws::

    .venv/bin/python -m benchmarks.scaling --sizes 1000,10000,100000 --json-out scaling.json

Data, per size N: N memories of ten words (a 5,000-word vocabulary) with 384-d unit
vectors in clusters, loaded in chunks (``remember_many`` with the vectors given /
``SqliteStore.batch``). Every embedding (the library's and the peer's) comes from one
function that looks a text's vector up, or derives one from its hash: a dict lookup, so no
timing includes a model. How each figure is measured:

- ``remember``: one ``remember(content)`` (its embedding deferred to the background, as an
  agent's write is) / the floor: the same rows (memory, tags, schedule, keyword index)
  inserted by raw APSW in one transaction / the peer: one ``put`` (which embeds).
- ``get``: reading an id never read before by this handle (no cache hit) / the floor: the
  library's own one-row SELECT / the peer: one ``get``.
- ``recall``: ``recall(query, k=10)`` with its fusion, records and explanations / the
  floor: the FTS5 bm25 and sqlite-vec KNN statements alone / the peer: ``search(query=,
  limit=10)``.
- ``rss``: peak RSS (VmHWM) of a new process that opens the data and answers the queries.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.raw_sql import attach_raw_vec0, build_raw_vec0, raw_keyword, raw_vec0_knn
from persistence import Memory
from persistence.sqlite.connection import ConnectionOptions, connect, connection_wal
from persistence.sqlite.sql import memory_sql
from tiered_memory import AgentMemoryManager
from tiered_memory.recall.settings import keywords

DIM = 384
WORDS = [f"w{i}" for i in range(5000)]
CHUNK = 2000
LIBRARY, FLOOR = "tiered-memory", "raw SQLite floor"
ROOT = Path(__file__).resolve().parent.parent


class HashEmbedder:
    """A text's vector from a table (the loaded data's), else derived from its hash."""

    model_id = "bench-hash"
    dim = DIM

    def __init__(self) -> None:
        self.vectors: dict[str, np.ndarray] = {}

    def vector(self, text: str) -> np.ndarray:
        found = self.vectors.get(text)
        if found is None:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            x = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
            found = self.vectors[text] = x / np.linalg.norm(x)
        return found

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.vector(t) for t in texts]).astype(np.float32)

    def embed_lists(self, texts: Sequence[str]) -> list[list[float]]:
        """LangGraph's ``index["embed"]`` form."""
        return [self.vector(t).tolist() for t in texts]


def corpus(count: int, queries: int) -> tuple[list[str], np.ndarray, list[str]]:
    """``count`` texts with clustered unit vectors, and ``queries`` query texts."""
    rng = np.random.default_rng(count)
    centres = rng.standard_normal((max(count // 50, 1), DIM)).astype(np.float32)
    noise = rng.standard_normal((count, DIM)).astype(np.float32)
    vectors = centres[rng.integers(len(centres), size=count)] + 0.6 * noise
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    picks = np.array(WORDS)[rng.integers(len(WORDS), size=(count, 10))]
    texts = [f"{' '.join(row)} n{i}" for i, row in enumerate(picks)]
    asked = [" ".join(rng.choice(WORDS, 3)) + f" question {q}" for q in range(queries)]
    return texts, vectors, asked


def _p50_ms(calls: Sequence[Callable[[], Any]]) -> float:
    times = []
    for call in calls:
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def measure_library(path: Path, texts: list[str], vectors: np.ndarray, asked: list[str],
                    calls: int, embedder: HashEmbedder) -> dict[str, float]:  # fmt: skip
    with AgentMemoryManager.open(path, embedder=embedder, embed_in_background=False,
                                 recall_review_quality=None) as memory:  # fmt: skip
        for start in range(0, len(texts), CHUNK):
            memory.remember_many([
                {"content": t, "embedding": vectors[i], "tags": [f"t{i % 20}"]}
                for i, t in enumerate(texts[start : start + CHUNK], start)
            ])  # fmt: skip
        memory.maintain()
        ids = [m.id for m in memory.query(None, limit=calls * 2)]
        for q in asked:
            embedder.vector(q)  # the query vectors are ready: recall pays a lookup
        result = {
            "remember": _p50_ms(
                [
                    lambda n=n: memory.remember(f"new memory w{n} w{n * 7 % 5000}", tags=["bench"])
                    for n in range(calls)
                ]
            ),  # fmt: skip
        }
    with AgentMemoryManager.open(path, embedder=embedder, embed_in_background=False,
                                 recall_review_quality=None) as memory:  # fmt: skip
        result["get"] = _p50_ms([lambda i=i: memory.get(i) for i in ids[calls:]])
        result["recall"] = _p50_ms([lambda q=q: memory.recall(q, k=10) for q in asked])
    return result


def measure_floor(path: Path, asked: list[str], calls: int,
                  embedder: HashEmbedder) -> dict[str, float]:  # fmt: skip
    from benchmarks.test_manager_bench import _raw_insert  # the manager benchmark's floor

    conn = connect(str(path), ConnectionOptions())
    connection_wal(conn)
    attach_raw_vec0(conn, path.with_suffix(".vec0.db"))  # raw sqlite-vec's own bit index
    try:
        ids = [r[0] for r in conn.execute("SELECT id FROM episodic LIMIT ?", (calls,))]
        sql = memory_sql._SELECT_ANY_TIER
        result = {"get": _p50_ms([lambda i=i: conn.execute(sql, (i,) * 3).fetchone()
                                  for i in ids])}  # fmt: skip

        def recall_floor(q: str) -> None:
            words = " OR ".join(f'"{w}"' for w in keywords(q))
            raw_keyword(conn, words, 50)
            raw_vec0_knn(conn, embedder.vector(q).tobytes(), 50)

        result["recall"] = _p50_ms([lambda q=q: recall_floor(q) for q in asked])
        result["remember"] = _p50_ms([
            lambda n=n: _raw_insert(conn, Memory.create(f"new memory w{n} w{n * 7 % 5000}",
                                                        tags=("bench",)))
            for n in range(calls)
        ])  # fmt: skip
    finally:
        conn.close()
    return result


def peer_name() -> str:
    """LangGraph's SqliteStore if this Python can load sqlite-vec into sqlite3 (its vector
    index needs it), else its InMemoryStore."""
    usable = hasattr(sqlite3.connect(":memory:"), "enable_load_extension")
    return "LangGraph SqliteStore" if usable else "LangGraph InMemoryStore"


def _langgraph(path: Path, embedder: HashEmbedder) -> tuple[Any, sqlite3.Connection | None]:
    """The peer store (with the same embedding function) and its connection, if any."""
    index = {"dims": DIM, "embed": embedder.embed_lists, "fields": ["text"]}
    if peer_name() == "LangGraph InMemoryStore":
        from langgraph.store.memory import InMemoryStore

        return InMemoryStore(index=index), None  # type: ignore[arg-type]
    from langgraph.store.sqlite import SqliteStore

    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    store = SqliteStore(conn, index=index)  # type: ignore[arg-type]
    store.setup()
    return store, conn


def load_peer(store: Any, texts: list[str]) -> None:
    from langgraph.store.base import PutOp

    for start in range(0, len(texts), CHUNK):
        store.batch([PutOp(("memories",), f"k{i}", {"text": t})
                     for i, t in enumerate(texts[start : start + CHUNK], start)])  # fmt: skip


def measure_peer(path: Path, texts: list[str], asked: list[str], calls: int,
                 embedder: HashEmbedder) -> dict[str, float]:  # fmt: skip
    store, conn = _langgraph(path, embedder)
    try:
        load_peer(store, texts)
        keys = [f"k{i}" for i in range(0, len(texts), max(len(texts) // calls, 1))][:calls]
        return {
            "remember": _p50_ms(
                [
                    lambda n=n: store.put(("memories",), f"new{n}", {"text": f"new memory w{n}"})
                    for n in range(calls)
                ]
            ),  # fmt: skip
            "get": _p50_ms([lambda k=k: store.get(("memories",), k) for k in keys]),
            "recall": _p50_ms(
                [lambda q=q: store.search(("memories",), query=q, limit=10) for q in asked]
            ),  # fmt: skip
        }
    finally:
        if conn is not None:
            conn.close()


RSS_PROBE = """
import sys, json
sys.path.insert(0, sys.argv[4])
from benchmarks.scaling import HashEmbedder, _langgraph, corpus, load_peer
side, path, asked = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
embedder = HashEmbedder()
if side == "library":
    from tiered_memory import AgentMemoryManager
    with AgentMemoryManager.open(path, embedder=embedder, recall_review_quality=None,
                                 embed_in_background=False) as memory:
        for q in asked:
            memory.recall(q, k=10)
elif side == "floor":
    from pathlib import Path
    from benchmarks.raw_sql import attach_raw_vec0, raw_keyword, raw_vec0_knn
    from persistence.sqlite.connection import ConnectionOptions, connect
    conn = attach_raw_vec0(connect(path, ConnectionOptions()), Path(path).with_suffix(".vec0.db"))
    for q in asked:
        raw_keyword(conn, " OR ".join(f'"{w}"' for w in q.split()), 50)
        raw_vec0_knn(conn, embedder.vector(q).tobytes(), 50)
else:
    from pathlib import Path
    store, conn = _langgraph(Path(path), embedder)
    if conn is None:  # the in-memory peer: load the data into this process first
        texts, vectors, _ = corpus(int(sys.argv[5]), 0)
        embedder.vectors.update(zip(texts, vectors))
        load_peer(store, texts)
    for q in asked:
        store.search(("memories",), query=q, limit=10)
for line in open("/proc/self/status"):
    if line.startswith("VmHWM"):
        print(int(line.split()[1]) / 1024)
"""


def peak_rss_mib(side: str, path: Path, asked: list[str], count: int) -> float | None:
    """Peak RSS of a new process of ``side`` that opens ``path`` (the in-memory peer:
    loads the ``count`` memories) and answers ``asked`` (``None`` without ``/proc``)."""
    if not Path("/proc/self/status").exists():
        return None
    out = subprocess.run(
        [sys.executable, "-c", RSS_PROBE, side, str(path), json.dumps(asked), str(ROOT),
         str(count)],
        capture_output=True, text=True, check=True, timeout=1800,
    ).stdout  # fmt: skip
    return round(float(out.strip().splitlines()[-1]), 1)


def measure(sizes: Sequence[int], *, calls: int = 200, queries: int = 50, rss: bool = True,
            out: Callable[[str], None] = print) -> dict[str, Any]:  # fmt: skip
    """Measure every size; the result is what ``--json-out`` writes."""
    rows: list[dict[str, Any]] = []
    peer = peer_name()
    with tempfile.TemporaryDirectory(prefix="tm-scaling-") as tmp:
        for count in sizes:
            started = time.perf_counter()
            texts, vectors, asked = corpus(count, queries)
            embedder = HashEmbedder()
            embedder.vectors.update(zip(texts, vectors, strict=True))
            lib, raw, lg = (Path(tmp) / f"{name}{count}.db" for name in ("lib", "raw", "lg"))
            out(f"[{count}] {LIBRARY} ...")
            library = measure_library(lib, texts, vectors, asked, calls, embedder)
            shutil.copy(lib, raw)
            build_raw_vec0(raw, raw.with_suffix(".vec0.db"))
            out(f"[{count}] {FLOOR} ...")
            floor = measure_floor(raw, asked, calls, embedder)
            out(f"[{count}] {peer} ...")
            other = measure_peer(lg, texts, asked, calls, embedder)
            sample = asked[: min(len(asked), 20)]
            memory_mib = {
                LIBRARY: peak_rss_mib("library", lib, sample, count) if rss else None,
                FLOOR: peak_rss_mib("floor", raw, sample, count) if rss else None,
                peer: peak_rss_mib("peer", lg, sample, count) if rss else None,
            }
            rows.append({
                "n": count,
                "p50_ms": {LIBRARY: library, FLOOR: floor, peer: other},
                "peak_rss_mib": memory_mib,
                "file_bytes": {LIBRARY: lib.stat().st_size},
                "seconds": round(time.perf_counter() - started, 1),
            })  # fmt: skip
            out(f"[{count}] done in {rows[-1]['seconds']:.0f} s")
    return {
        "kind": "scaling",
        "sides": [LIBRARY, FLOOR, peer],
        "operations": ["remember", "get", "recall"],
        "calls": calls,
        "queries": queries,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "platform": platform.platform()},
        "when": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "rows": rows,
    }  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="memories, comma-separated")
    parser.add_argument("--calls", type=int, default=200, help="timed remember and get calls")
    parser.add_argument("--queries", type=int, default=50, help="timed recalls")
    parser.add_argument("--no-rss", action="store_true", help="skip the peak-RSS processes")
    parser.add_argument("--json-out", help="write the results here (else print them)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    result = measure(sizes, calls=args.calls, queries=args.queries, rss=not args.no_rss,
                     out=lambda line: print(line, file=sys.stderr, flush=True))  # fmt: skip
    text = json.dumps(result, indent=2)
    if args.json_out:
        Path(args.json_out).write_text(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()

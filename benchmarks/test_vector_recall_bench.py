"""The vector leg against exact search, for an embedder we did not ship and for MiniLM-like
vectors: recall@10, latency and the RAM copy's bytes per memory.

Run: ``.venv/bin/python -m pytest benchmarks/test_vector_recall_bench.py -s`` (a few
minutes); ``TM_BENCH_SIZES=1000000`` for the million-memory run.

Two workloads of seeded 384-d unit vectors, given with ``Memory(embedding=...)``:

- ``random+dups``: independent random vectors, 5% of them near-duplicates of another
  (the peer benchmark's workload: nothing clusters, so quantised codes separate the true
  neighbours from the rest poorly);
- ``clustered``: vectors around ``count / 50`` centres, as MiniLM's are.

Queries: half fresh random vectors, half stored vectors plus noise. The reference is an
exact numpy scan over the float vectors (in RAM, so it is also the raw speed floor); the
filtered case keeps memories carrying a tag on 10% of them. ``sign bits (before)``
recomputes in numpy the previous design's candidates (Hamming distance of uncentred sign
bits, 256 candidates, exact re-rank) for comparison. No timing asserts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks.smoke import size, smoke
from persistence import Memory, MemoryFilter, Tier
from persistence.sqlite import SQLiteStore, bulk_index, memory_steps
from persistence.sqlite.sql import memory_sql

DIM = 384
K = 10
QUERIES = size(100, 10)
SIZES = (
    [2_000]
    if smoke()
    else [int(n) for n in os.environ.get("TM_BENCH_SIZES", "10000,100000").split(",")]
)
WORKLOADS = ["random+dups", "clustered"]


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def vectors_of(workload: str, count: int, seed: int) -> np.ndarray:
    """``count`` unit vectors of ``workload`` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    if workload == "clustered":
        centres = _unit(rng, max(count // 50, 1))
        vectors = centres[rng.integers(len(centres), size=count)] + 0.6 * _unit(rng, count)
    else:
        vectors = _unit(rng, count)
        copies = rng.choice(count, count // 20, replace=False)
        originals = rng.integers(count, size=len(copies))
        vectors[copies] = vectors[originals] + 0.1 * _unit(rng, len(copies))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def queries_of(vectors: np.ndarray, seed: int) -> np.ndarray:
    """Half fresh random vectors, half stored ones plus noise."""
    rng = np.random.default_rng(seed)
    near = vectors[rng.integers(len(vectors), size=QUERIES // 2)] + 0.5 * _unit(rng, QUERIES // 2)
    queries = np.concatenate([_unit(rng, QUERIES - QUERIES // 2), near])
    return (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)


def build(path: Path, vectors: np.ndarray) -> None:
    """Bulk-load one memory per vector (ids ``m0...0<row>`` of the default 32 characters),
    tag ``p10`` on every tenth."""
    with SQLiteStore(path) as store:
        first = Memory.create("first", Tier.EPISODIC, id="first", embedding=vectors[0])
        store.memories.put_memory(first)
        store.memories.forget_memory("first", reason="the file now records the dimension")
        with store.transaction() as conn, bulk_index.triggers_suspended(conn):
            for i, vector in enumerate(vectors):
                tags = ("p10",) if i % 10 == 0 else ()
                memory = Memory.create(
                    f"memory {i}", Tier.EPISODIC, id=f"m{i:031d}", embedding=vector, tags=tags
                )
                memory_steps.write(conn, memory, memory_sql.encode_row(memory, vector.tobytes()))


def exact_top(vectors: np.ndarray, query: np.ndarray, rows: np.ndarray | None = None) -> set[int]:
    """Row numbers of the ``K`` nearest (among ``rows`` if given), by a numpy float scan."""
    scores = vectors @ query if rows is None else vectors[rows] @ query
    top = np.argpartition(-scores, K - 1)[:K]
    return set((top if rows is None else rows[top]).tolist())


def sign_bit_top(vectors: np.ndarray, bits: np.ndarray, query: np.ndarray) -> set[int]:
    """The previous design: 256 candidates by Hamming distance of sign bits, exact re-rank."""
    wanted = np.packbits(query > 0, bitorder="little")
    distance = np.bitwise_count(bits ^ wanted).sum(axis=1, dtype=np.int32)
    candidates = np.argpartition(distance, 255)[:256]
    return set(candidates[np.argsort(-(vectors[candidates] @ query))[:K]].tolist())


@pytest.fixture(scope="module", params=[(w, n) for n in SIZES for w in WORKLOADS],
                ids=lambda p: f"{p[0]}-{p[1]}")  # fmt: skip
def corpus(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, int, SQLiteStore, np.ndarray]]:
    workload, count = request.param
    vectors = vectors_of(workload, count, seed=count)
    path = tmp_path_factory.mktemp(f"vectors{count}") / "bench.db"
    start = time.perf_counter()
    build(path, vectors)
    print(f"\n{workload} {count:>7}: built in {time.perf_counter() - start:.0f} s", end="")
    with SQLiteStore(path, vector_index="ram") as store:  # the RAM copy's codes (the
        yield workload, count, store, vectors  # cells: test_cell_vectors_bench.py)


def _p50_ms(samples: list[float]) -> float:
    return float(np.percentile(np.array(samples) * 1000, 50))


def test_vector_recall_against_exact(corpus: Any) -> None:
    workload, count, store, vectors = corpus
    queries = queries_of(vectors, seed=count + 1)
    tagged = np.arange(0, count, 10)
    bits = np.packbits(vectors > 0, axis=1, bitorder="little")
    start = time.perf_counter()
    store.indexes.vector_search(queries[0], K)  # loads the RAM copy
    load_s = time.perf_counter() - start
    timings: dict[str, list[float]] = {"vector_search": [], "10% tag": [], "numpy exact": []}
    answers: dict[str, list[set[int]]] = {"unfiltered": [], "10% tag": []}
    # One loop per kind of search: BLAS threads still spinning after a numpy scan would
    # slow the next search down.
    for query in queries:
        start = time.perf_counter()
        hits = store.indexes.vector_search(query, K)
        timings["vector_search"].append(time.perf_counter() - start)
        answers["unfiltered"].append({int(h[1:]) for h, _ in hits})
    for query in queries:
        start = time.perf_counter()
        hits = store.indexes.vector_search(query, K, where=MemoryFilter(tags=("p10",)))
        timings["10% tag"].append(time.perf_counter() - start)
        answers["10% tag"].append({int(h[1:]) for h, _ in hits})
    for query in queries:
        start = time.perf_counter()
        exact_top(vectors, query)
        timings["numpy exact"].append(time.perf_counter() - start)
    found: dict[str, list[float]] = {"unfiltered": [], "10% tag": [], "sign bits (before)": []}
    for i, query in enumerate(queries):
        truth = exact_top(vectors, query)
        found["unfiltered"].append(len(truth & answers["unfiltered"][i]) / K)
        found["sign bits (before)"].append(len(truth & sign_bit_top(vectors, bits, query)) / K)
        truth = exact_top(vectors, query, tagged)
        found["10% tag"].append(len(truth & answers["10% tag"][i]) / K)
    short = sum(len(hits) < K for hits in answers["10% tag"])
    exact_ms = _p50_ms(timings["numpy exact"])
    per_memory = store.indexes.vectors.nbytes / store.indexes.vectors.size
    print(
        f"\n{workload} {count:>7}: recall@{K} vs exact "
        + ", ".join(f"{name} {np.mean(values):.3f}" for name, values in found.items())
        + f"; filtered queries short of {K}: {short}/{QUERIES}"
        + f"\n{workload} {count:>7}: p50 vector_search {_p50_ms(timings['vector_search']):.2f} ms"
        + f" ({_p50_ms(timings['vector_search']) / exact_ms:.2f}x numpy exact),"
        + f" 10% tag {_p50_ms(timings['10% tag']):.2f} ms, numpy exact {exact_ms:.2f} ms;"
        + f" RAM copy {per_memory:.0f} B/memory ({per_memory * 1e6 / 2**20:.0f} MiB at 1M),"
        + f" loaded in {load_s:.2f} s",
        end="",
    )

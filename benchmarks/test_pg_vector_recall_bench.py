"""The vector leg on PostgreSQL against LangGraph's ``PostgresStore``, on the same server
and the same vectors: recall@10 against exact and search p50, unfiltered, by agent and by
session, plus the raw HNSW curve (``hnsw.ef_search`` against recall and time).

Run: ``PYTHONPATH=$PWD .venv/bin/python -m pytest benchmarks/test_pg_vector_recall_bench.py -s``
(10k memories; ``TM_BENCH_SIZES=10000,100000`` for the 100k run, about half an hour).

Workloads (seeded, 384-d unit vectors given with the memory: the embedder only looks them
up, as in :mod:`benchmarks.backends_table`):

- ``random+dups``: the peer benchmark's: independent random vectors, 5% near-duplicates
  of another, 50 sessions (10 agents, 5 sessions each). Nothing clusters: the hardest case
  for any graph or list index (every point is about as far from a query as any other).
- ``clustered``: vectors around ``count / 50`` centres, as real sentence embeddings are.

Queries: half fresh random vectors, half stored vectors plus noise
(:func:`benchmarks.test_vector_recall_bench.queries_of`). Ours is ``recall()`` with the
pure-similarity settings (what ``tiered_memory_pure`` uses in the peer benchmark: every
weight but the vector's at zero, the neighbour evidence too: it lifts a hit's session
neighbours, which a filter by session makes all candidates); theirs is
``PostgresStore.search(prefix, query=...)`` (its default index: HNSW, ``ef_search`` 40).
The two are timed alternately, query by query, so machine load hits both alike. The
reference is an exact numpy scan over the vectors the filter accepts. No timing asserts:
ratios are printed.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from benchmarks.backends_table import (
    LookupEmbedder,
    _key,
    _langgraph,
    _new_database,
    _open_tiered,
    postgres_server,
)
from benchmarks.smoke import size, smoke
from benchmarks.test_vector_recall_bench import queries_of, vectors_of
from persistence import MemoryFilter

pytestmark = pytest.mark.postgres

K = 10
DIM = 384
SESSIONS = 50
AGENTS = 10
QUERIES = size(100, 6)
LOAD_CHUNK = 2000
SIZES = (
    [1_000] if smoke() else [int(n) for n in os.environ.get("TM_BENCH_SIZES", "10000").split(",")]
)
WORKLOADS = ["random+dups"] if smoke() else ["random+dups", "clustered"]
EF_CURVE = (40, 100, 200, 400, 800)


def _records(count: int) -> list[dict[str, Any]]:
    """One record per vector: 50 sessions in order, session ``s`` of agent ``s % 10``."""
    out = []
    for i in range(count):
        session = i * SESSIONS // count
        out.append({
            "content": f"memory number {i}",
            "agent_id": f"agent{session % AGENTS}",
            "session_id": f"s{session}",
        })  # fmt: skip
    return out


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with postgres_server() as running:
        yield running


def _load_ours(url: str, records: list[dict[str, Any]], vectors: np.ndarray) -> list[str]:
    memory = _open_tiered(url, LookupEmbedder())
    try:
        with memory.transaction():
            for s in range(SESSIONS):
                memory.start_session(f"s{s}")
        ids: list[str] = []
        for lo in range(0, len(records), LOAD_CHUNK):
            chunk = [
                {**r, "embedding": vectors[i]}
                for i, r in enumerate(records[lo : lo + LOAD_CHUNK], lo)
            ]
            ids += [m.id for m in memory.remember_many(chunk)]
        return ids
    finally:
        memory.shutdown()


def _load_theirs(url: str, records: list[dict[str, Any]], embedder: LookupEmbedder) -> None:
    from langgraph.store.base import PutOp

    with _langgraph(url, embedder) as store:
        store.setup()
        for lo in range(0, len(records), LOAD_CHUNK):
            store.batch([
                PutOp(("memories", r["agent_id"], r["session_id"]), f"m{i}", {"text": r["content"]})
                for i, r in enumerate(records[lo : lo + LOAD_CHUNK], lo)
            ])  # fmt: skip


def _exact(vectors: np.ndarray, query: np.ndarray, rows: np.ndarray) -> set[int]:
    scores = vectors[rows] @ query
    return set(rows[np.argsort(-scores, kind="stable")[:K]].tolist())


def _timed(call: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    out = call(*args, **kwargs)
    return out, time.perf_counter() - start


def _p50(samples: list[float]) -> float:
    return float(np.percentile(np.array(samples) * 1000, 50))


@pytest.mark.parametrize("count", SIZES)
@pytest.mark.parametrize("workload", WORKLOADS)
def test_pg_vector_recall_against_postgres_store(server: Any, workload: str, count: int) -> None:
    from tiered_memory import RecallSettings

    vectors = vectors_of(workload, count, seed=count)
    queries = queries_of(vectors, seed=count + 1)[:QUERIES]
    records = _records(count)
    embedder = LookupEmbedder(
        {_key(r["content"]): v for r, v in zip(records, vectors, strict=True)}
    )
    texts = [f"vector query {j}" for j in range(len(queries))]
    for text, query in zip(texts, queries, strict=True):
        embedder.table[_key(text)] = query
    ours_url = _new_database(server, "tm_vec_ours")
    theirs_url = _new_database(server, "tm_vec_theirs")
    start = time.perf_counter()
    ids = _load_ours(ours_url, records, vectors)
    _load_theirs(theirs_url, records, embedder)
    print(f"\n{workload} {count}: both loaded in {time.perf_counter() - start:.0f} s")
    row_of = {memory_id: row for row, memory_id in enumerate(ids)}
    agents = np.array([int(r["agent_id"][5:]) for r in records])
    sessions = np.array([int(r["session_id"][1:]) for r in records])
    pick = np.random.default_rng(count + 2).integers(count, size=len(queries))
    pure = RecallSettings(
        keyword_share=0.0, importance_weight=0.0, retention_floor=1.0, recency_weight=0.0,
        graph_share=0.0, adjacency_weight=0.0, speaker_boost=0.0, neighbour_weight=0.0,
    )  # fmt: skip
    ours = _open_tiered(ours_url, embedder, recall=pure)
    cases: dict[str, dict[str, list[float]]] = {}
    try:
        with _langgraph(theirs_url, embedder) as theirs:
            ours.recall(texts[0], k=K)  # warm both
            theirs.search(("memories",), query=texts[0], limit=K)
            for case in ("unfiltered", "by agent", "by session"):
                got: dict[str, list[float]] = {
                    "ours recall": [], "theirs recall": [], "ours s": [], "ours leg s": [],
                    "theirs s": [],
                }  # fmt: skip
                for j, (text, query) in enumerate(zip(texts, queries, strict=True)):
                    target = records[int(pick[j])]
                    prefix: tuple[str, ...]
                    if case == "unfiltered":
                        rows, kw, prefix = np.arange(count), {}, ("memories",)
                    elif case == "by agent":
                        rows = np.flatnonzero(agents == int(target["agent_id"][5:]))
                        kw = {"agent_id": target["agent_id"]}
                        prefix = ("memories", target["agent_id"])
                    else:
                        rows = np.flatnonzero(sessions == int(target["session_id"][1:]))
                        kw = {"session_id": target["session_id"]}
                        prefix = ("memories", target["agent_id"], target["session_id"])
                    truth = _exact(vectors, query, rows)
                    hits, took = _timed(ours.recall, text, k=K, **kw)
                    got["ours s"].append(took)
                    got["ours recall"].append(
                        len(truth & {row_of.get(h.memory.id, -1) for h in hits}) / K
                    )
                    where = MemoryFilter(**kw)
                    _, took = _timed(ours.store.indexes.vector_search, query, K, where=where)
                    got["ours leg s"].append(took)
                    items, took = _timed(theirs.search, prefix, query=text, limit=K)
                    got["theirs s"].append(took)
                    got["theirs recall"].append(len(truth & {int(i.key[1:]) for i in items}) / K)
                cases[case] = got
    finally:
        ours.shutdown()
    print(
        f"{workload} {count}: case | recall@10 ours / PostgresStore | p50 recall() / "
        "PostgresStore.search (ratio) | p50 of our vector leg alone (vector_search(k=10))"
    )
    for case, got in cases.items():
        mine, theirs_ms = _p50(got["ours s"]), _p50(got["theirs s"])
        print(
            f"  {case:<10} | {statistics.mean(got['ours recall']):.3f} / "
            f"{statistics.mean(got['theirs recall']):.3f} | {mine:.2f} / {theirs_ms:.2f} ms "
            f"({mine / theirs_ms:.2f}x) | {_p50(got['ours leg s']):.2f} ms"
        )
    _raw_curve(ours_url, vectors, queries, ids)


def _raw_curve(url: str, vectors: np.ndarray, queries: np.ndarray, ids: list[str]) -> None:
    """Raw SQL over our ``tm_vectors``: the HNSW scan at each ``ef_search`` of
    :data:`EF_CURVE` and a sequential exact scan (recall@10 and p50)."""
    import psycopg
    from pgvector.psycopg import register_vector

    from persistence.postgres.sql import vector_sql

    row_of = {memory_id: row for row, memory_id in enumerate(ids)}
    truths = [_exact(vectors, q, np.arange(len(vectors))) for q in queries]
    indexed = f"SELECT memory_id FROM tm_vectors v ORDER BY {vector_sql.index_order(DIM)} LIMIT 10"
    exact = "SELECT memory_id FROM tm_vectors v ORDER BY v.embedding <=> %(v)b LIMIT 10"
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        line = []
        for ef in EF_CURVE:
            conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(ef),))
            line.append(f"ef {ef}: " + _raw(conn, indexed, queries, truths, row_of))
        conn.execute("SET enable_indexscan = off")
        line.append("exact scan: " + _raw(conn, exact, queries[:20], truths[:20], row_of))
    print("  raw HNSW top-10 (recall, p50): " + "; ".join(line))


def _raw(
    conn: Any, sql: str, queries: np.ndarray, truths: list[set[int]], row_of: dict[str, int]
) -> str:
    found, samples = [], []
    for query, truth in zip(queries, truths, strict=True):
        cursor, took = _timed(lambda v: conn.execute(sql, {"v": v}).fetchall(), query)
        got = cursor
        samples.append(took)
        found.append(len(truth & {row_of.get(r[0], -1) for r in got}) / K)
    return f"{statistics.mean(found):.3f}, {_p50(samples):.2f} ms"

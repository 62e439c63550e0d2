"""Write cost as the file grows, and batches, against raw APSW + FTS5 in the same run.

Run: ``.venv/bin/python -m pytest benchmarks/test_write_bench.py -s`` (sizes from
``TM_BENCH_SIZES``, default ``1000,10000,100000``; a few minutes).

For each workload (50 interleaved sessions; sessions of 50 in a row) a file grows to
the largest size by ``remember()`` calls, one transaction each, a 384-d vector supplied
and no embedder; p50 and p99 come from the last 1,000 calls before each size. The raw
floor grows beside it: a table row plus one FTS5 row per commit, through a connection
with the library's pragmas. Then, into the largest file, ``remember_many`` of 10,000
records and 5,000 ``remember()`` calls inside one ``transaction()`` against a raw
single-transaction insert of the same rows. Last, in the interleaved file, an agent's
rhythm (bursts of 10 calls, 100 ms pauses) with the background keyword-index merges off
and on.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest

from benchmarks.smoke import size, smoke
from persistence.sqlite.connection import ConnectionOptions, connect, connection_wal
from tiered_memory import AgentMemoryManager

DIM = 384
TIMED = size(1000, 20)  # single remember() calls timed at each size
BATCH = size(10_000, 50)
IN_TRANSACTION = size(5_000, 20)
PACED = size(2_000, 20)  # remember() calls of the paced workload, per setting
BURST = 10
PAUSE_S = 0.1 if not smoke() else 0.001
SIZES = (
    [100]
    if smoke()
    else [int(n) for n in os.environ.get("TM_BENCH_SIZES", "1000,10000,100000").split(",")]
)
WORKLOADS = ("interleaved", "sessions of 50")
WORDS = np.array([f"w{i}" for i in range(5000)])
RESULTS: list[str] = []


class Workload:
    """Texts, vectors and sessions for the n-th memory of a workload."""

    def __init__(self, kind: str, seed: int) -> None:
        self.kind = kind
        self.rng = np.random.default_rng(seed)
        vectors = self.rng.standard_normal((1024, DIM)).astype(np.float32)
        self.vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def session(self, n: int) -> str:
        return f"s{n % 50}" if self.kind == "interleaved" else f"s{n // 50}"

    def records(self, start: int, count: int) -> list[dict[str, Any]]:
        picks = WORDS[self.rng.integers(len(WORDS), size=(count, 12))]
        return [
            {"content": " ".join(row), "session_id": self.session(n),
             "embedding": self.vectors[n % 1024]}
            for n, row in enumerate(picks, start)
        ]  # fmt: skip


def _sessions(memory: AgentMemoryManager, workload: Workload, start: int, stop: int) -> None:
    names = dict.fromkeys(workload.session(n) for n in range(start, stop))
    for name in names:
        if memory.sessions.get(name) is None:
            memory.start_session(name)


def _raw_file(path: Path) -> apsw.Connection:
    conn = connect(str(path), ConnectionOptions())
    connection_wal(conn)
    conn.execute(
        "CREATE TABLE IF NOT EXISTS memories (id TEXT PRIMARY KEY, content TEXT NOT NULL, "
        "session_id TEXT, embedding BLOB, created_at INTEGER)"
    )
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(content, content='', "
        "contentless_delete=1, tokenize='porter unicode61')"
    )
    return conn


def _raw_rows(records: list[dict[str, Any]], prefix: str) -> list[tuple[Any, ...]]:
    return [
        (f"{prefix}{n}", r["content"], r["session_id"], r["embedding"].tobytes(), n)
        for n, r in enumerate(records)
    ]


def _raw_insert(conn: apsw.Connection, rows: list[tuple[Any, ...]]) -> None:
    """One transaction: the rows, then their FTS5 rows."""
    conn.execute("BEGIN IMMEDIATE")
    for row in rows:
        conn.execute("INSERT INTO memories VALUES (?, ?, ?, ?, ?)", row)
        conn.execute(
            "INSERT INTO memories_fts (rowid, content) VALUES (last_insert_rowid(), ?)", (row[1],)
        )
    conn.execute("COMMIT")


def _ms(samples: list[float]) -> tuple[float, float]:
    ms = np.array(samples) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


@pytest.fixture(scope="module", autouse=True)
def table() -> Iterator[None]:
    yield
    print("\n" + "\n".join(RESULTS))


@pytest.mark.parametrize("kind", WORKLOADS)
def test_remember_latency_as_the_file_grows_and_batch_rates(tmp_path: Path, kind: str) -> None:
    """The file grows by ``remember()`` alone (one transaction each, as an agent writes);
    p50/p99 are taken over the last ``TIMED`` calls before each size, and the raw floor
    grows the same way beside it. Then the batches, into the file at its largest."""
    workload = Workload(kind, 7)
    options = {"embedder": None, "recall_review_quality": None}
    largest = max(SIZES)
    with AgentMemoryManager.open(tmp_path / "lib.db", **options) as memory:
        raw = _raw_file(tmp_path / "raw.db")
        library: list[float] = []
        floor: list[float] = []
        start = time.perf_counter()
        for at in range(0, largest, BATCH):
            records = workload.records(at, min(BATCH, largest - at))
            _sessions(memory, workload, at, at + len(records))
            for record in records:
                content = record.pop("content")
                begin = time.perf_counter()
                memory.remember(content, **record)
                library.append(time.perf_counter() - begin)
                record["content"] = content
            for row in _raw_rows(records, f"one{at}-"):
                begin = time.perf_counter()
                _raw_insert(raw, [row])
                floor.append(time.perf_counter() - begin)
        grown = time.perf_counter() - start
        for size in SIZES:
            lp50, lp99 = _ms(library[max(size - TIMED, 0) : size])
            rp50, rp99 = _ms(floor[max(size - TIMED, 0) : size])
            RESULTS.append(
                f"{size:>7} {kind:<15} remember() p50 {lp50:.2f} ms p99 {lp99:.2f} ms "
                f"max {max(library[max(size - TIMED, 0) : size]) * 1000:.1f} ms "
                f"(p99/p50 {lp99 / lp50:.1f}); raw row+FTS5 per commit p50 {rp50:.2f} ms "
                f"p99 {rp99:.2f} ms; library p50 at {rp50 / lp50:.0%} of raw"
            )
        RESULTS.append(f"{largest:>7} {kind:<15} grown one remember() at a time in {grown:.0f} s")
        at = largest
        batch = workload.records(at, BATCH)
        _sessions(memory, workload, at, at + BATCH + IN_TRANSACTION)
        begin = time.perf_counter()
        memory.remember_many(batch)
        many = BATCH / (time.perf_counter() - begin)
        begin = time.perf_counter()
        _raw_insert(raw, _raw_rows(batch, "b"))
        raw_many = BATCH / (time.perf_counter() - begin)
        grouped = workload.records(at + BATCH, IN_TRANSACTION)
        begin = time.perf_counter()
        with memory.transaction():
            for record in grouped:
                memory.remember(record.pop("content"), **record)
        in_tx = IN_TRANSACTION / (time.perf_counter() - begin)
        begin = time.perf_counter()
        _raw_insert(raw, _raw_rows(workload.records(0, IN_TRANSACTION), "t"))
        raw_tx = IN_TRANSACTION / (time.perf_counter() - begin)
        raw.close()
        RESULTS.append(
            f"{largest:>7} {kind:<15} remember_many({BATCH}) {many:,.0f}/s, raw one-transaction "
            f"insert {raw_many:,.0f}/s ({many / raw_many:.0%}); {IN_TRANSACTION} remember() in "
            f"one transaction {in_tx:,.0f}/s, raw {raw_tx:,.0f}/s ({in_tx / raw_tx:.0%})"
        )
        assert memory.statistics().storage.episodic_count == at + BATCH + IN_TRANSACTION
        if kind == "interleaved":
            _paced(memory, workload, at + BATCH + IN_TRANSACTION, largest)


def _paced(memory: AgentMemoryManager, workload: Workload, at: int, largest: int) -> None:
    """An agent's rhythm: bursts of ``BURST`` ``remember()`` calls, then a pause (the
    model thinking), in which the background thread merges the keyword index; against
    the same with that idle work off. Each setting starts from its own copy of the file
    as the batches left it (a backlog of merges), so neither inherits the other's."""
    figures = []
    for label, idle in (("idle merges off", False), ("idle merges on", True)):
        copy = memory.backup(Path(memory.store.path).parent / f"paced-{idle}.db")
        with AgentMemoryManager.open(copy, embedder=None, recall_review_quality=None) as agent:
            if not idle:  # the keyword index's idle merger stopped
                agent.store.keywords.merger.stop(None)  # type: ignore[attr-defined]
            records = workload.records(at, PACED)
            _sessions(agent, workload, at, at + PACED)
            latencies = []
            for n, record in enumerate(records):
                content = record.pop("content")
                begin = time.perf_counter()
                agent.remember(content, **record)
                latencies.append(time.perf_counter() - begin)
                if n % BURST == BURST - 1:
                    time.sleep(PAUSE_S)
        ms = np.array(latencies) * 1000
        p50, p99, p999 = np.percentile(ms, [50, 99, 99.9])
        figures.append(
            f"{largest:>7} paced ({BURST} then {PAUSE_S * 1000:.0f} ms) {label}: remember() "
            f"p50 {p50:.2f} ms p99 {p99:.2f} ms p99.9 {p999:.2f} ms max {ms.max():.1f} ms"
        )
    RESULTS.extend(figures)

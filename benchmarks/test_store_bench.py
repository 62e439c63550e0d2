"""SQLiteStore against raw APSW running the same SQL on the same kind of file.

Run: ``.venv/bin/python -m pytest benchmarks/test_store_bench.py`` (prints a ratio table).
The raw side binds pre-encoded rows, so the ratio is what validation, encoding, decoding
into records and transaction handling cost on top of SQLite itself.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest

from benchmarks.raw_sql import raw_promote
from benchmarks.smoke import size
from persistence import Memory, QueryOptions, Tier
from persistence.sqlite import SQLiteStore
from persistence.sqlite.connection import ConnectionOptions, connect, connection_wal
from persistence.sqlite.sql import memory_sql

PREFILL = size(10_000, 300)
DIM = 384
RNG = np.random.default_rng(7)


def _memory(i: int, tier: Tier = Tier.EPISODIC) -> Memory:
    return Memory.create(
        f"memory number {i}: the user said something worth keeping about topic {i % 97}",
        tier,
        session_id=f"s{i % 50}",
        agent_id=f"a{i % 4}",
        tags=(f"topic{i % 97}", "bench"),
        importance=0.5,
        embedding=RNG.standard_normal(DIM).astype(np.float32),
    )


@pytest.fixture(scope="module")
def files(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[SQLiteStore, apsw.Connection]]:
    """One store and one raw connection on two files filled with the same rows."""
    root: Path = tmp_path_factory.mktemp("bench")
    store = SQLiteStore(root / "store.db").open()
    with store.transaction():
        for i in range(PREFILL):
            store.put_episodic(_memory(i))
    store.close()  # closing refreshes the planner's statistics, as a long-lived file has them
    store.open()
    SQLiteStore(root / "raw.db").open().close()
    raw = connect(str(root / "raw.db"), ConnectionOptions())
    connection_wal(raw)
    raw.execute("BEGIN IMMEDIATE")
    for memory in store.query_episodic(QueryOptions(limit=None)):
        _raw_put(raw, memory_sql.encode_row(memory, memory.embedding.tobytes()), memory)  # type: ignore[union-attr]
    raw.execute("COMMIT")
    raw.pragma("optimize")
    yield store, raw
    store.close()
    raw.close()


_UPSERT = memory_sql._UPSERT[Tier.EPISODIC]
_SELECT_BY_ID = memory_sql._SELECT[Tier.EPISODIC] + " WHERE t.id = ?"


def _raw_put(raw: apsw.Connection, row: tuple[Any, ...], memory: Memory) -> None:
    raw.execute(_UPSERT, row)
    raw.execute("DELETE FROM memory_tags WHERE memory_id = ?", (memory.id,))
    raw.executemany(
        "INSERT INTO memory_tags (memory_id, tag, position) VALUES (?, ?, ?)",
        [(memory.id, tag, n) for n, tag in enumerate(memory.tags)],
    )


def test_put_library(benchmark: Any, record: Any, files: Any) -> None:
    store, _ = files
    counter = itertools.count(PREFILL)
    benchmark(lambda: store.put_episodic(_memory(next(counter))))
    record("put_episodic", "library")


def test_put_raw(benchmark: Any, record: Any, files: Any) -> None:
    _, raw = files
    counter = itertools.count(PREFILL)

    def put() -> None:
        memory = _memory(next(counter))
        row = memory_sql.encode_row(memory, memory.embedding.tobytes())  # type: ignore[union-attr]
        raw.execute("BEGIN IMMEDIATE")
        _raw_put(raw, row, memory)
        raw.execute("COMMIT")

    benchmark(put)
    record("put_episodic", "raw")


def _ids(store: SQLiteStore) -> list[str]:
    return [m.id for m in store.query_episodic(QueryOptions(limit=2000))]


def test_get_library(benchmark: Any, record: Any, files: Any) -> None:
    store, _ = files
    ids = itertools.cycle(_ids(store))
    benchmark(lambda: store.get_episodic(next(ids)))
    record("get_episodic (uncached)", "library")


def test_get_raw(benchmark: Any, record: Any, files: Any) -> None:
    store, raw = files
    ids = itertools.cycle(_ids(store))
    benchmark(lambda: raw.execute(_SELECT_BY_ID, (next(ids),)).fetchone())
    record("get_episodic (uncached)", "raw")


QUERY = QueryOptions(tags=("topic42",), agent_id="a2", limit=20)


def test_query_library(benchmark: Any, record: Any, files: Any) -> None:
    store, _ = files
    assert benchmark(lambda: store.query_episodic(QUERY))
    record("query (tag+agent, 20)", "library")


def test_query_raw(benchmark: Any, record: Any, files: Any) -> None:
    _, raw = files
    sql = (
        memory_sql._SELECT[Tier.EPISODIC]
        + " WHERE t.agent_id = ? AND t.id IN (SELECT memory_id FROM memory_tags WHERE tag = ?)"
        " ORDER BY t.created_at DESC, t.id DESC LIMIT ? OFFSET ?"
    )
    assert benchmark(lambda: raw.execute(sql, ("a2", "topic42", 20, 0)).fetchall())
    record("query (tag+agent, 20)", "raw")


def test_promote_library(benchmark: Any, record: Any, files: Any) -> None:
    store, _ = files
    counter = itertools.count(10 * PREFILL)

    def setup() -> tuple[tuple[str, Tier, Tier], dict[str, Any]]:
        memory = store.put_episodic(_memory(next(counter)))
        return (memory.id, Tier.EPISODIC, Tier.SEMANTIC), {}

    benchmark.pedantic(store.promote_memory, setup=setup, rounds=500)
    record("promote episodic→semantic", "library")


def test_promote_raw(benchmark: Any, record: Any, files: Any) -> None:
    _, raw = files
    counter = itertools.count(10 * PREFILL)

    def setup() -> tuple[tuple[str], dict[str, Any]]:
        memory = _memory(next(counter))
        raw.execute("BEGIN IMMEDIATE")
        _raw_put(raw, memory_sql.encode_row(memory, memory.embedding.tobytes()), memory)  # type: ignore[union-attr]
        raw.execute("COMMIT")
        return (memory.id,), {}

    benchmark.pedantic(lambda memory_id: raw_promote(raw, memory_id), setup=setup, rounds=500)
    record("promote episodic→semantic", "raw")

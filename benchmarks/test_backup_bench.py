"""Backup, export and import against raw floors on a file of 100k memories.

Run: ``.venv/bin/python -m pytest benchmarks/test_backup_bench.py`` (takes a few
minutes; prints the ratio table and MB/s or memories/s). The raw floors: ``VACUUM INTO``
alone; ``SELECT`` + ``orjson.dumps`` of raw rows; ``executemany`` of pre-parsed rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import orjson
import pytest

from benchmarks.smoke import size
from persistence import Memory, QueryOptions, Tier
from persistence.sqlite import SQLiteStore
from persistence.sqlite.sql import memory_sql
from tiered_memory import AgentMemoryManager

COUNT = size(100_000, 300)
DIM = 384


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AgentMemoryManager, Path]]:
    root = tmp_path_factory.mktemp("backup-bench")
    path = root / "big.db"
    rng = np.random.default_rng(3)
    with SQLiteStore(path) as store, store.transaction():
        for i in range(COUNT):
            tier = Tier.SEMANTIC if i % 4 == 0 else Tier.EPISODIC
            vector = rng.standard_normal(DIM, dtype=np.float32)
            content = f"memory {i}: something the user said about {i % 501}"
            store.memories.put_memory(
                Memory.create(content, tier, tags=(f"t{i % 13}",), embedding=vector)
            )
    memory = AgentMemoryManager.open(path)
    memory.maintain()
    yield memory, root
    memory.shutdown()


def _mb(path: Path) -> float:
    return path.stat().st_size / 1e6


def test_backup_library(benchmark: Any, record: Any, big: Any) -> None:
    memory, root = big
    counter = itertools.count()
    benchmark.pedantic(lambda: memory.backup(root / f"lib-{next(counter)}.db"), rounds=3)
    record("backup (100k memories)", "library", (_mb(root / "big.db"), "MB"))


def test_backup_raw(benchmark: Any, record: Any, big: Any) -> None:
    memory, root = big
    conn = apsw.Connection(str(root / "big.db"))
    counter = itertools.count()
    benchmark.pedantic(
        lambda: conn.execute("VACUUM INTO ?", (str(root / f"raw-{next(counter)}.db"),)), rounds=3
    )
    record("backup (100k memories)", "raw", (_mb(root / "big.db"), "MB"))
    conn.close()


def test_export_library(benchmark: Any, record: Any, big: Any) -> None:
    memory, root = big
    counter = itertools.count()
    benchmark.pedantic(lambda: memory.export_json(root / f"lib-{next(counter)}.json"), rounds=2)
    record("export_json (100k)", "library", (COUNT, "memories"))


def test_export_raw(benchmark: Any, record: Any, big: Any) -> None:
    memory, root = big
    conn = apsw.Connection(str(root / "big.db"))
    counter = itertools.count()

    def export() -> None:
        with (root / f"raw-{next(counter)}.json").open("wb") as out:
            for table in ("episodic", "semantic"):
                for row in conn.execute(f"SELECT * FROM {table}"):
                    out.write(orjson.dumps([v.hex() if isinstance(v, bytes) else v for v in row]))

    benchmark.pedantic(export, rounds=2)
    record("export_json (100k)", "raw", (COUNT, "memories"))
    conn.close()


def test_import_library(benchmark: Any, record: Any, big: Any) -> None:
    memory, root = big
    source = memory.export_json(root / "source.json")
    counter = itertools.count()

    def load() -> None:
        with AgentMemoryManager.open(root / f"import-{next(counter)}.db") as target:
            target.import_json(source)

    benchmark.pedantic(load, rounds=2)
    record("import_json (100k)", "library", (COUNT, "memories"))


def test_import_raw(benchmark: Any, record: Any, big: Any) -> None:
    memory, root = big
    rows = {tier: [memory_sql.encode_row(m, m.embedding.tobytes())  # type: ignore[union-attr]
                   for m in memory.store.memories.query(tier, QueryOptions(limit=None))]
            for tier in (Tier.EPISODIC, Tier.SEMANTIC)}  # fmt: skip
    counter = itertools.count()

    def load() -> None:
        path = root / f"raw-import-{next(counter)}.db"
        AgentMemoryManager.open(path).shutdown()
        conn = apsw.Connection(str(path))
        with conn:
            for tier, tier_rows in rows.items():
                conn.executemany(memory_sql._UPSERT[tier], tier_rows)
        conn.close()

    benchmark.pedantic(load, rounds=2)
    record("import_json (100k)", "raw", (COUNT, "memories"))

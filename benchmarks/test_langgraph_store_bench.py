"""LangGraph stores side by side: TieredMemoryStore vs LangGraph's SqliteStore and
InMemoryStore, the same workload through each, in one run.

Run: ``.venv/bin/python -m pytest benchmarks/test_langgraph_store_bench.py -s``.

``ITEMS`` items are put one call at a time into 20 namespaces (a text of 8 words, two
filterable fields), then ``LOOKUPS`` gets of random items, searches with a filter in one
namespace, and searches with a ``query`` over the namespace root; p50 of each call is
printed. Both files use WAL and ``synchronous=NORMAL``. Query search: TieredMemoryStore
runs recall with keywords only (``embedder=None``); LangGraph's stores get an index
with a cheap hash embedding (32 dimensions), so their vector search cost shows without
a model's (no store here loads a real embedding model). "Tiered (index)" is
TieredMemoryStore with the same LangGraph index: ``score`` is the best field's cosine
similarity, computed over every item under the prefix (no vector index for it yet).
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from benchmarks.smoke import size
from tiered_memory.integrations.langgraph import TieredMemoryStore

ITEMS = size(2000, 20)
LOOKUPS = size(300, 5)
DIMS = 32
WORDS = [f"w{i}" for i in range(500)]


def _embed(texts: list[str]) -> list[list[float]]:
    """A deterministic stand-in for an embedding model: hashed bag of words."""
    out = []
    for text in texts:
        vector = [0.0] * DIMS
        for word in text.split():
            vector[hashlib.blake2b(word.encode(), digest_size=1).digest()[0] % DIMS] += 1.0
        out.append(vector)
    return out


def _p50_ms(calls: list[Callable[[], Any]]) -> float:
    times = []
    for call in calls:
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def _workload(store: BaseStore, *, query: bool = True, seed: int = 7) -> dict[str, float]:
    rng = random.Random(seed)
    items = [
        (("users", f"u{i % 20}"), f"k{i}",
         {"text": " ".join(rng.choices(WORDS, k=8)), "n": i % 10, "kind": f"c{i % 3}"})
        for i in range(ITEMS)
    ]  # fmt: skip
    result = {"put": _p50_ms([lambda it=it: store.put(*it) for it in items])}
    picks = [rng.choice(items) for _ in range(LOOKUPS)]
    result["get"] = _p50_ms([lambda p=p: store.get(p[0], p[1]) for p in picks])
    result["search (filter)"] = _p50_ms(
        [lambda p=p: store.search(p[0], filter={"n": p[2]["n"]}, limit=10) for p in picks]
    )
    result["list_namespaces"] = _p50_ms([lambda: store.list_namespaces(limit=100)] * 20)
    if not query:
        return result
    queries = [" ".join(p[2]["text"].split()[:2]) for p in picks]
    result["search (query)"] = _p50_ms(
        [lambda q=q: store.search(("users",), query=q, limit=10) for q in queries]
    )
    return result


def test_peer_stores(tmp_path: Path) -> None:
    rows: dict[str, dict[str, float]] = {}
    with TieredMemoryStore.open(
        tmp_path / "tiered.db", embedder=None, embed_in_background=False
    ) as tiered:
        rows["TieredMemoryStore"] = _workload(tiered)
    index_config: Any = {"dims": DIMS, "embed": _embed, "fields": ["text"]}
    with TieredMemoryStore.open(
        tmp_path / "tiered-index.db", index=index_config, embedder=None,
        embed_in_background=False,
    ) as tiered_index:  # fmt: skip
        rows["Tiered (index)"] = _workload(tiered_index)
    conn = sqlite3.connect(tmp_path / "langgraph.db", check_same_thread=False,
                           isolation_level=None)  # fmt: skip
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    # An index needs sqlite-vec loaded into the stdlib sqlite3 connection, which not
    # every Python allows (enable_load_extension): then query search is left out.
    index = {"dims": DIMS, "embed": _embed, "fields": ["text"]}
    try:
        sqlite_store = SqliteStore(conn, index=index if _loadable(conn) else None)  # type: ignore[arg-type]
        sqlite_store.setup()
        rows["SqliteStore"] = _workload(sqlite_store, query=sqlite_store.index_config is not None)
    finally:
        conn.close()
    in_memory = InMemoryStore(index={"dims": DIMS, "embed": _embed, "fields": ["text"]})
    rows["InMemoryStore"] = _workload(in_memory)
    ops = list(rows["InMemoryStore"])

    def cell(name: str, op: str) -> str:
        mine, base = rows[name].get(op), rows["SqliteStore"].get(op)
        if mine is None:
            return "n/a"
        return f"{mine:.3f}" + (f" ({mine / base:.2f}x)" if base else "")

    lines = [
        f"\n{ITEMS} items, {LOOKUPS} lookups; p50 per call in ms "
        "(ratio to SqliteStore in brackets)",
        f"{'store':<20}" + "".join(f"{op:>24}" for op in ops),
    ]
    for name in rows:
        lines.append(f"{name:<20}" + "".join(f"{cell(name, op):>24}" for op in ops))
    print("\n".join(lines))
    assert set(rows["TieredMemoryStore"]) == set(rows["Tiered (index)"]) == set(ops)


def _loadable(conn: sqlite3.Connection) -> bool:
    return hasattr(conn, "enable_load_extension")

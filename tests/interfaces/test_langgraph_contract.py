"""TieredMemoryStore keeps LangGraph's store contract: cosine scores with an index (one
vector per field, an item ranked by its best field), dotted filter keys, raw batches under
the reserved root, TTLs as deadlines swept by ``forget()``, ``async with``, integers
beyond 64 bits, filters applied before the limit. Each runs in RAM (``":memory:"``) and
on a file / a PostgreSQL database, sync and async."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp

from persistence import InvalidInputError
from tiered_memory import AgentMemoryManager
from tiered_memory.integrations.langgraph import TieredMemoryStore, TieredSearchItem

DIMS = 27


def letters(texts: list[str]) -> list[list[float]]:
    """A deterministic embedder: letter counts (a-z) plus one for everything else."""
    vectors = []
    for text in texts:
        vector = [0.0] * DIMS
        for char in text.lower():
            vector[ord(char) - 97 if "a" <= char <= "z" else 26] += 1.0
        vectors.append(vector)
    return vectors


def cosine(a: list[float], b: list[float]) -> float:
    va, vb = np.asarray(a), np.asarray(b)
    return float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb)))


INDEX: Any = {"dims": DIMS, "embed": letters, "fields": ["title", "notes[*]"]}


class Clock:
    """A settable clock (ms) for deadlines."""

    def __init__(self) -> None:
        self.now = 1_800_000_000_000

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += round(seconds * 1000)


@pytest.fixture
def location(any_store: str) -> str:
    """``":memory:"`` (a store in RAM), the test's file or its PostgreSQL database."""
    return any_store


@pytest.fixture
def store(location: str) -> Iterator[TieredMemoryStore]:
    with TieredMemoryStore.open(location, index=INDEX, embedder=None) as opened:
        yield opened


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_score_is_the_best_fields_cosine_similarity(store: TieredMemoryStore) -> None:
    docs: dict[str, Any] = {
        "exact": {"title": "zebra crossing", "notes": ["unrelated words here"]},
        "second_field": {"title": "qqqq", "notes": ["nothing", "zebra crossings"]},
        "far": {"title": "mmm ppp", "notes": ["kkk"]},
    }
    for key, value in docs.items():
        store.put(("docs",), key, value)
    query = "zebra crossing"
    results = store.search(("docs",), query=query, limit=10)
    (q,) = letters([query])
    expected = {
        key: max(cosine(q, v) for v in letters([value["title"], *value["notes"]]))
        for key, value in docs.items()
    }
    assert [r.key for r in results] == sorted(expected, key=lambda k: -expected[k])
    for result in results:
        assert result.score == pytest.approx(expected[result.key], abs=1e-9)
        assert isinstance(result, TieredSearchItem)
    assert results[0].key == "exact" and results[0].score == pytest.approx(1.0)
    # ranked by its best field: one vector of the joined text would score it lower
    joined = cosine(q, letters(["qqqq\nnothing\nzebra crossings"])[0])
    assert expected["second_field"] > joined
    assert all(r.score is not None and r.score <= 1.0 + 1e-12 for r in results)
    top = results[0]
    assert isinstance(top, TieredSearchItem)
    assert top.fused_score is not None and top.explanation is not None  # recall's view


@pytest.mark.slow  # 1.0 s measured on a busy machine
def test_index_per_put_path_forms_and_unindexed_items(store: TieredMemoryStore) -> None:
    store.put(("d",), "last", {"title": "x", "notes": ["aaaa", "bbbb"]}, index=["notes[-1]"])
    store.put(("d",), "none", {"title": "bbbb"}, index=False)
    results = store.search(("d",), query="bbbb", limit=5)
    assert [r.key for r in results] == ["last", "none"]  # unembedded items fill up after
    assert results[0].score == pytest.approx(1.0)  # only the last note was embedded
    assert results[1].score is None
    only_first = store.search(("d",), query="aaaa", limit=1)
    assert only_first[0].score == pytest.approx(0.0)  # "aaaa" was not embedded


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_an_embedder_of_the_wrong_size_changes_nothing(location: str) -> None:
    bad: Any = {"dims": DIMS, "embed": lambda texts: [[1.0, 0.0] for _ in texts]}
    with TieredMemoryStore.open(location, index=bad, embedder=None) as store:
        with pytest.raises(InvalidInputError, match="dims"):
            store.batch([PutOp(("n",), "a", {"t": "x"}), PutOp(("n",), "b", {"t": "y"})])
        assert store.search(("n",)) == []
    with pytest.raises(InvalidInputError, match="dims"):
        zero: Any = {"dims": 0, "embed": letters}
        TieredMemoryStore.open(location, index=zero, embedder=None)


def test_dotted_filter_keys_are_nested_paths(store: TieredMemoryStore) -> None:
    store.put(("u",), "a", {"user": {"access-level": "nested", "n": 3}})
    store.put(("u",), "b", {"user": {"access-level": "flat", "n": 9}})
    store.put(("u",), "c", {"user.access-level": "nested"})  # a flat key with a dot
    found = store.search(("u",), filter={"user.access-level": "nested"})
    assert sorted(r.key for r in found) == ["a", "c"]
    assert [r.key for r in store.search(("u",), filter={"user.n": {"$gt": 5}})] == ["b"]
    assert store.search(("u",), filter={"user.missing.deeper": 1}) == []


def test_raw_batches_may_write_under_the_langgraph_root(store: TieredMemoryStore) -> None:
    with pytest.raises(InvalidNamespaceError):
        store.put(("langgraph", "x"), "k", {"v": 1})
    store.batch([PutOp(("langgraph", "x"), "k", {"v": 1})])
    assert store.batch([GetOp(("langgraph", "x"), "k")])[0].value == {"v": 1}  # type: ignore[union-attr]


def test_integers_wider_than_64_bits_are_kept(location: str) -> None:
    value = {"big": 2**70, "neg": -(2**80) + 1, "nested": {"list": [2**64, 1]}}
    with TieredMemoryStore.open(location, embedder=None) as store:
        store.put(("n",), "k", value)
        assert store.get(("n",), "k").value == value  # type: ignore[union-attr]
        assert [r.key for r in store.search(("n",), filter={"big": 2**70})] == ["k"]
        assert store.search(("n",), filter={"big": 2**70 + 1}) == []
    if location != ":memory:":
        with TieredMemoryStore.open(location, embedder=None) as reopened:
            assert reopened.get(("n",), "k").value == value  # type: ignore[union-attr]


@pytest.mark.slow  # 16.0 s measured on a busy machine
def test_a_filter_is_applied_before_the_limit(location: str) -> None:
    with TieredMemoryStore.open(location, index=INDEX, embedder=None) as store:
        ops = [PutOp(("f",), f"m{i}", {"title": f"match {i}", "kind": "rare"}) for i in range(12)]
        ops += [
            PutOp(("f",), f"o{i}", {"title": f"other {i}", "kind": "common"}) for i in range(600)
        ]
        store.batch(ops)  # the matches are the oldest: behind 600 newer items
        listed = store.search(("f",), filter={"kind": "rare"}, limit=10)
        assert len(listed) == 10 and all(r.value["kind"] == "rare" for r in listed)
        ranked = store.search(("f",), query="other", filter={"kind": "rare"}, limit=10)
        assert len(ranked) == 10 and all(r.value["kind"] == "rare" for r in ranked)
        assert len(store.search(("f",), filter={"kind": "rare"}, limit=10, offset=5)) == 7


def test_ttl_items_expire_are_swept_by_forget_and_refresh_on_read(location: str) -> None:
    clock = Clock()
    ttl: Any = {"default_ttl": 1.0, "refresh_on_read": True}
    with TieredMemoryStore.open(location, ttl=ttl, embedder=None, clock=clock) as store:
        store.put(("t",), "default", {"v": 1})  # one minute, from the TTLConfig
        store.put(("t",), "short", {"v": 2}, ttl=0.5)
        store.put(("t",), "forever", {"v": 3}, ttl=None)
        clock.advance(20)
        assert store.get(("t",), "short", refresh_ttl=False) is not None
        assert store.sweep_ttl() == 0
        clock.advance(15)  # 35 s: "short" is past its 30 s deadline, not yet swept
        assert store.get(("t",), "short") is None  # never returned after its deadline
        assert sorted(r.key for r in store.search(("t",))) == ["default", "forever"]
        clock.advance(20)  # 55 s
        assert store.get(("t",), "default") is not None  # a read refreshes: now 115 s
        clock.advance(30)  # 85 s: past the first deadline, within the refreshed one
        alive = store.search(("t",), refresh_ttl=False)
        assert sorted(r.key for r in alive) == ["default", "forever"]
        assert store.sweep_ttl() == 1  # "short"
        clock.advance(31)  # 116 s
        assert store.sweep_ttl() == 1  # "default"
        assert [r.key for r in store.search(("t",))] == ["forever"]
        assert store.list_namespaces() == [("t",)]
        reasons = [r.reason for r in store.memory.forgetting_log()]
        assert len(reasons) == 2 and all("expired" in r and "TTL" in r for r in reasons)
    if location != ":memory:":
        with AgentMemoryManager.open(location, embedder=None) as memory:
            assert len(memory.query(None, limit=None)) == 1  # the sweep was durable


def test_a_read_without_refresh_on_read_keeps_the_deadline(location: str) -> None:
    clock = Clock()
    with TieredMemoryStore.open(location, embedder=None, clock=clock) as store:
        store.put(("t",), "k", {"v": 1}, ttl=1.0)
        clock.advance(50)
        assert store.get(("t",), "k", refresh_ttl=True) is not None  # as SqliteStore: no
        clock.advance(11)  # refresh without TTLConfig(refresh_on_read=True)
        assert store.get(("t",), "k") is None
        store.put(("t",), "k", {"v": 2}, ttl=1.0)  # rewritten: a new item, a new deadline
        assert store.get(("t",), "k").value == {"v": 2}  # type: ignore[union-attr]
        with pytest.raises(InvalidInputError, match="ttl"):
            store.put(("t",), "bad", {"v": 1}, ttl=-1)
        assert store.get(("t",), "bad") is None


def test_the_sweeper_forgets_expired_items_on_its_interval(location: str) -> None:
    clock = Clock()
    ttl: Any = {"sweep_interval_minutes": 0.05 / 60}
    with TieredMemoryStore.open(location, ttl=ttl, embedder=None, clock=clock) as store:
        store.put(("t",), "k", {"v": 1}, ttl=1.0)
        running = store.start_ttl_sweeper()
        clock.advance(61)
        deadline = time.monotonic() + 10
        while store.memory.forgetting_log() == [] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [r.reason for r in store.memory.forgetting_log()][0].startswith("expired")
        assert store.stop_ttl_sweeper(timeout=5)
        assert running.done()


def test_async_with_open_and_the_async_api(location: str) -> None:
    clock = Clock()

    async def run() -> TieredMemoryStore:
        async with TieredMemoryStore.open(
            location, index=INDEX, ttl={"default_ttl": 1.0}, embedder=None, clock=clock
        ) as store:
            await store.aput(("a",), "k", {"title": "async title", "notes": []})
            found = await store.asearch(("a",), query="async title")
            assert found[0].key == "k" and found[0].score == pytest.approx(1.0)
            clock.advance(61)
            assert await store.aget(("a",), "k") is None
            assert await store.asweep_ttl() == 1
            return store

    store = asyncio.run(run())
    with pytest.raises(Exception, match="clos|shut"):
        store.get(("a",), "k")  # the store opened by open() was closed on exit


def test_lifecycle_calls_work_plain_and_awaited(location: str) -> None:
    """SqliteStore's calls are plain, AsyncSqliteStore's the same names awaited: one
    store answers both (``await`` gives what the async store's coroutine gives)."""
    clock = Clock()
    ttl: Any = {"sweep_interval_minutes": 60}
    with TieredMemoryStore.open(location, ttl=ttl, embedder=None, clock=clock) as store:
        store.setup()
        store.put(("t",), "k", {"v": 1}, ttl=1.0)
        clock.advance(61)
        swept = store.sweep_ttl()
        assert swept == 1 and isinstance(swept, int) and store.get(("t",), "k") is None
        running = store.start_ttl_sweeper()
        assert store.start_ttl_sweeper() is running and not running.done()
        assert store.stop_ttl_sweeper(timeout=5) and running.done()

        async def awaited() -> None:
            assert await store.setup() is None
            store.put(("t",), "k2", {"v": 2}, ttl=1.0)
            clock.advance(61)
            assert await store.sweep_ttl() == 1
            task = await store.start_ttl_sweeper()  # at once, as AsyncSqliteStore's task
            assert not task.done()
            assert await store.stop_ttl_sweeper(timeout=5) is True
            assert task.done()

        asyncio.run(awaited())
        assert store.memory.query(None, limit=None) == []


def test_batched_reads_and_searches_see_the_batch_before_its_writes(
    store: TieredMemoryStore,
) -> None:
    store.put(("b",), "old", {"title": "old", "notes": []})
    results = store.batch(
        [
            PutOp(("b",), "new", {"title": "new", "notes": []}),
            SearchOp(("b",), query="new"),
            GetOp(("b",), "new"),
        ]
    )
    assert [r.key for r in results[1]] == ["old"]  # type: ignore[union-attr]
    assert results[2] is None
    assert math.isclose(store.search(("b",), query="new")[0].score or 0, 1.0)

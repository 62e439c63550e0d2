"""CacheLayer: LRU on cachetools, committed values only, statistics."""

from __future__ import annotations

import pytest

from persistence import CacheLayer, InvalidInputError, Memory, Tier
from persistence.sqlite import SQLiteStore
from tiered_memory import AgentMemoryManager


class Boom(Exception):
    pass


def test_lru_eviction_and_statistics() -> None:
    cache: CacheLayer[str, int] = CacheLayer(maxsize=2)
    cache.set("a", 1)
    cache.set("b", 2)
    assert cache.get("a") == 1  # a is now most recent
    cache.set("c", 3)  # evicts b
    assert cache.get("b") is None
    assert cache.has("a") and cache.has("c") and not cache.has("b")
    stats = cache.get_statistics()
    assert (stats.hits, stats.misses, stats.evictions, stats.size, stats.maxsize) == (1, 1, 1, 2, 2)
    assert stats.hit_rate == 0.5


def test_get_or_load_caches_found_values_only() -> None:
    cache: CacheLayer[str, str] = CacheLayer(maxsize=10)
    calls: list[str] = []

    def load(key: str) -> str | None:
        calls.append(key)
        return None if key == "missing" else key.upper()

    assert cache.get_or_load("x", load) == "X"
    assert cache.get_or_load("x", load) == "X"
    assert cache.get_or_load("missing", load) is None
    assert cache.get_or_load("missing", load) is None
    assert calls == ["x", "missing", "missing"]


def test_a_load_that_raced_a_write_is_not_cached() -> None:
    cache: CacheLayer[str, str] = CacheLayer(maxsize=10)

    def stale_load(key: str) -> str:
        cache.set(key, "new")  # another thread's write lands while we read
        return "old"

    assert cache.get_or_load("k", stale_load) == "old"
    assert cache.get("k") == "new"


def test_bad_maxsize_is_refused() -> None:
    with pytest.raises(InvalidInputError):
        CacheLayer(maxsize=0)


def test_write_through_fills_only_after_commit(store: SQLiteStore) -> None:
    cache: CacheLayer[str, Memory] = CacheLayer(
        10,
        transactions=store.engine,
        writer=lambda key, memory: store.memories.put_memory(memory) and None,
    )
    memory = Memory.create("x", Tier.SEMANTIC)
    with store.transaction():
        cache.set(memory.id, memory)
        assert store.get_semantic(memory.id) == memory  # written through
        assert not cache.has(memory.id)  # but not cached before COMMIT
    assert cache.has(memory.id)


def test_rollback_drops_the_entry(store: SQLiteStore) -> None:
    cache: CacheLayer[str, str] = CacheLayer(10, transactions=store.engine)
    cache.set("k", "committed")
    with pytest.raises(Boom), store.transaction():
        cache.set("k", "never committed")
        raise Boom
    assert not cache.has("k")


def test_delete_through(store: SQLiteStore) -> None:
    memory = store.put_episodic(Memory.create("x"))
    cache: CacheLayer[str, Memory] = CacheLayer(
        10, transactions=store.engine, deleter=store.delete_episodic
    )
    cache.set(memory.id, memory)
    assert cache.delete(memory.id) is True
    assert not cache.has(memory.id) and store.get_episodic(memory.id) is None
    assert cache.delete(memory.id) is False


# --- the manager's use of the cache ----------------------------------------------------


def test_no_stale_entry_after_promotion(memory: AgentMemoryManager) -> None:
    m = memory.remember("fact")
    assert memory.get(m.id) is not None
    assert memory._cache.has(m.id)
    memory.promote(m.id, Tier.SEMANTIC)
    again = memory.get(m.id)
    assert again is not None and again.tier is Tier.SEMANTIC


def test_rolled_back_update_is_not_served_from_cache(memory: AgentMemoryManager) -> None:
    m = memory.remember("before")
    memory.get(m.id)
    with pytest.raises(Boom), memory.transaction():
        memory.update(m.id, content="after")
        assert memory.get(m.id).content == "after"  # type: ignore[union-attr]
        raise Boom
    assert memory.get(m.id).content == "before"  # type: ignore[union-attr]


def test_cached_reads_are_counted(memory: AgentMemoryManager) -> None:
    m = memory.remember("fact")
    for _ in range(5):
        memory.get(m.id)
    stats = memory.statistics().cache
    assert stats.hits == 5 and stats.size == 1


def test_get_many_loads_misses_in_one_call_and_caches_them() -> None:
    cache: CacheLayer[str, str] = CacheLayer(maxsize=10)
    cache.set("a", "A")
    calls: list[list[str]] = []

    def load(keys: list[str]) -> dict[str, str]:
        calls.append(keys)
        return {k: k.upper() for k in keys if k != "missing"}

    assert cache.get_many_or_load(["a", "b", "c", "missing"], load) == {
        "a": "A",
        "b": "B",
        "c": "C",
    }
    assert calls == [["b", "c", "missing"]]
    assert cache.has("b") and cache.has("c") and not cache.has("missing")

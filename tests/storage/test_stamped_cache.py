"""StampedCache (rows kept while nothing commits) and the engines' change stamps."""

from __future__ import annotations

from pathlib import Path

import pytest

from persistence import Memory, StoreClosedError, Tier
from persistence.sqlite import SQLiteStore
from persistence.stores.stamped import StampedCache
from tiered_memory import AgentMemoryManager


class Stamps:
    def __init__(self) -> None:
        self.stamp: object | None = 1

    def change_stamp(self) -> object | None:
        return self.stamp


class Table:
    """A loader that counts its reads."""

    def __init__(self, rows: dict[str, int]) -> None:
        self.rows = rows
        self.asked: list[list[str]] = []

    def __call__(self, keys: list[str]) -> dict[str, int]:
        self.asked.append(keys)
        return {k: self.rows[k] for k in keys if k in self.rows}


def test_kept_while_the_stamp_stays_read_again_when_it_moves() -> None:
    engine, table = Stamps(), Table({"a": 1, "b": 2})
    cache: StampedCache[str, int] = StampedCache(engine)
    assert cache.get_many(["b", "a", "gone"], table) == {"b": 2, "a": 1}
    assert list(cache.get_many(["a", "gone", "b"], table)) == ["a", "b"]  # the order asked
    assert table.asked == [["b", "a", "gone"]]  # absent keys are kept too
    table.rows["a"] = 10
    engine.stamp = 2
    assert cache.get_many(["a", "b"], table) == {"a": 10, "b": 2}
    assert table.asked[-1] == ["a", "b"]


def test_nothing_kept_without_a_stamp() -> None:
    engine, table = Stamps(), Table({"a": 1})
    cache: StampedCache[str, int] = StampedCache(engine)
    engine.stamp = None  # inside a transaction
    assert cache.get_many(["a", "a"], table) == {"a": 1}
    table.rows["a"] = 2
    engine.stamp = 1  # rolled back, say: the stamp is where it was
    assert cache.get_many(["a"], table) == {"a": 2}
    assert len(table.asked) == 2


def test_a_load_that_raced_a_commit_is_not_kept() -> None:
    engine = Stamps()
    cache: StampedCache[str, int] = StampedCache(engine)

    def racing(keys: list[str]) -> dict[str, int]:
        engine.stamp = 2  # a commit, seen by another thread's look meanwhile
        cache.get_many([], lambda _: {})
        return dict.fromkeys(keys, 1)

    assert cache.get_many(["a"], racing) == {"a": 1}
    table = Table({"a": 2})
    assert cache.get_many(["a"], table) == {"a": 2}  # read again, not the raced value
    assert table.asked == [["a"]]


def test_full_starts_again() -> None:
    engine, table = Stamps(), Table({str(i): i for i in range(10)})
    cache: StampedCache[str, int] = StampedCache(engine, max_keys=4)
    cache.get_many(["0", "1", "2"], table)
    cache.get_many(["3", "4"], table)  # 5 > 4: the first three go
    cache.get_many(["0", "3"], table)
    assert table.asked == [["0", "1", "2"], ["3", "4"], ["0"]]


def test_a_load_larger_than_the_bound_is_not_kept() -> None:
    """It was kept whole: one call of 10 keys left 10 in a cache bounded at 4 (review)."""
    engine, table = Stamps(), Table({str(i): i for i in range(10)})
    cache: StampedCache[str, int] = StampedCache(engine, max_keys=4)
    keys = [str(i) for i in range(10)]
    assert cache.get_many(keys, table) == {k: int(k) for k in keys}
    assert len(cache._values) + len(cache._absent) <= 4
    cache.get_many(["0"], table)
    assert table.asked[-1] == ["0"]


@pytest.mark.parametrize("where", ["file", "memory"])
def test_sqlite_stamp_moves_with_every_commit_and_is_none_in_a_transaction(
    where: str, tmp_path: Path
) -> None:
    path = str(tmp_path / "agent.db") if where == "file" else ":memory:"
    with SQLiteStore(path) as store:
        engine = store.engine
        first = engine.change_stamp()
        assert first is not None and engine.change_stamp() == first  # nothing committed
        store.memories.put_memory(Memory.create("one", Tier.EPISODIC))
        second = engine.change_stamp()
        assert second != first
        with store.transaction():
            assert engine.change_stamp() is None
        if where == "file":  # another handle's commit (another connection)
            with SQLiteStore(path) as other:
                other.memories.put_memory(Memory.create("two", Tier.EPISODIC))
            assert engine.change_stamp() != second


def test_a_closed_store_says_so_whatever_it_kept(any_store: str) -> None:
    memory = (
        AgentMemoryManager.in_memory(embedder=None)
        if any_store == ":memory:"
        else AgentMemoryManager.open(any_store, embedder=None, embed_in_background=False)
    )
    session = memory.start_session().session_id
    first = memory.remember("Where to?", session_id=session, speaker="Ann")
    memory.remember("Lisbon", session_id=session, speaker="Bo")
    turns = memory.store.indexes.conversation_turns
    assert turns([first.id])[first.id][0] == "Ann"  # read, and kept
    assert memory.sessions.get(session) is not None
    memory.shutdown()
    with pytest.raises(StoreClosedError):
        turns([first.id])
    with pytest.raises(StoreClosedError):
        memory.store.sessions.get_session(session)

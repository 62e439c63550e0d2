"""What the hot-path work (issue 14) must keep: a read under way holds off close(), a
failed read leaves as a library error and releases what it held, a commit that wrote
some tiers indexes exactly those tiers' memories, rows read back equal what was
written."""

from __future__ import annotations

import struct
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from persistence import (
    Memory,
    RepetitionSchedule,
    StoreClosedError,
    Tier,
    TieredMemoryError,
    validation,
)
from persistence.records import _MEMORY_SLOTS, MEMORY_FIELDS, SessionState, memory_from_values
from persistence.sqlite import SQLiteStore
from persistence.sqlite.connection import MEMORY_PATH, ConnectionOptions, connection_wal
from persistence.sqlite.database import Database
from persistence.sqlite.sql import memory_sql


def _open(path: str) -> Database:
    db = Database(path, ConnectionOptions())
    db.open(connection_wal)
    return db


def test_close_waits_for_a_read_under_way_on_another_thread(tmp_path: Path) -> None:
    db = _open(str(tmp_path / "engine.db"))
    reading, release = threading.Event(), threading.Event()
    seen: list[int] = []

    def read() -> None:
        with db.reading() as conn:
            reading.set()
            release.wait()
            seen.append(conn.execute("SELECT 1").fetchone()[0])  # still open: close waits

    reader = threading.Thread(target=read)
    reader.start()
    assert reading.wait(10)
    closer = threading.Thread(target=db.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # held off by the read
    release.set()
    reader.join()
    closer.join()
    assert seen == [1] and not db.is_open and db.readers == []
    with pytest.raises(StoreClosedError):
        db.reading()


def test_close_waits_for_a_one_row_read_under_way_on_another_thread(tmp_path: Path) -> None:
    """``read_row`` (every uncached get) counts its read without a lock: close still waits."""
    db = _open(str(tmp_path / "engine.db"))
    reading, release = threading.Event(), threading.Event()
    seen: list[object] = []

    def held() -> int:
        reading.set()
        release.wait()
        return 7

    def read() -> None:
        db._thread_reader().create_scalar_function("held", held)
        seen.append(db.read_row("SELECT held()", ()))

    reader = threading.Thread(target=read)
    reader.start()
    assert reading.wait(10)
    closer = threading.Thread(target=db.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # held off by the read
    release.set()
    reader.join()
    closer.join(10)
    assert not closer.is_alive() and seen == [(7,)] and not db.is_open and db.readers == []
    with pytest.raises(StoreClosedError):
        db.read_row("SELECT 1", ())


@pytest.mark.parametrize("where", ["file", "memory"])
def test_a_failed_read_leaves_as_a_library_error_and_lets_close_finish(
    tmp_path: Path, where: str
) -> None:
    db = _open(str(tmp_path / "engine.db") if where == "file" else MEMORY_PATH)
    with pytest.raises(TieredMemoryError), db.reading() as conn:
        conn.execute("SELECT * FROM no_such_table")
    with db.reading() as conn:  # nothing was left held: reading again works
        assert conn.execute("SELECT 2").fetchone()[0] == 2
    # Inside a transaction the read uses the writer under its lock; the transaction (the
    # outermost block) translates the error.
    with pytest.raises(TieredMemoryError), db.transaction(), db.reading() as conn:
        conn.execute("SELECT * FROM no_such_table")
    taken: list[bool] = []

    def take() -> None:  # another thread: the lock is reentrant for this one
        if db.lock.acquire(timeout=10):
            taken.append(True)
            db.lock.release()

    other = threading.Thread(target=take)
    other.start()
    other.join()
    assert taken == [True]  # the failed read released the write lock
    db.close()  # returns: no read is counted as under way
    assert not db.is_open


def test_one_commit_indexes_the_words_of_each_tier_it_wrote(store: SQLiteStore) -> None:
    store.put_session(SessionState("s1", started_at=1, last_active_at=1))
    with store.transaction():  # two of the three tiers, one of them in a session
        store.memories.put_memory(Memory.create("a heron by the weir", Tier.SEMANTIC, id="sem"))
        store.put_scratchpad(
            "note", Memory.create("heron sightings", Tier.SCRATCHPAD, id="pad", key="note")
        )
        store.memories.put_memory(
            Memory.create("the weir floods", Tier.SEMANTIC, id="s2", session_id="s1")
        )
    with store.transaction():  # then the third alone
        store.memories.put_memory(Memory.create("a heron nests", Tier.EPISODIC, id="epi"))
    found = {memory_id for memory_id, _ in store.indexes.keyword_search(["heron"], 10)}
    assert found == {"sem", "pad", "epi"}
    assert {memory_id for memory_id, _ in store.indexes.keyword_search(["floods"], 10)} == {"s2"}


def test_memories_read_back_equal_what_was_written(store: SQLiteStore) -> None:
    plain = Memory.create("plain", Tier.EPISODIC, id="plain")
    full = Memory.create(
        "full",
        Tier.SEMANTIC,
        id="full",
        tags=("a", "b", "a"),
        metadata={"k": [1, 2], "n": None},
        linked_memories=("plain",),
        speaker="Ann",
        importance=0.25,
    )
    for memory in (plain, full):
        stored = store.memories.put_memory(memory)
        read = store.memories.get_memory(memory.id)
        assert read == stored
        assert read is not None and read.tier is memory.tier
        assert dict(read.metadata) == dict(memory.metadata)
        with pytest.raises(TypeError):
            read.metadata["x"] = 1  # type: ignore[index]
    (inserted,) = store.memories.insert_memories(
        [Memory.create("x", tags=("t", "t", "u"), id="ins")]
    )
    assert inserted.tags == ("t", "u") and store.memories.get_memory("ins") == inserted


def test_every_memory_field_is_filled_from_its_own_column() -> None:
    """Rows are decoded and memories copied by filling slots without a length check:
    the columns a row holds and the fields of Memory must agree, name for name."""
    assert len(MEMORY_FIELDS) == len(_MEMORY_SLOTS) == len(fields(Memory))
    read = (*memory_sql._COLUMNS, "key", "tags")  # a _select row: columns, key, tags
    assert sorted(read) == sorted(set(MEMORY_FIELDS) - {"tier"}) and len(read) == len(set(read))
    json_columns = {"metadata": '{"field": "metadata"}', "linked_memories": '["linked"]',
                    "tags": '["tags"]', "embedding": struct.pack("<f", 0.5)}  # fmt: skip
    # each column its own value, of the column's type (the decoder checks the types)
    numbers = {"token_count": 11, "access_count": 12, "last_accessed_at": 13, "created_at": 14,
               "updated_at": 15, "importance": 0.25, "retention": 0.75,
               "valid_to": 16}  # fmt: skip
    values = {name: numbers.get(name, f"value of {name}") for name in read}
    row = tuple(json_columns.get(name, values[name]) for name in read)
    memory = memory_sql.any_tier_memory((*row, "semantic"))
    assert memory is not None
    expected = dict(values)
    expected |= {"tier": Tier.SEMANTIC, "metadata": {"field": "metadata"},
                 "linked_memories": ("linked",), "tags": ("tags",)}  # fmt: skip
    for name in MEMORY_FIELDS:  # reading a field left unfilled raises AttributeError
        if name == "embedding":
            assert memory.embedding is not None and list(memory.embedding) == [0.5]
        else:
            assert getattr(memory, name) == expected[name], name
    copy = memory_from_values([getattr(memory, name) for name in MEMORY_FIELDS])
    assert all(getattr(copy, name) is getattr(memory, name) for name in MEMORY_FIELDS)


_ODD_VALUES = (None, "", "x", "é", "\ud800", 0, 1, -1, 2**62, 2**62 + 1, 2**63, True, 0.0, 0.5,
               1.0, 1.5, -0.0, float("nan"), float("inf"), (), ("a",), ("",), ["a"], "ab",
               ("\ud800",), {}, {"k": 1}, MappingProxyType({}), OrderedDict(), Tier.EPISODIC,
               "episodic")  # fmt: skip


def _agrees(plain: bool, check: Callable[[Any], None], odd: object) -> bool:
    """A value the fast path accepts is one the field-by-field checks accept too."""
    if not plain:
        return True
    try:
        check(odd)
    except TieredMemoryError:
        return False
    return True


def test_the_fast_validation_path_accepts_nothing_the_full_checks_refuse() -> None:
    def full(memory: Any) -> None:
        validation._check_memory(memory, None)

    base = Memory.create("content", tags=["t"], metadata={}, token_count=3, now=5)
    assert validation._plain_memory(base)  # what remember() writes takes the fast path
    for name in MEMORY_FIELDS:
        for value in _ODD_VALUES:
            odd = replace(base, **{name: value})
            assert _agrees(validation._plain_memory(odd), full, odd), (name, value)
    schedule = RepetitionSchedule("id", next_review_at=5, interval_ms=10)
    assert validation._plain_schedule(schedule)
    for name in (f.name for f in fields(RepetitionSchedule)):
        for value in _ODD_VALUES:
            odd = replace(schedule, **{name: value})
            plain = validation._plain_schedule(odd)
            assert _agrees(plain, validation._check_schedule, odd), (name, value)


def test_memory_create_fills_the_dataclass_defaults() -> None:
    """Memory.create fills slots itself for the fields a caller chooses: what it makes
    equals the dataclass's own construction, defaults included."""
    made = Memory.create("x", Tier.SEMANTIC, id="i", now=7)
    assert made == Memory(id="i", content="x", tier=Tier.SEMANTIC, created_at=7, updated_at=7)
    assert made.metadata == {} and made.metadata is not Memory.create("y").metadata
    assert made.embedding is None
    chosen = {"key": "k", "session_id": "s", "agent_id": "a", "category": "c", "tags": ("t",),
              "importance": 0.25, "retention": 0.5, "token_count": 3, "source": "src",
              "metadata": {"m": 1}, "linked_memories": ("l",), "access_count": 2,
              "last_accessed_at": 5, "speaker": "Ann", "superseded_by": "n", "valid_to": 9,
              "superseded_reason": "supersedes"}  # fmt: skip
    made = Memory.create("x", Tier.SEMANTIC, id="i", now=7, **chosen)
    assert made == Memory(id="i", content="x", tier=Tier.SEMANTIC, created_at=7, updated_at=7,
                          **chosen)  # fmt: skip
    assert {f.name for f in fields(Memory)} - set(chosen) == {
        "id",
        "content",
        "tier",
        "created_at",
        "updated_at",
        "embedding",
    }  # every field a caller may choose is chosen above (embedding: compared by identity)
    with pytest.raises(TypeError):
        Memory.create("x", bogus=1)

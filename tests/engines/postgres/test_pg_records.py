"""The record families on PostgreSQL where they differ in how, not what: batches,
deduplication notes, what forgetting deletes, the dimension claim; the contract parts run
on both backends (tests/support/backends.py)."""

from __future__ import annotations

import pytest

from persistence import DuplicateMemoryError, Memory, RepetitionSchedule, Tier
from persistence.dedup_key import content_key
from persistence.errors import EmbeddingDimensionError
from persistence.postgres import PostgresStore
from persistence.postgres.vector_dim import fix_dimension
from persistence.sqlite.sql import dedup_sql
from persistence.storage import MemoryStorage
from tests.support.backends import store_on_each_backend  # noqa: F401


def test_the_dedup_key_is_the_sqlite_one() -> None:
    for args in [("Hello  World", None, None), ("ÅNGSTRÖM ﬁ", "a", "s"), ("", "", None)]:
        assert content_key(*args) == dedup_sql.content_key(*args)


@pytest.mark.slow  # 1.6 s measured on a busy machine
def test_insert_memories_writes_a_batch_with_schedules_and_notes(store: MemoryStorage) -> None:
    batch = [
        Memory.create("first", tags=("x", "x", "y"), embedding=[1.0, 0.0], session_id="s"),
        Memory.create("Second", Tier.SEMANTIC, agent_id="a"),
    ]
    schedule = RepetitionSchedule(batch[0].id, 5, 1000)
    stored = store.memories.insert_memories(batch, [schedule])
    assert [m.tags for m in stored] == [("x", "y"), ()]
    assert store.memories.get_memories([m.id for m in batch]) == {m.id: m for m in stored}
    assert store.get_repetition_schedule(batch[0].id) == schedule
    assert store.memories.find_same_content(" FIRST ", Tier.EPISODIC, None, "s") == [batch[0].id]
    assert store.memories.find_same_content("second", Tier.SEMANTIC, "a", None) == [batch[1].id]
    assert store.memories.find_same_content("second", Tier.EPISODIC, "a", None) == []
    with pytest.raises(DuplicateMemoryError):
        store.memories.insert_memories([Memory.create("new"), batch[1]])
    with pytest.raises(EmbeddingDimensionError):
        store.memories.insert_memories([Memory.create("new", embedding=[1.0, 2.0, 3.0])])
    assert store.memories.count(Tier.EPISODIC) == 1


@pytest.mark.slow  # 1.3 s measured on a busy machine
def test_record_content_keys_replaces_an_older_note(store: MemoryStorage) -> None:
    memory = store.put_episodic(Memory.create("old words"))
    store.memories.record_content_keys([memory])
    assert store.memories.find_same_content("old words", Tier.EPISODIC, None, None) == [memory.id]
    store.memories.record_content_keys(
        [store.put_episodic(Memory.create("new words", id=memory.id))]
    )
    assert store.memories.find_same_content("old words", Tier.EPISODIC, None, None) == []
    assert store.memories.find_same_content("new words", Tier.EPISODIC, None, None) == [memory.id]


@pytest.mark.slow  # 1.4 s measured on a busy machine
def test_a_scratchpad_key_holds_one_entry(store: MemoryStorage) -> None:
    first = store.put_scratchpad("goal", Memory.create("one", Tier.SCRATCHPAD))
    second = store.put_scratchpad("goal", Memory.create("two", Tier.SCRATCHPAD))
    assert store.get_all_scratchpad() == [second]
    assert store.memories.get_memory(first.id) is None


@pytest.mark.slow  # 1.5 s measured on a busy machine
def test_decay_logs_the_forgotten_in_the_order_given(store: MemoryStorage) -> None:
    ids = [store.put_episodic(Memory.create(f"m{i}")).id for i in range(4)]
    forgotten = [(ids[3], 0.01), (ids[0], 0.02), ("missing", 0.0)]
    store.schedules.apply_decay(Tier.EPISODIC, [(ids[1], 0.25)], forgotten, "decay")
    assert [(r.memory_id, r.retention) for r in store.schedules.get_forgetting_log()] == [
        (ids[3], 0.01),
        (ids[0], 0.02),
    ]
    assert store.get_episodic(ids[1]).retention == 0.25
    assert store.memories.count(Tier.EPISODIC) == 2


@pytest.mark.slow  # 1.3 s measured on a busy machine
def test_forgetting_deletes_the_vector_schedule_and_content_key(pg_url: str) -> None:
    with PostgresStore(pg_url) as store:
        memory = store.put_episodic(Memory.create("secret", embedding=[1.0, 2.0]))
        store.memories.record_content_keys([memory])
        store.put_repetition_schedule(RepetitionSchedule(memory.id, 1, 1))
        store.promote_memory(memory.id, Tier.EPISODIC, Tier.SEMANTIC)
        assert store.memories.forget_memory(memory.id, "asked") is Tier.SEMANTIC
        with store.engine.reading() as conn:
            tables = ("tm_memories", "tm_vectors", "tm_schedules", "tm_content_keys")
            counts = " + ".join(f"(SELECT count(*) FROM {table})" for table in tables)
            left = conn.execute(f"SELECT {counts}").fetchone()  # noqa: S608
        assert left == (0,)
        assert len(store.memories.get_promotion_history(memory.id)) == 1  # the audit stays


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_fix_dimension_claims_once(pg_url: str) -> None:
    with PostgresStore(pg_url) as store, store.transaction() as conn:
        assert fix_dimension(conn, 3, None) is True
        assert fix_dimension(conn, 3, None) is False
        with pytest.raises(EmbeddingDimensionError):
            fix_dimension(conn, 4, None)


@pytest.mark.slow  # 1.5 s measured on a busy machine
def test_promotion_keeps_the_insertion_order(pg_url: str) -> None:
    with PostgresStore(pg_url) as store:
        a = store.put_episodic(Memory.create("a"))
        store.put_episodic(Memory.create("b"))
        store.promote_memory(a.id, Tier.EPISODIC, Tier.SEMANTIC)
        with store.engine.reading() as conn:
            rows = conn.execute("SELECT content FROM tm_memories ORDER BY seq").fetchall()
        assert [r[0] for r in rows] == ["a", "b"]

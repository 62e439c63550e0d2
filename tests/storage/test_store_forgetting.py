"""The stores (SQLite and PostgreSQL): the forgetting curve's batches, decay writes, audit."""

from __future__ import annotations

import pytest

from persistence import (
    InvalidInputError,
    Memory,
    QueryOptions,
    RepetitionSchedule,
    SessionState,
    Tier,
)
from persistence.sqlite import SQLiteStore
from tests.support.backends import refuse_inserts, store_on_each_backend  # noqa: F401


def test_put_memory_and_query_dispatch_on_the_tier(store: SQLiteStore) -> None:
    a = store.memories.put_memory(Memory.create("a", Tier.SEMANTIC))
    b = store.memories.put_memory(Memory.create("b", Tier.SCRATCHPAD, key="k"))
    assert store.get_semantic(a.id) == a and store.get_scratchpad("k") == b
    assert store.memories.query(Tier.SCRATCHPAD) == [b]
    with pytest.raises(InvalidInputError, match="key"):
        store.memories.put_memory(Memory.create("c", Tier.SCRATCHPAD))


def test_forget_memory_deletes_and_audits(store: SQLiteStore, clock: object) -> None:
    memory = store.put_episodic(Memory.create("secret", tags=("t",)))
    assert store.memories.forget_memory(memory.id, "user asked", retention=0.4) is Tier.EPISODIC
    assert store.memories.get_memory(memory.id) is None
    log = store.schedules.get_forgetting_log(memory.id)
    assert [(r.tier, r.retention, r.reason) for r in log] == [(Tier.EPISODIC, 0.4, "user asked")]
    assert store.memories.forget_memory(memory.id, "again") is None
    assert len(store.schedules.get_forgetting_log()) == 1


def test_retention_batches_page_by_id(store: SQLiteStore) -> None:
    ids = sorted(store.put_episodic(Memory.create(f"m{i}", importance=0.3)).id for i in range(7))
    store.put_repetition_schedule(
        RepetitionSchedule(ids[2], 1, 1, review_count=2, stability_days=9.0)
    )
    seen: list[str] = []
    after = ""
    while batch := store.schedules.retention_batch(Tier.EPISODIC, after, limit=3):
        assert len(batch) <= 3
        seen += [row.memory_id for row in batch]
        after = batch[-1].memory_id
    assert seen == ids
    reviewed = store.schedules.retention_batch(Tier.EPISODIC, "", limit=10, min_reviews=2)
    assert [(r.memory_id, r.stability_days, r.review_count) for r in reviewed] == [(ids[2], 9.0, 2)]
    assert store.schedules.retention_batch(Tier.EPISODIC, "", limit=10)[0].importance == 0.3


@pytest.mark.slow  # 1.3 s measured on a busy machine
def test_apply_decay_is_one_transaction(store: SQLiteStore) -> None:
    a, b, c = (store.put_episodic(Memory.create(n)).id for n in "abc")
    refuse_inserts(store, "forgetting_log", "audit refused", when_id=c)
    with pytest.raises(Exception, match="audit refused"):
        store.schedules.apply_decay(Tier.EPISODIC, [(a, 0.5)], [(b, 0.05), (c, 0.01)], "decay")
    assert {m.id: m.retention for m in store.query_episodic(QueryOptions(limit=None))} == {
        a: 1.0,
        b: 1.0,
        c: 1.0,
    }
    assert store.schedules.get_forgetting_log() == []
    store.schedules.apply_decay(Tier.EPISODIC, [(a, 0.5)], [(b, 0.05)], "decay")
    assert store.get_episodic(a) is not None and store.get_episodic(a).retention == 0.5  # type: ignore[union-attr]
    assert store.get_episodic(b) is None
    assert [r.memory_id for r in store.schedules.get_forgetting_log()] == [b]


def test_touch_session_only_moves_forward(store: SQLiteStore) -> None:
    store.put_session(SessionState("s", started_at=10, last_active_at=10))
    store.sessions.touch_session("s", 50)
    store.sessions.touch_session("s", 20)
    session = store.get_session("s")
    assert session is not None and session.last_active_at == 50

"""SQLiteStore and its parts: the family stores share the store's engine and settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from persistence import InvalidInputError, Memory, RepetitionSchedule
from persistence.sqlite import SQLiteStore


def test_a_setting_changed_on_the_store_reaches_every_part(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "a.db", clock=lambda: 1_000) as store:
        first = store.put_episodic(Memory.create("hello"))
        store.clock = lambda: 9_999_000  # as the store's own methods read it at each call
        shared = (store.memories, store.sessions, store.schedules, store.indexes)
        assert all(p.config is store.config for p in shared)  # one StoreConfig, read live
        assert {p.config.clock() for p in shared} == {9_999_000}
        store.memories.forget_memory(first.id, "bye")
        assert store.schedules.get_forgetting_log(first.id)[0].forgotten_at == 9_999_000
        store.max_content_bytes = 3
        with pytest.raises(InvalidInputError):
            store.put_episodic(Memory.create("too long now"))
        assert store.memories.count(first.tier) == 0


def test_the_parts_write_through_the_stores_engine(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "a.db") as store:
        parts = (store.memories, store.sessions, store.schedules, store.indexes)
        assert all(p.engine is store.engine for p in parts)
        with store.transaction():
            m = store.memories.put_memory(Memory.create("one transaction"))
            store.schedules.put_repetition_schedule(
                RepetitionSchedule(
                    m.id,
                    next_review_at=5,
                    interval_ms=1,
                    review_count=0,
                    ease_factor=2.5,
                    last_reviewed_at=None,
                )  # fmt: skip
            )
        assert store.get_repetition_schedule(m.id) is not None
        assert store.memories.get_memory(m.id) == m

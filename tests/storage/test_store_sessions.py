"""The stores (SQLite and PostgreSQL): sessions, transcripts, schedules and statistics."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from migrations.sqlite import LATEST_VERSION
from persistence import (
    InvalidInputError,
    InvalidTypeError,
    Memory,
    MemoryNotFoundError,
    RepetitionSchedule,
    SessionNotFoundError,
    SessionState,
    Tier,
)
from persistence.postgres import PostgresStore
from persistence.postgres.sql import stats_sql
from persistence.sqlite import SQLiteStore
from persistence.statements import row
from persistence.storage import MemoryStorage
from tests.conftest import FakeClock
from tests.support.backends import store_on_each_backend  # noqa: F401


def _session(session_id: str, at: int, **fields: object) -> SessionState:
    return SessionState(session_id, started_at=at, last_active_at=at, **fields)  # type: ignore[arg-type]


@pytest.mark.slow  # 1.0 s measured on a busy machine
def test_session_round_trip_and_active_list(store: SQLiteStore) -> None:
    one = _session("s1", 10, active_agents=("planner",), metadata={"user": "ann"})
    store.put_session(one)
    store.put_session(_session("s2", 20))
    store.put_session(_session("s3", 30, is_active=False, ended_at=31))
    assert store.get_session("s1") == one
    assert [s.session_id for s in store.get_active_sessions()] == ["s2", "s1"]
    store.put_session(replace(one, is_active=False, ended_at=40, pending_compaction=True))
    again = store.get_session("s1")
    assert again is not None and (again.is_active, again.ended_at, again.pending_compaction) == (
        False,
        40,
        True,
    )
    assert [s.session_id for s in store.get_active_sessions()] == ["s2"]
    assert store.get_session("missing") is None


def test_transcript_order_turns_and_activity(store: SQLiteStore, clock: FakeClock) -> None:
    store.put_session(_session("s1", clock()))
    clock.advance(100)
    store.append_transcript("s1", 1, "user", "hello")
    store.append_transcript("s1", 1, "assistant", "hi there")
    clock.advance(100)
    last = store.append_transcript("s1", 2, "user", "bye")
    lines = store.get_transcripts("s1")
    assert [(e.turn_number, e.role, e.content) for e in lines] == [
        (1, "user", "hello"),
        (1, "assistant", "hi there"),
        (2, "user", "bye"),
    ]
    assert lines[-1] == last
    session = store.get_session("s1")
    assert session is not None
    assert (session.turn_number, session.last_active_at) == (2, clock())


def test_transcript_needs_a_session(store: SQLiteStore) -> None:
    with pytest.raises(SessionNotFoundError, match="start it first"):
        store.append_transcript("ghost", 1, "user", "boo")
    with pytest.raises(InvalidTypeError):
        store.append_transcript("ghost", 1, "user", 42)  # type: ignore[arg-type]


def test_deleting_a_session_deletes_its_transcript_but_not_its_memories(
    store: SQLiteStore,
) -> None:
    store.put_session(_session("s1", 1))
    store.append_transcript("s1", 1, "user", "remember this")
    memory = store.put_episodic(Memory.create("fact", session_id="s1"))
    assert store.delete_session("s1") is True
    assert store.get_transcripts("s1") == []
    assert store.get_episodic(memory.id) == memory
    assert store.delete_session("s1") is False


@pytest.mark.slow
@pytest.mark.parametrize(
    "bad",
    [
        {"session_id": ""},
        {"turn_number": -1},
        {"is_active": 1},
        {"active_agents": "planner"},
        {"metadata": {"x": object()}},
    ],
)
def test_bad_sessions_are_refused(store: SQLiteStore, bad: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError):
        store.put_session(replace(_session("s1", 1), **bad))  # type: ignore[arg-type]
    assert store.get_session("s1") is None


def test_schedules_round_trip_and_due_order(store: SQLiteStore) -> None:
    ids = [store.put_episodic(Memory.create(f"m{i}")).id for i in range(4)]
    for i, memory_id in enumerate(ids):
        store.put_repetition_schedule(
            RepetitionSchedule(memory_id, next_review_at=100 * (4 - i), interval_ms=86_400_000)
        )
    schedule = store.get_repetition_schedule(ids[0])
    assert schedule == RepetitionSchedule(ids[0], 400, 86_400_000, 0, 2.5, 1.0, None)
    due = store.get_schedules_due_for_review(300)
    assert [s.memory_id for s in due] == [ids[3], ids[2], ids[1]]
    assert [s.memory_id for s in store.get_schedules_due_for_review(300, limit=1)] == [ids[3]]
    updated = replace(schedule, review_count=1, ease_factor=2.36, last_reviewed_at=5)
    store.put_repetition_schedule(updated)
    assert store.get_repetition_schedule(ids[0]) == updated


def test_schedule_needs_a_memory_and_valid_numbers(store: SQLiteStore) -> None:
    with pytest.raises(MemoryNotFoundError):
        store.put_repetition_schedule(RepetitionSchedule("ghost", 1, 1))
    memory_id = store.put_episodic(Memory.create("m")).id
    with pytest.raises(InvalidInputError):
        store.put_repetition_schedule(RepetitionSchedule(memory_id, 1, 1, ease_factor=float("nan")))
    with pytest.raises(InvalidInputError):
        store.put_repetition_schedule(RepetitionSchedule(memory_id, 1, -5))
    assert store.get_repetition_schedule(memory_id) is None


def _populate(store: MemoryStorage) -> None:
    store.put_scratchpad("k", Memory.create("s", Tier.SCRATCHPAD))
    a = store.put_episodic(Memory.create("a"))
    store.put_episodic(Memory.create("b"))
    store.put_semantic(Memory.create("c", Tier.SEMANTIC))
    store.put_session(_session("s1", 1))
    store.put_session(_session("s2", 1, is_active=False))
    store.append_transcript("s1", 1, "user", "x")
    store.put_repetition_schedule(RepetitionSchedule(a.id, 1, 1))
    store.promote_memory(a.id, Tier.EPISODIC, Tier.SEMANTIC)


EXPECTED_COUNTS = {
    "scratchpad_count": 1, "episodic_count": 1, "semantic_count": 2, "session_count": 2,
    "active_session_count": 1, "transcript_count": 1, "schedule_count": 1,
    "promotion_count": 1, "forgotten_count": 0,
}  # fmt: skip


@pytest.mark.slow  # 1.2 s measured on a busy machine
def test_postgres_counts_everything_in_one_snapshot(pg_url: str) -> None:
    with PostgresStore(pg_url) as store:
        _populate(store)
        with store.engine.reading() as conn:
            counts = stats_sql.to_counts(row(conn, stats_sql.COUNT_ALL))
        assert {name: counts[name] for name in EXPECTED_COUNTS} == EXPECTED_COUNTS
        assert counts["unembedded_count"] == 4 and counts["embedding_cache_count"] == 0
        stats = store.get_statistics()
        assert {name: getattr(stats, name) for name in EXPECTED_COUNTS} == EXPECTED_COUNTS
        assert stats.backend == "postgresql" and stats.schema_version == store.schema_version
        assert 0 < stats.size_bytes <= stats.backend_details["database_size_bytes"]
        assert stats.path == store.location


def test_statistics_count_everything(file_or_memory_store: SQLiteStore) -> None:
    store = file_or_memory_store
    _populate(store)
    stats = store.get_statistics()
    assert (stats.scratchpad_count, stats.episodic_count, stats.semantic_count) == (1, 1, 2)
    assert (stats.session_count, stats.active_session_count, stats.transcript_count) == (2, 1, 1)
    assert (stats.schedule_count, stats.promotion_count, stats.forgotten_count) == (1, 1, 0)
    assert stats.schema_version == LATEST_VERSION
    details = stats.backend_details
    assert stats.backend == "sqlite" and details["page_count"] > 0 and details["page_size"] > 0
    assert stats.size_bytes == details["file_size_bytes"] + details["wal_size_bytes"]
    if not store.is_memory:
        assert details["file_size_bytes"] > 0 and details["wal_size_bytes"] > 0


@pytest.fixture(params=["file", "memory"])
def file_or_memory_store(
    request: pytest.FixtureRequest, db_path: object, clock: FakeClock
) -> Iterator[SQLiteStore]:
    """SQLite only: its statistics have file sizes."""
    path = str(db_path) if request.param == "file" else ":memory:"
    with SQLiteStore(path, clock=clock) as opened:
        yield opened

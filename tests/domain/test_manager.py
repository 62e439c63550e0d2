"""AgentMemoryManager: lifecycle, memories, queries, links, sessions and promotion.

Every test that takes the ``memory`` fixture runs on a file, in memory and on PostgreSQL.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from persistence import (
    InvalidInputError,
    InvalidPromotionError,
    InvalidTypeError,
    MemoryNotFoundError,
    SessionNotFoundError,
    StoreClosedError,
    Tier,
)
from tests.conftest import FakeClock
from tests.support.backends import snapshot
from tiered_memory import AgentMemoryManager, MemoryConfig


class Boom(Exception):
    pass


def _rows(memory: AgentMemoryManager) -> list[object]:
    return list(snapshot(memory.store))


# --- lifecycle -------------------------------------------------------------------------


def test_open_creates_the_file_and_in_memory_does_not(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    with AgentMemoryManager.open(path) as memory:
        assert memory.path == path and path.exists()
    with AgentMemoryManager.in_memory() as memory:
        assert memory.path is None
        memory.remember("x")
    assert [p.name for p in tmp_path.iterdir()] == ["agent.db"]


@pytest.mark.slow  # 1.9 s measured on a busy machine
def test_initialize_and_shutdown_are_idempotent(any_location: str) -> None:
    memory = AgentMemoryManager(any_location)
    memory.initialize()
    memory.initialize()
    memory.remember("x")
    memory.shutdown()
    memory.shutdown()
    for call in (
        lambda: memory.get("x"),
        lambda: memory.remember("y"),
        lambda: memory.statistics(),
        lambda: memory.query(),
        lambda: memory.decay(),
    ):
        with pytest.raises(StoreClosedError, match="closed"):
            call()


def test_in_memory_path_via_open_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="in_memory"):
        AgentMemoryManager.open(":memory:")


@pytest.mark.parametrize(
    "bad",
    [
        {"cache_size": 0},
        {"scratchpad_token_budget": -5},
        {"forgetting_threshold": 1.5},
        {"target_retention": 1.0},
        {"initial_stability_days": 0},
        {"decay_semantic": "yes"},
        {"synchronous": "OFF"},
        {"clock": 42},
        {"cache_size": 1.5},
        {"consolidation_min_retention": math.nan},
    ],
)
def test_bad_config_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError):
        MemoryConfig(**bad)  # type: ignore[arg-type]


def test_unknown_config_option_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="cache_sise"):
        AgentMemoryManager.in_memory(cache_sise=10)


def test_config_object_and_overrides_combine(clock: FakeClock) -> None:
    with AgentMemoryManager.in_memory(MemoryConfig(cache_size=7), clock=clock) as memory:
        assert memory.config.cache_size == 7 and memory.clock() == clock()


# --- memories ---------------------------------------------------------------------------


@pytest.mark.slow  # 1.9 s measured on a busy machine
def test_remember_stores_everything_and_schedules_a_review(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    session = memory.start_session()
    clock.advance(500)
    m = memory.remember(
        "The user prefers dark mode",
        session_id=session.session_id,
        agent_id="ui-agent",
        importance=0.8,
        tags=["ui"],
        metadata={"confidence": 0.9},
        source="chat",
        category="preferences",
    )
    assert (m.tier, m.tags, m.importance, m.category, m.token_count) == (
        Tier.EPISODIC,
        ("ui",),
        0.8,
        "preferences",
        7,
    )
    assert memory.get(m.id) == m
    schedule = memory.schedule(m.id)
    assert schedule is not None and schedule.next_review_at == clock() + 86_400_000
    assert memory.get_session(session.session_id).last_active_at == clock()  # type: ignore[union-attr]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"content": 42}, InvalidTypeError),
        ({"content": "x", "tier": "attic"}, InvalidInputError),
        ({"content": "x", "importance": 2.0}, InvalidInputError),
        ({"content": "x", "tags": "ui"}, InvalidTypeError),
        ({"content": "x", "embedding": [1.0, math.nan]}, InvalidInputError),
        ({"content": "x", "metadata": {"bad": object()}}, InvalidTypeError),
        ({"content": "x", "session_id": "no-such-session"}, SessionNotFoundError),
    ],
)
def test_bad_remember_raises_and_writes_nothing(
    memory: AgentMemoryManager, kwargs: dict[str, object], error: type[Exception]
) -> None:
    memory.remember("existing")
    before = _rows(memory)
    with pytest.raises(error):
        memory.remember(**kwargs)  # type: ignore[arg-type]
    assert _rows(memory) == before


@pytest.mark.slow  # 1.2 s measured on a busy machine
def test_remember_in_the_scratchpad(memory: AgentMemoryManager) -> None:
    m = memory.remember("Ship v1", tier=Tier.SCRATCHPAD, key="goal")
    assert memory.scratchpad.get("goal") == m
    assert memory.schedule(m.id) is not None


@pytest.mark.slow  # 2.0 s measured on a busy machine
def test_update_changes_fields_and_bumps_updated_at(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    m = memory.remember("old text", tags=["a"])
    clock.advance(1000)
    updated = memory.update(m.id, content="a much longer new text", tags=["b"], importance=0.9,
                            metadata={"v": 2})  # fmt: skip
    assert (updated.content, updated.tags, updated.importance, dict(updated.metadata)) == (
        "a much longer new text",
        ("b",),
        0.9,
        {"v": 2},
    )
    assert updated.updated_at == clock() and updated.created_at == m.created_at
    assert updated.token_count == 6
    assert memory.get(m.id) == updated
    with pytest.raises(MemoryNotFoundError):
        memory.update("ghost", content="x")


@pytest.mark.slow  # 1.9 s measured on a busy machine
def test_forget_is_audited(memory: AgentMemoryManager) -> None:
    m = memory.remember("temporary")
    assert memory.forget(m.id, reason="user asked") is True
    assert memory.get(m.id) is None and memory.schedule(m.id) is None
    assert [r.reason for r in memory.forgetting_log(m.id)] == ["user asked"]
    assert memory.forget(m.id) is False


@pytest.mark.slow  # 1.2 s measured on a busy machine
def test_grouped_calls_land_together_or_not_at_all(memory: AgentMemoryManager) -> None:
    with pytest.raises(Boom), memory.transaction():
        memory.remember("a")
        memory.remember("b")
        raise Boom
    assert memory.query() == []
    with memory.transaction():
        memory.remember("a")
        memory.remember("b")
    assert sorted(m.content for m in memory.query()) == ["a", "b"]


@pytest.mark.slow  # 1.3 s measured on a busy machine
def test_query_filters_one_tier_or_all(memory: AgentMemoryManager, clock: FakeClock) -> None:
    made = []
    for i, tier in enumerate([Tier.EPISODIC, Tier.SEMANTIC, Tier.EPISODIC, Tier.SCRATCHPAD]):
        clock.advance(10)
        made.append(memory.remember(f"m{i}", tier=tier, tags=["t"] if i % 2 == 0 else [],
                                    agent_id="x" if i < 3 else "y"))  # fmt: skip
    assert [m.content for m in memory.query()] == ["m3", "m2", "m1", "m0"]
    assert [m.content for m in memory.query(limit=2, offset=1)] == ["m2", "m1"]
    assert [m.content for m in memory.query(tier=Tier.EPISODIC, tags=["t"])] == ["m2", "m0"]
    assert [m.content for m in memory.query(agent_id="y")] == ["m3"]
    assert [m.content for m in memory.query(descending=False, limit=1)] == ["m0"]
    with pytest.raises(InvalidInputError, match="unknown filter"):
        memory.query(colour="red")


@pytest.mark.slow  # 2.5 s measured on a busy machine
def test_links_go_both_ways(memory: AgentMemoryManager) -> None:
    a = memory.remember("a")
    b = memory.remember("b", tier=Tier.SEMANTIC)
    c = memory.remember("c", tier=Tier.SCRATCHPAD, key="c")
    memory.link(a.id, b.id)
    memory.link(a.id, c.id)
    memory.link(a.id, b.id)
    assert [m.content for m in memory.linked(a.id)] == ["b", "c"]
    assert [m.content for m in memory.linked(c.id)] == ["a"]
    assert memory.unlink(a.id, b.id) is True and memory.unlink(a.id, b.id) is False
    assert [m.content for m in memory.linked(b.id)] == []
    with pytest.raises(InvalidInputError):
        memory.link(a.id, a.id)
    with pytest.raises(MemoryNotFoundError):
        memory.link(a.id, "ghost")


# --- sessions ---------------------------------------------------------------------------


@pytest.mark.slow  # 3.0 s measured on a busy machine
def test_session_lifecycle_and_transcript(memory: AgentMemoryManager, clock: FakeClock) -> None:
    session = memory.start_session(metadata={"user": "ann"})
    other = memory.start_session("fixed-id")
    assert other.session_id == "fixed-id"
    with pytest.raises(InvalidInputError, match="already exists"):
        memory.start_session("fixed-id")
    for role, text in [("user", "hi"), ("assistant", "hello"), ("user", "bye")]:
        clock.advance(100)
        memory.append_transcript(session.session_id, role, text)
    lines = memory.get_transcript(session.session_id)
    assert [(e.turn_number, e.role, e.content) for e in lines] == [
        (1, "user", "hi"),
        (2, "assistant", "hello"),
        (3, "user", "bye"),
    ]
    assert memory.get_session(session.session_id).last_active_at == clock()  # type: ignore[union-attr]
    assert [s.session_id for s in memory.active_sessions()] == [session.session_id, "fixed-id"]
    clock.advance(100)
    ended = memory.end_session(session.session_id)
    assert not ended.is_active and ended.ended_at == clock()
    assert memory.end_session(session.session_id).ended_at == ended.ended_at
    with pytest.raises(InvalidInputError, match="ended"):
        memory.append_transcript(session.session_id, "user", "still there?")
    assert [s.session_id for s in memory.active_sessions()] == ["fixed-id"]
    with pytest.raises(SessionNotFoundError):
        memory.get_transcript("ghost")
    memory.sessions.mark_for_compaction(session.session_id)
    assert [s.session_id for s in memory.sessions.pending_compaction()] == [session.session_id]


# --- promotion ----------------------------------------------------------------------------


@pytest.mark.slow  # 2.6 s measured on a busy machine
def test_writes_into_an_ended_or_unknown_session_are_refused(memory: AgentMemoryManager) -> None:
    session = memory.start_session("closing")
    memory.remember("before the end", session_id="closing")
    memory.end_session(session.session_id)
    before = memory.statistics().storage.episodic_count
    with pytest.raises(InvalidInputError, match="ended"):
        memory.remember("after the end", session_id="closing")
    with pytest.raises(InvalidInputError, match="ended"):
        memory.remember_many([{"content": "late", "session_id": "closing"}])
    with pytest.raises(SessionNotFoundError, match="start_session"):
        memory.remember("nowhere", session_id="never-started")
    assert memory.statistics().storage.episodic_count == before


@pytest.mark.slow  # 2.8 s measured on a busy machine
def test_promote_along_the_tiers_with_history(memory: AgentMemoryManager) -> None:
    m = memory.remember("fact", tier=Tier.SCRATCHPAD, key="k")
    memory.promote(m.id, Tier.EPISODIC, reason="noted")
    memory.promote(m.id, "semantic", reason="confirmed")
    assert memory.get(m.id).tier is Tier.SEMANTIC  # type: ignore[union-attr]
    assert [(r.from_tier, r.to_tier, r.reason) for r in memory.promotion_history(m.id)] == [
        (Tier.SCRATCHPAD, Tier.EPISODIC, "noted"),
        (Tier.EPISODIC, Tier.SEMANTIC, "confirmed"),
    ]
    before = _rows(memory)
    with pytest.raises(InvalidPromotionError):
        memory.promote(m.id, Tier.EPISODIC)
    with pytest.raises(MemoryNotFoundError):
        memory.promote("ghost", Tier.SEMANTIC)
    assert _rows(memory) == before


@pytest.mark.slow  # 2.1 s measured on a busy machine
def test_statistics(memory: AgentMemoryManager) -> None:
    s = memory.start_session()
    memory.scratchpad.put("k", "12345678")
    memory.remember("a", session_id=s.session_id)
    memory.remember("b", tier=Tier.SEMANTIC)
    memory.append_transcript(s.session_id, "user", "x")
    stats = memory.statistics()
    assert stats.tier_counts == {Tier.SCRATCHPAD: 1, Tier.EPISODIC: 1, Tier.SEMANTIC: 1}
    assert (stats.storage.session_count, stats.storage.transcript_count) == (1, 1)
    assert (stats.scratchpad_tokens, stats.scratchpad_token_budget) == (2, 2048)
    assert stats.storage.schema_version >= 2


@pytest.mark.slow  # 2.1 s measured on a busy machine
def test_tier_views_are_lazy_and_filtered(memory: AgentMemoryManager, clock: FakeClock) -> None:
    episodic = []
    for i in range(3):
        clock.advance(1)
        episodic.append(memory.remember(f"e{i}", tags=["t"]))
    fact = memory.remember("fact", tier=Tier.SEMANTIC)
    assert len(memory.episodic) == 3 and len(memory.semantic) == 1
    assert fact.id in memory.semantic and fact.id not in memory.episodic
    assert memory.episodic.get(fact.id) is None and memory.semantic.get(fact.id) == fact
    assert sorted(m.id for m in memory.episodic) == sorted(m.id for m in episodic)
    assert [m.content for m in memory.episodic.query(tags=["t"], limit=2)] == ["e2", "e1"]

"""The manager's forgetting curve: reviews, due dates, decay and consolidation."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from persistence import InvalidInputError, Tier
from tests.conftest import FakeClock
from tiered_memory import AgentMemoryManager

DAY = 86_400_000


@pytest.mark.slow  # 1.9 s measured on a busy machine
def test_review_moves_the_ease_factor_both_ways_and_persists(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    easy = memory.remember("easy")
    hard = memory.remember("hard")
    clock.advance(DAY)
    assert memory.review(easy.id, 5).ease_factor == pytest.approx(2.6)
    assert memory.review(hard.id, 3).ease_factor == pytest.approx(2.36)
    clock.advance(DAY)
    assert memory.review(easy.id, 5).ease_factor == pytest.approx(2.7)
    assert memory.review(hard.id, 3).ease_factor == pytest.approx(2.22)
    stored = memory.schedule(easy.id)
    assert stored is not None
    assert (stored.review_count, stored.interval_ms, stored.next_review_at) == (
        2,
        6 * DAY,
        clock() + 6 * DAY,
    )
    reviewed = memory.get(easy.id)
    assert reviewed is not None
    assert (reviewed.retention, reviewed.access_count, reviewed.last_accessed_at) == (
        1.0,
        2,
        clock(),
    )


def test_bad_quality_changes_nothing(memory: AgentMemoryManager) -> None:
    m = memory.remember("x")
    before = memory.schedule(m.id)
    with pytest.raises(InvalidInputError):
        memory.review(m.id, 7)
    assert memory.schedule(m.id) == before


@pytest.mark.slow  # 1.6 s measured on a busy machine
def test_due_for_review(memory: AgentMemoryManager, clock: FakeClock) -> None:
    a = memory.remember("a")
    clock.advance(DAY // 2)
    b = memory.remember("b")
    assert memory.due_for_review() == []
    clock.advance(DAY // 2)
    assert [m.id for m in memory.due_for_review()] == [a.id]
    assert [m.id for m in memory.due_for_review(before=clock() + DAY)] == [a.id, b.id]


@pytest.mark.slow  # 1.9 s measured on a busy machine
def test_decay_weakens_and_forgets_with_audit(memory: AgentMemoryManager, clock: FakeClock) -> None:
    weak = [memory.remember(f"weak {i}", importance=0.0) for i in range(4)]  # S0 = 1 day
    strong = [memory.remember(f"strong {i}", importance=1.0) for i in range(3)]  # S0 = 5 days
    fact = memory.remember("fact", tier=Tier.SEMANTIC, importance=0.0)
    clock.advance(3 * DAY)
    report = memory.decay()
    # e^-3 = 0.0498 < 0.1: forgotten; e^-0.6 = 0.5488: weakened.
    assert (report.checked, report.weakened, report.forgotten) == (7, 3, 4)
    assert sorted(report.forgotten_ids) == sorted(m.id for m in weak)
    for m in weak:
        assert memory.get(m.id) is None
        [audit] = memory.forgetting_log(m.id)
        assert audit.retention == pytest.approx(math.exp(-3))
        assert "decay" in audit.reason
    for m in strong:
        assert memory.get(m.id).retention == pytest.approx(math.exp(-0.6))  # type: ignore[union-attr]
    assert memory.get(fact.id) is not None  # the semantic tier is not decayed by default


@pytest.mark.slow  # 2.4 s measured on a busy machine
def test_decay_of_semantic_when_configured(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    memory = make_memory(decay_semantic=True)
    fact = memory.remember("fact", tier=Tier.SEMANTIC, importance=0.0)
    clock.advance(3 * DAY)
    report = memory.decay()
    assert report.forgotten_ids == (fact.id,)
    assert report.tiers == (Tier.EPISODIC, Tier.SEMANTIC)


@pytest.mark.slow  # 2.1 s measured on a busy machine
def test_a_review_protects_from_decay(memory: AgentMemoryManager, clock: FakeClock) -> None:
    m = memory.remember("reviewed", importance=0.0)
    clock.advance(DAY)
    memory.review(m.id, 4)  # stability becomes 1 / -ln 0.9 = 9.49 days
    clock.advance(3 * DAY)
    assert memory.decay().forgotten == 0
    assert memory.get(m.id).retention == pytest.approx(math.exp(-3 / (1 / -math.log(0.9))))  # type: ignore[union-attr]


@pytest.mark.slow  # 2.0 s measured on a busy machine
def test_decay_walks_in_batches(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    memory = make_memory(decay_batch_size=3)
    for i in range(10):
        memory.remember(f"m{i}", importance=0.0)
    sizes: list[int] = []
    original = memory.store.schedules.retention_batch

    def recording(*args: Any, **kwargs: Any) -> Any:
        batch = original(*args, **kwargs)
        sizes.append(len(batch))
        return batch

    memory.store.schedules.retention_batch = recording  # type: ignore[method-assign]
    clock.advance(3 * DAY)
    assert memory.decay().forgotten == 10
    assert sizes == [3, 3, 3, 1, 0]


@pytest.mark.slow  # 2.1 s measured on a busy machine
def test_consolidate_promotes_well_learned_episodic_memories(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    learned = memory.remember("learned")
    once = memory.remember("reviewed once")
    lapsed = memory.remember("lapsed")
    for m in (learned, once, lapsed):
        memory.review(m.id, 5)
    clock.advance(DAY)
    memory.review(learned.id, 4)
    memory.review(lapsed.id, 1)
    clock.advance(DAY)
    report = memory.consolidate()
    assert report.promoted_ids == (learned.id,)
    assert report.checked == 1
    assert memory.get(learned.id).tier is Tier.SEMANTIC  # type: ignore[union-attr]
    assert memory.get(once.id).tier is Tier.EPISODIC  # type: ignore[union-attr]
    [record] = memory.promotion_history(learned.id)
    assert record.reason is not None and record.reason.startswith("consolidated")


@pytest.mark.slow  # 2.1 s measured on a busy machine
def test_consolidate_needs_retention_too(memory: AgentMemoryManager, clock: FakeClock) -> None:
    m = memory.remember("old news")
    memory.review(m.id, 5)
    memory.review(m.id, 5)  # stability 6 / -ln 0.9 = 56.9 days
    clock.advance(30 * DAY)  # retention e^(-30/56.9) = 0.59 < 0.7
    assert memory.consolidate().promoted_ids == ()

"""The forgetting curve's maths against values computed by hand."""

from __future__ import annotations

import math

import pytest

from persistence import InvalidInputError, RepetitionSchedule, RetentionInput
from tiered_memory.forgetting import (
    DAY_MS,
    ForgettingCurve,
    current_retention,
    initial_stability,
    new_schedule,
    next_ease_factor,
    retention,
    review,
)

CURVE = ForgettingCurve()  # S0 = 1 * (1 + 4 * importance) days, target retention 0.9


def test_retention_is_exponential_in_days() -> None:
    assert retention(0, 1.0) == 1.0
    assert retention(DAY_MS, 1.0) == pytest.approx(0.36787944117)  # e^-1
    assert retention(3 * DAY_MS, 5.0) == pytest.approx(0.54881163609)  # e^-0.6
    assert retention(-DAY_MS, 1.0) == 1.0  # a clock that went back


def test_initial_stability_grows_with_importance() -> None:
    assert initial_stability(0.0, CURVE) == 1.0
    assert initial_stability(0.5, CURVE) == 3.0
    assert initial_stability(1.0, CURVE) == 5.0


@pytest.mark.parametrize(
    ("quality", "expected"),
    [(5, 2.6), (4, 2.5), (3, 2.36), (2, 2.18), (1, 1.96), (0, 1.7)],
)
def test_ease_factor_moves_both_ways(quality: int, expected: float) -> None:
    # EF' = EF + 0.1 - (5-q)(0.08 + (5-q)0.02), from EF = 2.5
    assert next_ease_factor(2.5, quality) == pytest.approx(expected)


def test_ease_factor_floor() -> None:
    assert next_ease_factor(1.4, 0) == 1.3


def test_sm2_intervals_one_six_then_times_ease() -> None:
    schedule = new_schedule("m", 0.0, 0, CURVE)
    assert (schedule.interval_ms, schedule.next_review_at, schedule.ease_factor) == (
        DAY_MS,
        DAY_MS,
        2.5,
    )
    now = 0
    intervals, eases = [], []
    for _ in range(3):
        now += schedule.interval_ms
        schedule = review(schedule, 5, 0.0, now, CURVE)
        intervals.append(schedule.interval_ms // DAY_MS)
        eases.append(round(schedule.ease_factor, 6))
    # 1 day, 6 days, then round(6 * 2.7) = 16 days (the EF before the third review)
    assert intervals == [1, 6, 16]
    assert eases == [2.6, 2.7, 2.8]
    assert schedule.review_count == 3
    assert schedule.next_review_at == now + 16 * DAY_MS
    assert schedule.last_reviewed_at == now


def test_stability_grows_with_the_interval() -> None:
    schedule = new_schedule("m", 0.5, 0, CURVE)
    assert schedule.stability_days == 3.0
    first = review(schedule, 4, 0.5, DAY_MS, CURVE)
    assert first.stability_days == pytest.approx(1 / -math.log(0.9))  # 9.4912 days
    second = review(first, 4, 0.5, 2 * DAY_MS, CURVE)
    assert second.stability_days == pytest.approx(6 / -math.log(0.9))  # 56.947 days
    # Retention at the next due date is the target retention.
    assert retention(second.interval_ms, second.stability_days) == pytest.approx(0.9)


def test_lapse_resets_repetitions_interval_and_stability() -> None:
    schedule = RepetitionSchedule("m", 0, 16 * DAY_MS, 3, 2.8, 150.0, 0)
    lapsed = review(schedule, 2, 0.5, 10, CURVE)
    assert (lapsed.review_count, lapsed.interval_ms, lapsed.next_review_at) == (
        0,
        DAY_MS,
        10 + DAY_MS,
    )
    assert lapsed.ease_factor == pytest.approx(2.48)
    assert lapsed.stability_days == 3.0


@pytest.mark.parametrize("quality", [-1, 6, 2.5, "5", True])
def test_quality_must_be_an_int_from_0_to_5(quality: object) -> None:
    with pytest.raises(InvalidInputError):
        review(new_schedule("m", 0.5, 0, CURVE), quality, 0.5, 0, CURVE)  # type: ignore[arg-type]


def test_current_retention_uses_last_review_or_creation() -> None:
    never = RetentionInput("m", 0.0, 1.0, created_at=0, stability_days=None,
                           last_reviewed_at=None, review_count=0)  # fmt: skip
    assert current_retention(never, 2 * DAY_MS, CURVE) == pytest.approx(math.exp(-2))
    reviewed = RetentionInput("m", 0.0, 1.0, created_at=0, stability_days=10.0,
                              last_reviewed_at=5 * DAY_MS, review_count=1)  # fmt: skip
    assert current_retention(reviewed, 10 * DAY_MS, CURVE) == pytest.approx(math.exp(-0.5))


def test_intervals_are_capped_so_reviews_never_overflow() -> None:
    schedule = new_schedule("m", 1.0, 0, CURVE)
    for _ in range(200):
        schedule = review(schedule, 5, 1.0, 0, CURVE)
    assert schedule.interval_ms == 36_500 * DAY_MS
    assert schedule.next_review_at < 2**63

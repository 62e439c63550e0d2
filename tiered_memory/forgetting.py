r"""The forgetting curve: Ebbinghaus retention and SM-2 spaced repetition.

Pure functions over numbers and :class:`RepetitionSchedule` records; the manager does the
storage. Times are epoch milliseconds; stability and intervals are in days.

Retention (Ebbinghaus)::

    R = exp(-Δt / S)

where Δt is the time since the last review (or since creation, before any review) and
S is the memory's stability. A new memory starts with::

    S0 = initial_stability_days * (1 + importance_stability_boost * importance)

(1 to 5 days with the defaults).

Review (SM-2, as SuperMemo published it), with quality q in 0..5, repetitions n,
interval I in days and ease factor EF (2.5 for a new memory)::

    if q >= 3:  I = 1 if n == 0, 6 if n == 1, else round(I * EF);  n = n + 1
    else:       I = 1;  n = 0
    EF' = max(1.3, EF + 0.1 - (5 - q) * (0.08 + (5 - q) * 0.02))

The interval uses the ease factor from before the review, and is capped at
``MAX_INTERVAL_DAYS`` (100 years) so repeated reviews can never overflow a timestamp.
EF rises after q = 5 (+0.10), stays after q = 4, and falls below that (q = 3: -0.14,
q = 0: -0.80, floored at 1.3).
The next review is due ``I`` days after this one.

Stability grows with the interval: after a successful review (q >= 3) it becomes
``max(S, I / -ln(target_retention))``, so that retention is ``target_retention`` when the
next review falls due; after a lapse (q < 3) it goes back to ``S0``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from persistence import (
    MAX_COUNT,
    InvalidInputError,
    InvalidTypeError,
    RepetitionSchedule,
    RetentionInput,
)

DAY_MS = 86_400_000
MAX_INTERVAL_DAYS = 36_500
MIN_EASE = 1.3
DEFAULT_EASE = 2.5


@dataclass(frozen=True, slots=True)
class ForgettingCurve:
    """The curve's constants, with the module's functions as methods."""

    initial_stability_days: float = 1.0
    importance_stability_boost: float = 4.0
    target_retention: float = 0.9

    def schedule_for(self, memory_id: str, importance: float, now: int) -> RepetitionSchedule:
        """See :func:`new_schedule`."""
        return new_schedule(memory_id, importance, now, self)

    def review(
        self, schedule: RepetitionSchedule, quality: int, importance: float, now: int
    ) -> RepetitionSchedule:
        """See :func:`review`."""
        return review(schedule, quality, importance, now, self)

    def retention_of(self, row: RetentionInput, now: int) -> float:
        """See :func:`current_retention`."""
        return current_retention(row, now, self)


def retention(elapsed_ms: int, stability_days: float) -> float:
    """``exp(-Δt / S)``; a negative Δt (a clock that went back) counts as zero."""
    elapsed_days = max(elapsed_ms, 0) / DAY_MS
    return math.exp(-elapsed_days / stability_days)


def initial_stability(importance: float, params: ForgettingCurve) -> float:
    """``S0`` of a memory of the given importance, in days."""
    return params.initial_stability_days * (1.0 + params.importance_stability_boost * importance)


def next_ease_factor(ease_factor: float, quality: int) -> float:
    """SM-2's ease-factor update, floored at 1.3."""
    miss = 5 - quality
    return max(MIN_EASE, ease_factor + 0.1 - miss * (0.08 + miss * 0.02))


def new_schedule(
    memory_id: str, importance: float, now: int, params: ForgettingCurve
) -> RepetitionSchedule:
    """The schedule of a memory never reviewed: first review due in one day."""
    return RepetitionSchedule(
        memory_id=memory_id,
        next_review_at=now + DAY_MS,
        interval_ms=DAY_MS,
        review_count=0,
        ease_factor=DEFAULT_EASE,
        stability_days=initial_stability(importance, params),
        last_reviewed_at=None,
    )


def review(
    schedule: RepetitionSchedule,
    quality: int,
    importance: float,
    now: int,
    params: ForgettingCurve,
) -> RepetitionSchedule:
    """Apply one SM-2 review of ``quality`` (0-5) at ``now``; return the new schedule."""
    if isinstance(quality, bool) or not isinstance(quality, int):
        raise InvalidTypeError(f"quality must be an int from 0 to 5, got {quality!r}")
    if not 0 <= quality <= 5:
        raise InvalidInputError(f"quality must be from 0 to 5, got {quality}")
    if quality >= 3:
        n = schedule.review_count
        if n == 0:
            interval_days = 1
        elif n == 1:
            interval_days = 6
        else:
            interval_days = round(schedule.interval_ms / DAY_MS * schedule.ease_factor)
        interval_days = min(interval_days, MAX_INTERVAL_DAYS)
        repetitions = min(n + 1, MAX_COUNT)  # a counter stays within the validated bound
        stability = max(schedule.stability_days, interval_days / -math.log(params.target_retention))
    else:
        interval_days = 1
        repetitions = 0
        stability = initial_stability(importance, params)
    interval_ms = int(interval_days * DAY_MS)
    return RepetitionSchedule(
        memory_id=schedule.memory_id,
        next_review_at=now + interval_ms,
        interval_ms=interval_ms,
        review_count=repetitions,
        ease_factor=next_ease_factor(schedule.ease_factor, quality),
        stability_days=stability,
        last_reviewed_at=now,
    )


def current_retention(row: RetentionInput, now: int, params: ForgettingCurve) -> float:
    """Retention of a stored memory at ``now`` (S0 from importance if never scheduled)."""
    stability = row.stability_days or initial_stability(row.importance, params)
    since = row.last_reviewed_at if row.last_reviewed_at is not None else row.created_at
    return retention(now - since, stability)

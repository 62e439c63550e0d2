"""SQL of spaced-repetition schedules (``tm_schedules``): statements built
(:class:`Statement`, :class:`Batch`) and the rows they return decoded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from persistence.records import RepetitionSchedule
from persistence.statements import Batch, Statement
from persistence.stores.rows import SCHEDULE_COLUMNS, SCHEDULE_CONFLICT, schedule_row
from persistence.stores.scope import WHOLE, Scope

_INSERT = f"INSERT INTO tm_schedules ({SCHEDULE_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)"
_UPSERT = f"{_INSERT} {SCHEDULE_CONFLICT}"


def to_schedule(row: Sequence[Any]) -> RepetitionSchedule:
    """The schedule a row of the schedule columns holds."""
    return RepetitionSchedule(*row)


def upsert(schedule: RepetitionSchedule) -> Statement:
    """Insert or replace the schedule of one memory."""
    return Statement(_UPSERT, schedule_row(schedule))


def insert_many(schedules: Sequence[RepetitionSchedule]) -> Batch:
    """Insert the schedules of new memories (none of them has one yet)."""
    return Batch(_INSERT, [schedule_row(s) for s in schedules])


def fetch(memory_id: str, scope: Scope = WHOLE) -> Statement:
    """The schedule of ``memory_id`` (in ``scope``)."""
    mine, agent = scope.and_("scope", "%s")
    return Statement(
        f"SELECT {SCHEDULE_COLUMNS} FROM tm_schedules WHERE memory_id = %s{mine}",
        (memory_id, *agent),
    )


def due(before: int, limit: int | None, scope: Scope = WHOLE) -> Statement:
    """Schedules (in ``scope``) with ``next_review_at <= before``, most overdue first."""
    mine, agent = scope.and_("scope", "%s")
    return Statement(
        f"SELECT {SCHEDULE_COLUMNS} FROM tm_schedules WHERE next_review_at <= %s{mine} "
        'ORDER BY next_review_at, memory_id COLLATE "C" LIMIT %s',
        (before, *agent, limit),
    )

"""SQL of spaced-repetition schedules: statements built (:class:`Statement`,
:class:`Batch`) and the rows they return decoded, every value's type checked."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from persistence.records import RepetitionSchedule
from persistence.sqlite.row_checks import INT, NULL_INT, REAL, TEXT, damaged_row
from persistence.sqlite.sql.memory_sql import scoped_ids
from persistence.statements import Batch, Statement
from persistence.stores.rows import SCHEDULE_COLUMNS, SCHEDULE_CONFLICT, schedule_row
from persistence.stores.scope import WHOLE, Scope

_INSERT = f"INSERT INTO repetition_schedules ({SCHEDULE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
_UPSERT = f"{_INSERT} {SCHEDULE_CONFLICT}"

_NAMES = tuple(c.strip() for c in SCHEDULE_COLUMNS.split(","))
_KINDS = (TEXT, INT, INT, INT, REAL, REAL, NULL_INT)


def to_schedule(row: Sequence[Any]) -> RepetitionSchedule:
    """The schedule a row holds (damage if a column's type is not its own)."""
    memory_id, next_review_at, interval_ms, review_count, ease, stability, reviewed_at = row
    if (
        type(memory_id) is not str or type(next_review_at) is not int
        or type(interval_ms) is not int or type(review_count) is not int
        or type(ease) is not float or type(stability) is not float
        or (reviewed_at is not None and type(reviewed_at) is not int)
    ):  # fmt: skip
        raise damaged_row("repetition_schedules", _NAMES, _KINDS, row)
    return RepetitionSchedule(*row)


def upsert(schedule: RepetitionSchedule) -> Statement:
    """Insert or replace the schedule of one memory."""
    return Statement(_UPSERT, schedule_row(schedule))


def insert_many(schedules: Sequence[RepetitionSchedule]) -> Batch:
    """Insert the schedules of new memories (none of them has one yet; a single one is
    upserted)."""
    return Batch(_UPSERT if len(schedules) == 1 else _INSERT, [schedule_row(s) for s in schedules])


def _mine(scope: Scope) -> tuple[str, tuple[str, ...]]:
    """The scope's condition on a schedule (its memory is the scope's), to append."""
    if not scope.scoped:
        return "", ()
    ids, agent = scoped_ids(scope)
    return f" AND memory_id IN ({ids})", agent


def fetch(memory_id: str, scope: Scope = WHOLE) -> Statement:
    """The schedule of ``memory_id`` (a memory ``scope`` holds)."""
    mine, agent = _mine(scope)
    return Statement(
        f"SELECT {SCHEDULE_COLUMNS} FROM repetition_schedules WHERE memory_id = ?{mine}",
        (memory_id, *agent),
    )


def due(before: int, limit: int | None, scope: Scope = WHOLE) -> Statement:
    """Schedules (of ``scope``'s memories) with ``next_review_at <= before``, most
    overdue first."""
    mine, agent = _mine(scope)
    return Statement(
        f"SELECT {SCHEDULE_COLUMNS} FROM repetition_schedules WHERE next_review_at <= ?{mine} "
        "ORDER BY next_review_at, memory_id LIMIT ?",
        (before, *agent, -1 if limit is None else limit),
    )


def page(after_id: str, limit: int, held: tuple[str, tuple[str, ...]] | None = None) -> Statement:
    """The next ``limit`` schedules with memory id > ``after_id`` (``held``: of the
    memory ids this subquery and its parameters give)."""
    mine, params = ("", ()) if held is None else (f" AND memory_id IN ({held[0]})", held[1])
    return Statement(
        f"SELECT {SCHEDULE_COLUMNS} FROM repetition_schedules WHERE memory_id > ?{mine} "
        "ORDER BY memory_id LIMIT ?",
        (after_id, *params, limit),
    )

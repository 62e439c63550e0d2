"""SQL for spaced-repetition schedules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from persistence.records import RepetitionSchedule
from persistence.sqlite.connection import query_all, query_one
from persistence.sqlite.row_checks import INT, NULL_INT, REAL, TEXT, damaged_row
from persistence.sqlite.sql.memory_sql import scoped_ids
from persistence.stores.scope import WHOLE, Scope

_COLUMNS = (
    "memory_id, next_review_at, interval_ms, review_count, ease_factor, stability_days, "
    "last_reviewed_at"
)


_NAMES = tuple(c.strip() for c in _COLUMNS.split(","))
_KINDS = (TEXT, INT, INT, INT, REAL, REAL, NULL_INT)


def _to_schedule(row: Sequence[Any]) -> RepetitionSchedule:
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


def upsert(conn: apsw.Connection, schedule: RepetitionSchedule) -> None:
    """Insert or replace the schedule of one memory."""
    conn.execute(
        f"INSERT INTO repetition_schedules ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (memory_id) DO UPDATE SET next_review_at = excluded.next_review_at, "
        "interval_ms = excluded.interval_ms, review_count = excluded.review_count, "
        "ease_factor = excluded.ease_factor, stability_days = excluded.stability_days, "
        "last_reviewed_at = excluded.last_reviewed_at",
        (
            schedule.memory_id,
            schedule.next_review_at,
            schedule.interval_ms,
            schedule.review_count,
            float(schedule.ease_factor),
            float(schedule.stability_days),
            schedule.last_reviewed_at,
        ),
    )


def insert_many(conn: apsw.Connection, schedules: Sequence[RepetitionSchedule]) -> None:
    """Insert the schedules of new memories (none of them has one yet)."""
    if len(schedules) == 1:
        upsert(conn, schedules[0])
        return
    conn.executemany(
        f"INSERT INTO repetition_schedules ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (s.memory_id, s.next_review_at, s.interval_ms, s.review_count,
             float(s.ease_factor), float(s.stability_days), s.last_reviewed_at)
            for s in schedules
        ],
    )  # fmt: skip


def _mine(scope: Scope) -> tuple[str, tuple[str, ...]]:
    """The scope's condition on a schedule (its memory is the scope's), to append."""
    if not scope.scoped:
        return "", ()
    ids, agent = scoped_ids(scope)
    return f" AND memory_id IN ({ids})", agent


def fetch(
    conn: apsw.Connection, memory_id: str, scope: Scope = WHOLE
) -> RepetitionSchedule | None:
    """The schedule of ``memory_id`` (a memory ``scope`` holds), or ``None``."""
    mine, agent = _mine(scope)
    row = query_one(
        conn,
        f"SELECT {_COLUMNS} FROM repetition_schedules WHERE memory_id = ?{mine}",
        (memory_id, *agent),
    )
    return None if row is None else _to_schedule(row)


def due(
    conn: apsw.Connection, before: int, limit: int | None, scope: Scope = WHOLE
) -> list[RepetitionSchedule]:
    """Schedules (of ``scope``'s memories) with ``next_review_at <= before``, most
    overdue first."""
    mine, agent = _mine(scope)
    rows = query_all(
        conn,
        f"SELECT {_COLUMNS} FROM repetition_schedules WHERE next_review_at <= ?{mine} "
        "ORDER BY next_review_at, memory_id LIMIT ?",
        (before, *agent, -1 if limit is None else limit),
    )
    return [_to_schedule(row) for row in rows]


def page(
    conn: apsw.Connection, after_id: str, limit: int,
    held: tuple[str, tuple[str, ...]] | None = None,
) -> list[RepetitionSchedule]:  # fmt: skip
    """The next ``limit`` schedules with memory id > ``after_id`` (``held``: of the
    memory ids this subquery and its parameters give)."""
    mine, params = ("", ()) if held is None else (f" AND memory_id IN ({held[0]})", held[1])
    rows = query_all(
        conn,
        f"SELECT {_COLUMNS} FROM repetition_schedules WHERE memory_id > ?{mine} "
        "ORDER BY memory_id LIMIT ?",
        (after_id, *params, limit),
    )
    return [_to_schedule(row) for row in rows]

"""SQL of spaced-repetition schedules (``tm_schedules``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from persistence.records import RepetitionSchedule
from persistence.stores.scope import WHOLE, Scope

_COLUMNS = (
    "memory_id, next_review_at, interval_ms, review_count, ease_factor, stability_days, "
    "last_reviewed_at"
)
_INSERT = f"INSERT INTO tm_schedules ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)"
_UPSERT = _INSERT + (
    " ON CONFLICT (memory_id) DO UPDATE SET next_review_at = excluded.next_review_at, "
    "interval_ms = excluded.interval_ms, review_count = excluded.review_count, "
    "ease_factor = excluded.ease_factor, stability_days = excluded.stability_days, "
    "last_reviewed_at = excluded.last_reviewed_at"
)


def _row(s: RepetitionSchedule) -> tuple[Any, ...]:
    return (s.memory_id, s.next_review_at, s.interval_ms, s.review_count,
            float(s.ease_factor), float(s.stability_days), s.last_reviewed_at)  # fmt: skip


def upsert(conn: psycopg.Connection[Any], schedule: RepetitionSchedule) -> None:
    """Insert or replace the schedule of one memory."""
    conn.execute(_UPSERT, _row(schedule))


def insert_many(conn: psycopg.Connection[Any], schedules: Sequence[RepetitionSchedule]) -> None:
    """Insert the schedules of new memories (none of them has one yet)."""
    if len(schedules) == 1:
        conn.execute(_INSERT, _row(schedules[0]))
    elif schedules:
        with conn.cursor() as cur:
            cur.executemany(_INSERT, [_row(s) for s in schedules])


def fetch(
    conn: psycopg.Connection[Any], memory_id: str, scope: Scope = WHOLE
) -> RepetitionSchedule | None:
    """The schedule of ``memory_id`` (in ``scope``), or ``None``."""
    mine, agent = scope.and_("scope", "%s")
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM tm_schedules WHERE memory_id = %s{mine}", (memory_id, *agent)
    ).fetchone()
    return None if row is None else RepetitionSchedule(*row)


def due(
    conn: psycopg.Connection[Any], before: int, limit: int | None, scope: Scope = WHOLE
) -> list[RepetitionSchedule]:
    """Schedules (in ``scope``) with ``next_review_at <= before``, most overdue first."""
    mine, agent = scope.and_("scope", "%s")
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM tm_schedules WHERE next_review_at <= %s{mine} "
        'ORDER BY next_review_at, memory_id COLLATE "C" LIMIT %s',
        (before, *agent, limit),
    ).fetchall()
    return [RepetitionSchedule(*row) for row in rows]

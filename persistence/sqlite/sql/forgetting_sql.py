"""SQL for the forgetting curve's batch work: retention inputs, updates and the audit log."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from persistence.records import ForgettingRecord, RetentionInput, Tier
from persistence.sqlite import memory_steps
from persistence.sqlite.connection import query_all, query_one
from persistence.sqlite.row_checks import (
    INT,
    NULL_INT,
    NULL_REAL,
    REAL,
    TEXT,
    check_row,
    tier_named,
)
from persistence.sqlite.sql.memory_sql import TABLE
from persistence.stores.scope import WHOLE, Scope

_INPUT_COLUMNS = (
    "t.id, t.importance, t.retention, t.created_at, s.stability_days, s.last_reviewed_at, "
    "coalesce(s.review_count, 0)"
)


_INPUT_NAMES = (
    "id", "importance", "retention", "created_at", "repetition_schedules.stability_days",
    "repetition_schedules.last_reviewed_at", "repetition_schedules.review_count",
)  # fmt: skip
_INPUT_KINDS = (TEXT, REAL, REAL, INT, NULL_REAL, NULL_INT, INT)
_LOG_NAMES = ("memory_id", "tier", "forgotten_at", "retention", "reason")
_LOG_KINDS = (TEXT, TEXT, INT, NULL_REAL, TEXT)


def _record(row: Sequence[Any]) -> ForgettingRecord:
    """The audit record a row holds (damage if a column's type is not its own)."""
    memory_id, tier, forgotten_at, retention, reason = check_row(
        "forgetting_log", _LOG_NAMES, _LOG_KINDS, row
    )
    return ForgettingRecord(memory_id, tier_named("forgetting_log", "tier", tier), forgotten_at,
                            retention, reason)  # fmt: skip


def retention_batch(
    conn: apsw.Connection,
    tier: Tier,
    after_id: str,
    limit: int,
    min_reviews: int = 0,
    scope: Scope = WHOLE,
) -> list[RetentionInput]:
    """:meth:`ScheduleStore.retention_batch`'s inputs from ``tier``'s table joined with
    each memory's schedule (in ``scope``), every value's type checked as it is read."""
    mine, agent = scope.and_("t.agent_id")
    rows = query_all(
        conn,
        f"SELECT {_INPUT_COLUMNS} FROM {TABLE[tier]} AS t "
        "LEFT JOIN repetition_schedules AS s ON s.memory_id = t.id "
        f"WHERE t.id > ? AND coalesce(s.review_count, 0) >= ?{mine} ORDER BY t.id LIMIT ?",
        (after_id, min_reviews, *agent, limit),
    )
    return [
        RetentionInput(*check_row(TABLE[tier], _INPUT_NAMES, _INPUT_KINDS, row)) for row in rows
    ]


def set_retention(conn: apsw.Connection, tier: Tier, updates: Sequence[tuple[str, float]]) -> None:
    """Write new retention strengths (``(id, retention)`` pairs)."""
    conn.executemany(
        f"UPDATE {TABLE[tier]} SET retention = ? WHERE id = ?",
        [(retention, memory_id) for memory_id, retention in updates],
    )


def agent_of(conn: apsw.Connection, tier: Tier, memory_id: str) -> str | None:
    """The agent of a memory of ``tier`` (``None``: none, or no such memory)."""
    row = query_one(conn, f"SELECT agent_id FROM {TABLE[tier]} WHERE id = ?", (memory_id,))
    return None if row is None else row[0]


def log_forgotten(
    conn: apsw.Connection, record: ForgettingRecord, agent_id: str | None = None
) -> None:
    """Append one audit row for a forgotten memory (of agent ``agent_id``)."""
    values = (record.memory_id, record.tier.value, record.forgotten_at, record.retention,
              record.reason)  # fmt: skip
    if agent_id is None:  # no owner column named: a file of any schema version
        conn.execute(
            "INSERT INTO forgetting_log (memory_id, tier, forgotten_at, retention, reason) "
            "VALUES (?, ?, ?, ?, ?)",
            values,
        )
    else:
        conn.execute(
            "INSERT INTO forgetting_log (memory_id, tier, forgotten_at, retention, reason, "
            "agent_id) VALUES (?, ?, ?, ?, ?, ?)",
            (*values, agent_id),
        )


def forget(
    conn: apsw.Connection,
    tier: Tier,
    memory_id: str,
    retention: float | None,
    reason: str | None,
    at: int,
) -> bool:
    """Delete a memory of ``tier`` (tags, schedule) and, with a ``reason``, log why,
    stamped ``at``; False if there was none."""
    agent_id = agent_of(conn, tier, memory_id) if reason is not None else None
    if not memory_steps.delete(conn, tier, memory_id):
        return False
    if reason is not None:
        log_forgotten(conn, ForgettingRecord(memory_id, tier, at, retention, reason), agent_id)
    return True


def forget_many(
    conn: apsw.Connection,
    tier: Tier,
    forgotten: Sequence[tuple[str, float]],
    reason: str,
    at: int,
) -> None:
    """:func:`forget` each ``(id, retention)`` of ``tier``, logged with ``reason``."""
    for memory_id, retention in forgotten:
        forget(conn, tier, memory_id, retention, reason, at)


def forgetting_log(
    conn: apsw.Connection,
    memory_id: str | None,
    agent_id: str | None = None,
    scope: Scope = WHOLE,
) -> list[ForgettingRecord]:
    """Audit rows, oldest first, for one memory or for all (of ``agent_id``'s memories,
    if given; of ``scope``'s: rows written before schema version 12 name no agent, an
    unscoped handle reads them)."""
    mine, params = scope.condition()
    sql = (
        f"SELECT memory_id, tier, forgotten_at, retention, reason FROM forgetting_log WHERE {mine}"
    )
    if memory_id is not None:
        sql += " AND memory_id = ?"
        params = (*params, memory_id)
    if agent_id is not None:
        sql += " AND agent_id = ?"
        params = (*params, agent_id)
    rows = query_all(conn, sql + " ORDER BY id", params)
    return [_record(r) for r in rows]


def _scoped(params: tuple[object, ...], agent_id: str | None) -> tuple[object, ...]:
    return params if agent_id is None else (*params, agent_id)


def page(
    conn: apsw.Connection, after_id: int, limit: int, agent_id: str | None = None
) -> list[tuple[int, ForgettingRecord]]:
    """The next ``limit`` audit rows (of ``agent_id``'s memories, if given) with
    id > ``after_id``, with their ids."""
    owner = "" if agent_id is None else " AND agent_id = ?"
    params: tuple[object, ...] = _scoped((after_id,), agent_id) + (limit,)
    rows = query_all(
        conn,
        "SELECT id, memory_id, tier, forgotten_at, retention, reason FROM forgetting_log "
        f"WHERE id > ?{owner} ORDER BY id LIMIT ?",
        params,
    )
    return [(r[0], _record(r[1:])) for r in rows]


def insert(conn: apsw.Connection, row_id: int | None, record: ForgettingRecord) -> None:
    """Insert an audit row as it was exported (``row_id=None`` for a fresh id)."""
    conn.execute(
        "INSERT INTO forgetting_log (id, memory_id, tier, forgotten_at, retention, reason) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (row_id, record.memory_id, record.tier.value, record.forgotten_at, record.retention,
         record.reason),
    )  # fmt: skip


def forgotten_ids(conn: apsw.Connection) -> set[str]:
    """Ids of every memory the log says was forgotten."""
    return {r[0] for r in query_all(conn, "SELECT DISTINCT memory_id FROM forgetting_log")}


def contains(conn: apsw.Connection, record: ForgettingRecord) -> bool:
    """True if the log already holds this event (same memory, time and reason)."""
    row = query_one(
        conn,
        "SELECT 1 FROM forgetting_log WHERE memory_id = ? AND forgotten_at = ? AND reason = ?",
        (record.memory_id, record.forgotten_at, record.reason),
    )
    return row is not None

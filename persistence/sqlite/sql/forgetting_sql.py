"""SQL of the forgetting curve's batch work: retention inputs, updates and the audit log,
as statements built (:class:`Statement`, :class:`Batch`) and the rows they return
decoded, every value's type checked. Forgetting a memory (several tables, then the log)
is :mod:`persistence.sqlite.forgetting_steps`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from persistence.records import ForgettingRecord, RetentionInput, Tier
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
from persistence.statements import Batch, Statement
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
_LOG_COLUMNS = "memory_id, tier, forgotten_at, retention, reason"
_LOG_NAMES = tuple(c.strip() for c in _LOG_COLUMNS.split(","))
_LOG_KINDS = (TEXT, TEXT, INT, NULL_REAL, TEXT)


def to_record(row: Sequence[Any]) -> ForgettingRecord:
    """The audit record a row holds (damage if a column's type is not its own)."""
    memory_id, tier, forgotten_at, retention, reason = check_row(
        "forgetting_log", _LOG_NAMES, _LOG_KINDS, row
    )
    return ForgettingRecord(memory_id, tier_named("forgetting_log", "tier", tier), forgotten_at,
                            retention, reason)  # fmt: skip


def to_input(row: Sequence[Any], tier: Tier) -> RetentionInput:
    """A :func:`retention_batch` row of ``tier``'s table, every value's type checked."""
    return RetentionInput(*check_row(TABLE[tier], _INPUT_NAMES, _INPUT_KINDS, row))


def retention_batch(
    tier: Tier, after_id: str, limit: int, min_reviews: int = 0, scope: Scope = WHOLE
) -> Statement:
    """:meth:`ScheduleStore.retention_batch`'s inputs from ``tier``'s table joined with
    each memory's schedule (in ``scope``), in id order."""
    mine, agent = scope.and_("t.agent_id")
    return Statement(
        f"SELECT {_INPUT_COLUMNS} FROM {TABLE[tier]} AS t "
        "LEFT JOIN repetition_schedules AS s ON s.memory_id = t.id "
        f"WHERE t.id > ? AND coalesce(s.review_count, 0) >= ?{mine} ORDER BY t.id LIMIT ?",
        (after_id, min_reviews, *agent, limit),
    )


def set_retention(tier: Tier, updates: Sequence[tuple[str, float]]) -> Batch:
    """New retention strengths written (``(id, retention)`` pairs)."""
    return Batch(
        f"UPDATE {TABLE[tier]} SET retention = ? WHERE id = ?",
        [(retention, memory_id) for memory_id, retention in updates],
    )


def agent_of(tier: Tier, memory_id: str) -> Statement:
    """The agent of a memory of ``tier`` (no row: no such memory)."""
    return Statement(f"SELECT agent_id FROM {TABLE[tier]} WHERE id = ?", (memory_id,))


def log_forgotten(record: ForgettingRecord, agent_id: str | None = None) -> Statement:
    """One audit row appended for a forgotten memory (of agent ``agent_id``)."""
    values = (record.memory_id, record.tier.value, record.forgotten_at, record.retention,
              record.reason)  # fmt: skip
    if agent_id is None:  # no owner column named: a file of any schema version
        return Statement(
            f"INSERT INTO forgetting_log ({_LOG_COLUMNS}) VALUES (?, ?, ?, ?, ?)", values
        )
    return Statement(
        f"INSERT INTO forgetting_log ({_LOG_COLUMNS}, agent_id) VALUES (?, ?, ?, ?, ?, ?)",
        (*values, agent_id),
    )


def forgetting_log(
    memory_id: str | None, agent_id: str | None = None, scope: Scope = WHOLE
) -> Statement:
    """Audit rows, oldest first, for one memory or for all (of ``agent_id``'s memories,
    if given; of ``scope``'s: rows written before schema version 12 name no agent, an
    unscoped handle reads them)."""
    mine, params = scope.condition()
    sql = f"SELECT {_LOG_COLUMNS} FROM forgetting_log WHERE {mine}"
    if memory_id is not None:
        sql += " AND memory_id = ?"
        params = (*params, memory_id)
    if agent_id is not None:
        sql += " AND agent_id = ?"
        params = (*params, agent_id)
    return Statement(sql + " ORDER BY id", params)


def page(after_id: int, limit: int, agent_id: str | None = None) -> Statement:
    """The next ``limit`` audit rows (of ``agent_id``'s memories, if given) with
    id > ``after_id``, each its id first (:func:`to_numbered_record`)."""
    owner = "" if agent_id is None else " AND agent_id = ?"
    agent = () if agent_id is None else (agent_id,)
    return Statement(
        f"SELECT id, {_LOG_COLUMNS} FROM forgetting_log WHERE id > ?{owner} ORDER BY id LIMIT ?",
        (after_id, *agent, limit),
    )


def to_numbered_record(row: Sequence[Any]) -> tuple[int, ForgettingRecord]:
    """A :func:`page` row: the id and the record."""
    return row[0], to_record(row[1:])


def insert(row_id: int | None, record: ForgettingRecord) -> Statement:
    """An audit row inserted as it was exported (``row_id=None`` for a fresh id)."""
    return Statement(
        f"INSERT INTO forgetting_log (id, {_LOG_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
        (row_id, record.memory_id, record.tier.value, record.forgotten_at, record.retention,
         record.reason),
    )  # fmt: skip


FORGOTTEN_IDS = Statement("SELECT DISTINCT memory_id FROM forgetting_log")
"""Ids of every memory the log says was forgotten."""


def contains(record: ForgettingRecord) -> Statement:
    """A row if the log already holds this event (same memory, time and reason)."""
    return Statement(
        "SELECT 1 FROM forgetting_log WHERE memory_id = ? AND forgotten_at = ? AND reason = ?",
        (record.memory_id, record.forgotten_at, record.reason),
    )

"""SQL of the forgetting curve's batch work: retention inputs, new retentions in one
statement, and the audit log (``tm_forgetting_log``). Forgetting itself (delete and log)
is :func:`persistence.postgres.sql.memory_sql.forget_rows` (:func:`forget_many`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from persistence.errors import InvalidInputError
from persistence.postgres.sql import memory_sql
from persistence.records import ForgettingRecord, RetentionInput, Tier
from persistence.statements import run
from persistence.stores.scope import WHOLE, Scope

_BATCH = (
    "SELECT t.id, t.importance, t.retention, t.created_at, s.stability_days, "
    "s.last_reviewed_at, coalesce(s.review_count, 0) "
    "FROM tm_memories AS t LEFT JOIN tm_schedules AS s ON s.memory_id = t.id "
    'WHERE t.tier = %s AND t.id COLLATE "C" > %s AND coalesce(s.review_count, 0) >= %s'
)
_BATCH_ORDER = ' ORDER BY t.id COLLATE "C" LIMIT %s'
_SET_RETENTION = (
    "UPDATE tm_memories AS t SET retention = u.r "
    "FROM unnest(%s::text[], %s::float8[]) AS u(id, r) WHERE t.id = u.id AND t.tier = %s"
)
_LOG = "SELECT memory_id, tier, forgotten_at, retention, reason FROM tm_forgetting_log"


def retention_batch(
    conn: psycopg.Connection[Any],
    tier: Tier,
    after_id: str,
    limit: int,
    min_reviews: int,
    scope: Scope = WHOLE,
) -> list[RetentionInput]:
    """:meth:`ScheduleStore.retention_batch`'s inputs from ``tm_memories`` joined with
    ``tm_schedules`` (in ``scope``), ids compared byte-wise (``COLLATE "C"``)."""
    mine, agent = scope.and_("t.scope", "%s")
    rows = conn.execute(
        _BATCH + mine + _BATCH_ORDER, (tier.value, after_id, min_reviews, *agent, limit)
    ).fetchall()
    return [RetentionInput(*row) for row in rows]


def set_retention(
    conn: psycopg.Connection[Any], tier: Tier, updates: Sequence[tuple[str, float]]
) -> None:
    """Write new retention strengths (``(id, retention)`` pairs) in one statement."""
    if updates:
        ids = [memory_id for memory_id, _ in updates]
        values = [float(retention) for _, retention in updates]
        conn.execute(_SET_RETENTION, (ids, values, tier.value))


def forget_many(
    conn: psycopg.Connection[Any],
    tier: Tier,
    forgotten: Sequence[tuple[str, float]],
    reason: str,
    at: int,
) -> None:
    """Forget each ``(id, retention)`` of ``tier`` with an audit row (one statement)."""
    ids = [memory_id for memory_id, _ in forgotten]
    retentions = [float(retention) for _, retention in forgotten]
    run(conn, memory_sql.forget_rows(ids, retentions, tier, reason, at))


def forgetting_log(
    conn: psycopg.Connection[Any],
    memory_id: str | None,
    agent_id: str | None = None,
    scope: Scope = WHOLE,
) -> list[ForgettingRecord]:
    """Audit rows (in ``scope``), oldest first, for one memory or for all. The log names
    no agent (a scoped handle sees its own rows): ``agent_id`` is refused."""
    if agent_id is not None:
        raise InvalidInputError(
            "the PostgreSQL forgetting log is kept per scope, not per agent: "
            "read it through a handle scoped to the agent"
        )
    mine, params = scope.condition("scope", "%s")
    if memory_id is None:
        rows = conn.execute(f"{_LOG} WHERE {mine} ORDER BY id", params).fetchall()
    else:
        sql = f"{_LOG} WHERE memory_id = %s AND {mine} ORDER BY id"
        rows = conn.execute(sql, (memory_id, *params)).fetchall()
    return [ForgettingRecord(r[0], Tier(r[1]), r[2], r[3], r[4]) for r in rows]

"""SQL of the forgetting curve's batch work: retention inputs, new retentions in one
statement, and the audit log (``tm_forgetting_log``), as statements built
(:class:`Statement`, :class:`Batch`) and the rows they return decoded. Forgetting itself
(delete and log) is :mod:`persistence.postgres.forgetting_steps`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from persistence.errors import InvalidInputError
from persistence.records import ForgettingRecord, RetentionInput, Tier
from persistence.statements import Batch, Statement
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


def to_record(row: Sequence[Any]) -> ForgettingRecord:
    """The audit record a log row holds."""
    return ForgettingRecord(row[0], Tier(row[1]), row[2], row[3], row[4])


def to_input(row: Sequence[Any], tier: Tier) -> RetentionInput:
    """A :func:`retention_batch` row."""
    return RetentionInput(*row)


def retention_batch(
    tier: Tier, after_id: str, limit: int, min_reviews: int = 0, scope: Scope = WHOLE
) -> Statement:
    """:meth:`ScheduleStore.retention_batch`'s inputs from ``tm_memories`` joined with
    ``tm_schedules`` (in ``scope``), ids compared byte-wise (``COLLATE "C"``)."""
    mine, agent = scope.and_("t.scope", "%s")
    return Statement(
        _BATCH + mine + _BATCH_ORDER, (tier.value, after_id, min_reviews, *agent, limit)
    )


def set_retention(tier: Tier, updates: Sequence[tuple[str, float]]) -> Batch:
    """New retention strengths (``(id, retention)`` pairs) written in one statement
    (none: no statement)."""
    if not updates:
        return Batch(_SET_RETENTION, [])
    ids = [memory_id for memory_id, _ in updates]
    values = [float(retention) for _, retention in updates]
    return Batch(_SET_RETENTION, [(ids, values, tier.value)])


def forgetting_log(
    memory_id: str | None, agent_id: str | None = None, scope: Scope = WHOLE
) -> Statement:
    """Audit rows (in ``scope``), oldest first, for one memory or for all. The log names
    no agent (a scoped handle sees its own rows): ``agent_id`` is refused."""
    if agent_id is not None:
        raise InvalidInputError(
            "the PostgreSQL forgetting log is kept per scope, not per agent: "
            "read it through a handle scoped to the agent"
        )
    mine, params = scope.condition("scope", "%s")
    if memory_id is None:
        return Statement(f"{_LOG} WHERE {mine} ORDER BY id", params)
    return Statement(f"{_LOG} WHERE memory_id = %s AND {mine} ORDER BY id", (memory_id, *params))

"""Forgetting on a file, step by step: a memory's rows leave its tier's table and the
tables kept beside it (:func:`~persistence.sqlite.memory_steps.delete`), then an audit
row names its agent; the statements are :mod:`~persistence.sqlite.sql.forgetting_sql`'s.
(PostgreSQL forgets in one statement: :mod:`persistence.postgres.forgetting_steps`.)"""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from persistence.records import ForgettingRecord, Tier
from persistence.sqlite import memory_steps
from persistence.sqlite.sql import forgetting_sql
from persistence.statements import run, value


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
    agent_id = value(conn, forgetting_sql.agent_of(tier, memory_id)) if reason is not None else None
    if not memory_steps.delete(conn, tier, memory_id):
        return False
    if reason is not None:
        record = ForgettingRecord(memory_id, tier, at, retention, reason)
        run(conn, forgetting_sql.log_forgotten(record, agent_id))
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

"""SQL of a store's row counts: every count in one statement, so one snapshot."""

from __future__ import annotations

from typing import Any

import psycopg

COUNTS = {
    "scratchpad_count": "SELECT count(*) FROM tm_memories WHERE tier = 'scratchpad'",
    "episodic_count": "SELECT count(*) FROM tm_memories WHERE tier = 'episodic'",
    "semantic_count": "SELECT count(*) FROM tm_memories WHERE tier = 'semantic'",
    "session_count": "SELECT count(*) FROM tm_sessions",
    "active_session_count": "SELECT count(*) FROM tm_sessions WHERE is_active",
    "transcript_count": "SELECT count(*) FROM tm_transcripts",
    "schedule_count": "SELECT count(*) FROM tm_schedules",
    "promotion_count": "SELECT count(*) FROM tm_promotion_log",
    "forgotten_count": "SELECT count(*) FROM tm_forgetting_log",
}
"""Count name (a ``PersistenceStatistics`` field) -> the query that counts it."""

_ALL = "SELECT " + ", ".join(f"({sql})" for sql in COUNTS.values())


def counts(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """Every count of :data:`COUNTS`, from one statement (one snapshot even outside a
    transaction)."""
    row = conn.execute(_ALL).fetchone()
    assert row is not None
    return {name: int(value) for name, value in zip(COUNTS, row, strict=True)}

"""SQL for a file's statistics and for telling what a file is: row counts across the
table families, and the user tables of a file that has no schema version."""

from __future__ import annotations

import apsw

from persistence.records import Tier
from persistence.sqlite.connection import query_all, query_value
from persistence.sqlite.sql.memory_sql import TABLE, scoped_ids
from persistence.stores.scope import WHOLE, Scope

COUNTS = {
    "session_count": "SELECT count(*) FROM sessions",
    "active_session_count": "SELECT count(*) FROM sessions WHERE is_active = 1",
    "transcript_count": "SELECT count(*) FROM session_transcripts",
    "schedule_count": "SELECT count(*) FROM repetition_schedules",
    "promotion_count": "SELECT count(*) FROM promotion_log",
    "forgotten_count": "SELECT count(*) FROM forgetting_log",
    "unembedded_count": "SELECT (SELECT count(*) FROM scratchpad WHERE embedding IS NULL) + "
    "(SELECT count(*) FROM episodic WHERE embedding IS NULL) + "
    "(SELECT count(*) FROM semantic WHERE embedding IS NULL)",
    "embedding_cache_count": "SELECT count(*) FROM embedding_cache",
}
"""``PersistenceStatistics`` field -> the statement that counts it."""


def counts(conn: apsw.Connection, scope: Scope = WHOLE) -> dict[str, int]:
    """Every count of :data:`COUNTS`, in the caller's snapshot; a scoped handle counts
    its agent's rows (the embedding cache's count stays the file's)."""
    found = {name: int(query_value(conn, sql)) for name, sql in COUNTS.items()}
    if scope.scoped:
        for name, (sql, params) in scoped_counts(scope).items():
            found[name] = int(query_value(conn, sql, params))
    return found


def scoped_counts(scope: Scope) -> dict[str, tuple[str, tuple[str, ...]]]:
    """The statements counting ``scope``'s share of :data:`COUNTS`: field ->
    ``(sql, params)``."""
    mine, agent = scope.condition()
    live, live_params = scoped_ids(scope)
    sessions = f"SELECT session_id FROM sessions WHERE {mine}"
    unembedded = [f"(SELECT count(*) FROM {TABLE[t]} WHERE {mine} AND embedding IS NULL)"
                  for t in Tier]  # fmt: skip
    return {
        "session_count": (f"SELECT count(*) FROM sessions WHERE {mine}", agent),
        "active_session_count": (
            f"SELECT count(*) FROM sessions WHERE {mine} AND is_active = 1",
            agent,
        ),
        "transcript_count": (
            f"SELECT count(*) FROM session_transcripts WHERE session_id IN ({sessions})",
            agent,
        ),
        "schedule_count": (
            f"SELECT count(*) FROM repetition_schedules WHERE memory_id IN ({live})",
            live_params,
        ),
        "promotion_count": (
            f"SELECT count(*) FROM promotion_log WHERE memory_id IN ({live}) OR memory_id IN "
            f"(SELECT memory_id FROM forgetting_log WHERE {mine})",
            (*live_params, *agent),
        ),
        "forgotten_count": (f"SELECT count(*) FROM forgetting_log WHERE {mine}", agent),
        "unembedded_count": ("SELECT " + " + ".join(unembedded), agent * len(unembedded)),
    }


def user_tables(conn: apsw.Connection) -> list[str]:
    """The names of the file's own tables (SQLite's internal ones left out), sorted."""
    rows = query_all(
        conn, "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    )
    return sorted(str(row[0]) for row in rows)

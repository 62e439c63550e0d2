"""SQL for a file's statistics and for telling what a file is: row counts across the
table families, and the user tables of a file that has no schema version."""

from __future__ import annotations

import apsw

from persistence.sqlite.connection import query_all, query_value

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


def counts(conn: apsw.Connection) -> dict[str, int]:
    """Every count of :data:`COUNTS`, in the caller's snapshot."""
    return {name: int(query_value(conn, sql)) for name, sql in COUNTS.items()}


def user_tables(conn: apsw.Connection) -> list[str]:
    """The names of the file's own tables (SQLite's internal ones left out), sorted."""
    rows = query_all(
        conn, "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    )
    return sorted(str(row[0]) for row in rows)

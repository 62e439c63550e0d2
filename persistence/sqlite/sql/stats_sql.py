"""SQL for a file's statistics and for telling what a file is: row counts across the
table families, and the user tables of a file that has no schema version."""

from __future__ import annotations

from persistence.records import Tier
from persistence.sqlite.sql.memory_sql import TABLE, scoped_ids
from persistence.statements import Statement
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


def counts(scope: Scope = WHOLE) -> dict[str, Statement]:
    """The statement counting each of :data:`COUNTS` (run them in one snapshot); a
    scoped handle counts its agent's rows (the embedding cache's count stays the file's)."""
    found = {name: Statement(sql) for name, sql in COUNTS.items()}
    return found | scoped_counts(scope) if scope.scoped else found


def scoped_counts(scope: Scope) -> dict[str, Statement]:
    """The statements counting ``scope``'s share of :data:`COUNTS`: field -> statement."""
    mine, agent = scope.condition()
    live, live_params = scoped_ids(scope)
    sessions = f"SELECT session_id FROM sessions WHERE {mine}"
    unembedded = [f"(SELECT count(*) FROM {TABLE[t]} WHERE {mine} AND embedding IS NULL)"
                  for t in Tier]  # fmt: skip
    return {
        "session_count": Statement(f"SELECT count(*) FROM sessions WHERE {mine}", agent),
        "active_session_count": Statement(
            f"SELECT count(*) FROM sessions WHERE {mine} AND is_active = 1", agent
        ),
        "transcript_count": Statement(
            f"SELECT count(*) FROM session_transcripts WHERE session_id IN ({sessions})", agent
        ),
        "schedule_count": Statement(
            f"SELECT count(*) FROM repetition_schedules WHERE memory_id IN ({live})",
            live_params,
        ),
        "promotion_count": Statement(
            f"SELECT count(*) FROM promotion_log WHERE memory_id IN ({live}) OR memory_id IN "
            f"(SELECT memory_id FROM forgetting_log WHERE {mine})",
            (*live_params, *agent),
        ),
        "forgotten_count": Statement(f"SELECT count(*) FROM forgetting_log WHERE {mine}", agent),
        "unembedded_count": Statement("SELECT " + " + ".join(unembedded), agent * len(unembedded)),
    }


USER_TABLES = Statement(
    "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
)
"""The names of the file's own tables (SQLite's internal ones left out), sorted."""

PAGE_SIZE = Statement("PRAGMA page_size")
PAGE_COUNT = Statement("PRAGMA page_count")

"""SQL of a store's row counts: every count in one statement, so one snapshot."""

from __future__ import annotations

from persistence.statements import Row, Statement

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
    "unembedded_count": "SELECT count(*) FROM tm_memories m WHERE NOT EXISTS "
    "(SELECT 1 FROM tm_vectors v WHERE v.memory_id = m.id)",
    "embedding_cache_count": "SELECT count(*) FROM tm_embedding_cache",
}
"""Count name (a ``PersistenceStatistics`` field) -> the query that counts it."""

COUNT_ALL = Statement("SELECT " + ", ".join(f"({sql})" for sql in COUNTS.values()))
"""Every count of :data:`COUNTS` in one statement (one snapshot even outside a
transaction): its row goes to :func:`to_counts`."""


def to_counts(row: Row | None) -> dict[str, int]:
    """:data:`COUNT_ALL`'s row as count name -> count."""
    assert row is not None
    return {name: int(value) for name, value in zip(COUNTS, row, strict=True)}


SIZES = Statement(
    "SELECT pg_database_size(current_database()), "
    "(SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relkind = 'r' AND c.relname LIKE 'tm\\_%%' AND n.nspname = current_schema())"
)
"""The database's size and what the library's tables (with their indexes) take: its
row goes to :func:`to_sizes`."""


def to_sizes(row: Row | None) -> dict[str, int]:
    """:data:`SIZES`'s row as ``database_size_bytes`` and ``tables_size_bytes``."""
    assert row is not None
    return {"database_size_bytes": int(row[0]), "tables_size_bytes": int(row[1])}

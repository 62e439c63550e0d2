"""Version 1: every table and index of the reference design, with our improvements.

Differences from the reference schema (``shared/reference/wundr-agent-memory-persistence.md``):
embeddings are float32 BLOBs; the three tier tables share one column set (so promotion
never drops a field) including real ``agent_id``, ``importance`` and ``retention`` columns;
tags live in ``memory_tags`` so tag filters use an index; ``store_meta`` records facts
about the file such as the embedding dimension; schedules keep the forgetting curve's
stability and last review; transcripts cascade with their session.
"""

from __future__ import annotations

import apsw

VERSION = 1
DESCRIPTION = "initial schema: tiers, sessions, transcripts, schedules, promotion log"

_MEMORY_COLUMNS = """
    id TEXT PRIMARY KEY,
    content TEXT NOT NULL,
    token_count INTEGER NOT NULL DEFAULT 0,
    metadata TEXT NOT NULL DEFAULT '{}',
    embedding BLOB,
    linked_memories TEXT NOT NULL DEFAULT '[]',
    session_id TEXT,
    agent_id TEXT,
    category TEXT,
    source TEXT,
    importance REAL NOT NULL DEFAULT 0.5,
    retention REAL NOT NULL DEFAULT 1.0,
    access_count INTEGER NOT NULL DEFAULT 0,
    last_accessed_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
"""

_STATEMENTS = [
    """CREATE TABLE IF NOT EXISTS schema_version (
        version INTEGER PRIMARY KEY,
        applied_at INTEGER NOT NULL,
        description TEXT
    )""",
    """CREATE TABLE store_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    f"CREATE TABLE scratchpad ({_MEMORY_COLUMNS}, key TEXT NOT NULL UNIQUE)",
    f"CREATE TABLE episodic ({_MEMORY_COLUMNS})",
    f"CREATE TABLE semantic ({_MEMORY_COLUMNS})",
    """CREATE TABLE memory_tags (
        memory_id TEXT NOT NULL,
        tag TEXT NOT NULL,
        position INTEGER NOT NULL,
        PRIMARY KEY (memory_id, tag)
    ) WITHOUT ROWID""",
    """CREATE TABLE repetition_schedules (
        memory_id TEXT PRIMARY KEY,
        next_review_at INTEGER NOT NULL,
        interval_ms INTEGER NOT NULL,
        review_count INTEGER NOT NULL DEFAULT 0,
        ease_factor REAL NOT NULL DEFAULT 2.5,
        stability_days REAL NOT NULL DEFAULT 1.0,
        last_reviewed_at INTEGER
    )""",
    """CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY,
        started_at INTEGER NOT NULL,
        last_active_at INTEGER NOT NULL,
        turn_number INTEGER NOT NULL DEFAULT 0,
        active_agents TEXT NOT NULL DEFAULT '[]',
        scratchpad_state TEXT NOT NULL DEFAULT '[]',
        metadata TEXT NOT NULL DEFAULT '{}',
        is_active INTEGER NOT NULL DEFAULT 1,
        pending_compaction INTEGER NOT NULL DEFAULT 0,
        ended_at INTEGER
    )""",
    """CREATE TABLE session_transcripts (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        turn_number INTEGER NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        timestamp INTEGER NOT NULL
    )""",
    """CREATE TABLE promotion_log (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        memory_id TEXT NOT NULL,
        from_tier TEXT NOT NULL,
        to_tier TEXT NOT NULL,
        promoted_at INTEGER NOT NULL,
        reason TEXT
    )""",
    # The fifteen indexes of the reference design.
    "CREATE INDEX idx_scratchpad_key ON scratchpad(key)",
    "CREATE INDEX idx_scratchpad_updated ON scratchpad(updated_at)",
    "CREATE INDEX idx_episodic_session ON episodic(session_id)",
    "CREATE INDEX idx_episodic_created ON episodic(created_at)",
    "CREATE INDEX idx_episodic_updated ON episodic(updated_at)",
    "CREATE INDEX idx_semantic_category ON semantic(category)",
    "CREATE INDEX idx_semantic_created ON semantic(created_at)",
    "CREATE INDEX idx_semantic_updated ON semantic(updated_at)",
    "CREATE INDEX idx_sessions_active ON sessions(is_active)",
    "CREATE INDEX idx_sessions_last_active ON sessions(last_active_at)",
    "CREATE INDEX idx_transcripts_session ON session_transcripts(session_id)",
    "CREATE INDEX idx_transcripts_timestamp ON session_transcripts(timestamp)",
    "CREATE INDEX idx_promotion_memory ON promotion_log(memory_id)",
    "CREATE INDEX idx_promotion_time ON promotion_log(promoted_at)",
    "CREATE INDEX idx_repetition_review ON repetition_schedules(next_review_at)",
    # Ours: the filters QueryOptions declares get an index each.
    "CREATE INDEX idx_episodic_agent ON episodic(agent_id)",
    "CREATE INDEX idx_semantic_agent ON semantic(agent_id)",
    "CREATE INDEX idx_semantic_session ON semantic(session_id)",
    "CREATE INDEX idx_episodic_category ON episodic(category)",
    "CREATE INDEX idx_memory_tags_tag ON memory_tags(tag, memory_id)",
]


def up(conn: apsw.Connection) -> None:
    """Create the version-1 schema (the runner supplies the transaction)."""
    for statement in _STATEMENTS:
        conn.execute(statement)

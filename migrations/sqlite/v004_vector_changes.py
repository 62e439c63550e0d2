"""Version 4: a log of embedding changes and a cache of computed embeddings.

``vector_changes`` gets one row (by trigger, in the writing transaction) whenever a
memory gains, changes or loses its embedding, so an in-RAM copy of the vector index, in
this process or another, can catch up by reading only what changed since it last
looked. It is trimmed by trigger to about the last ``LOG_WINDOW`` changes; a reader that
fell further behind reloads. ``embedding_cache`` keeps embeddings by (model, content
hash) so identical text is embedded once.
"""

from __future__ import annotations

import apsw

VERSION = 4
DESCRIPTION = "vector change log and embedding cache"

TIERS = ("scratchpad", "episodic", "semantic")
LOG_WINDOW = 65_536
_TRIM_EVERY = 1_024


def _triggers(tier: str) -> list[str]:
    log = "INSERT INTO vector_changes (memory_id) VALUES ({}.id)"
    return [
        f"""CREATE TRIGGER {tier}_vector_log_insert AFTER INSERT ON {tier}
            WHEN NEW.embedding IS NOT NULL BEGIN {log.format("NEW")}; END""",
        f"""CREATE TRIGGER {tier}_vector_log_delete AFTER DELETE ON {tier}
            WHEN OLD.embedding IS NOT NULL BEGIN {log.format("OLD")}; END""",
        f"""CREATE TRIGGER {tier}_vector_log_update AFTER UPDATE OF embedding ON {tier}
            WHEN OLD.embedding IS NOT NEW.embedding BEGIN {log.format("NEW")}; END""",
    ]


def up(conn: apsw.Connection) -> None:
    """Create the change log (with its triggers) and the embedding cache."""
    conn.execute(
        "CREATE TABLE vector_changes ("
        "seq INTEGER PRIMARY KEY AUTOINCREMENT, memory_id TEXT NOT NULL)"
    )
    conn.execute(
        f"""CREATE TRIGGER vector_changes_trim AFTER INSERT ON vector_changes
            WHEN NEW.seq % {_TRIM_EVERY} = 0 BEGIN
            DELETE FROM vector_changes WHERE seq <= NEW.seq - {LOG_WINDOW};
        END"""
    )
    for tier in TIERS:
        for statement in _triggers(tier):
            conn.execute(statement)
    conn.execute(
        """CREATE TABLE embedding_cache (
            model_id TEXT NOT NULL,
            content_hash BLOB NOT NULL,
            embedding BLOB NOT NULL,
            used_at INTEGER NOT NULL,
            PRIMARY KEY (model_id, content_hash)
        ) WITHOUT ROWID"""
    )
    conn.execute("CREATE INDEX idx_embedding_cache_used ON embedding_cache(used_at)")

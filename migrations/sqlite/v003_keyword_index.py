"""Version 3: the keyword index (FTS5) over all three tiers, kept in step by triggers.

``memory_index`` gives every memory a stable integer rowid for FTS5; ``memory_fts`` is a
contentless-delete FTS5 table (porter, unicode61): the text stays in the tier tables
only. Triggers update both inside the same transaction as the tier write. Partial
indexes find memories still waiting for an embedding. Existing rows are indexed here.
"""

from __future__ import annotations

import apsw

VERSION = 3
DESCRIPTION = "keyword index: memory_index, memory_fts and their triggers"

TIERS = ("scratchpad", "episodic", "semantic")


def _triggers(tier: str) -> list[str]:
    rowid = "(SELECT rowid FROM memory_index WHERE memory_id = {}.id)"
    return [
        f"""CREATE TRIGGER {tier}_keyword_insert AFTER INSERT ON {tier} BEGIN
            INSERT INTO memory_index (memory_id, tier) VALUES (NEW.id, '{tier}');
            INSERT INTO memory_fts (rowid, content) VALUES ({rowid.format("NEW")}, NEW.content);
        END""",
        f"""CREATE TRIGGER {tier}_keyword_delete AFTER DELETE ON {tier} BEGIN
            DELETE FROM memory_fts WHERE rowid = {rowid.format("OLD")};
            DELETE FROM memory_index WHERE memory_id = OLD.id;
        END""",
        f"""CREATE TRIGGER {tier}_keyword_update AFTER UPDATE OF content ON {tier} BEGIN
            DELETE FROM memory_fts WHERE rowid = {rowid.format("NEW")};
            INSERT INTO memory_fts (rowid, content) VALUES ({rowid.format("NEW")}, NEW.content);
        END""",
        f"CREATE INDEX idx_{tier}_unembedded ON {tier}(id) WHERE embedding IS NULL",
    ]


def up(conn: apsw.Connection) -> None:
    """Create the keyword index and fill it from the rows already there."""
    conn.execute(
        """CREATE TABLE memory_index (
            rowid INTEGER PRIMARY KEY,
            memory_id TEXT NOT NULL UNIQUE,
            tier TEXT NOT NULL
        )"""
    )
    conn.execute(
        "CREATE VIRTUAL TABLE memory_fts USING fts5("
        "content, content='', contentless_delete=1, tokenize='porter unicode61')"
    )
    for tier in TIERS:
        conn.execute(f"INSERT INTO memory_index (memory_id, tier) SELECT id, '{tier}' FROM {tier}")
        conn.execute(
            f"INSERT INTO memory_fts (rowid, content) SELECT i.rowid, t.content "
            f"FROM {tier} AS t JOIN memory_index AS i ON i.memory_id = t.id"
        )
        for statement in _triggers(tier):
            conn.execute(statement)

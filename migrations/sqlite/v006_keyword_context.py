"""Version 6: the keyword index also holds each memory's conversational context.

A turn such as "Yes, last week!" means little alone; the turn before it in the same
session says what it answers. ``memory_fts`` gets a second column, ``context``: the
content of the previous memory of the same session and tier (insertion order), which
recall weighs lower than the memory's own words. Triggers keep it exact: inserting,
editing, moving or deleting a memory also rewrites the index row of the memory after
it, so a forgotten memory's words never stay behind in a neighbour's context.
"""

from __future__ import annotations

import apsw

VERSION = 6
DESCRIPTION = "keyword index: context column (previous memory of the same session)"

TIERS = ("scratchpad", "episodic", "semantic")


def _previous(tier: str, session: str, row: str) -> str:
    """The content of the memory before ``row`` in ``session`` (NULL if none)."""
    return (
        f"(SELECT p.content FROM {tier} AS p WHERE p.session_id = {session} "
        f"AND p.rowid < {row} ORDER BY p.rowid DESC LIMIT 1)"
    )


def _refresh_next(tier: str, session: str, row: str, context: str) -> str:
    """Re-index the memory after ``row`` in ``session`` with ``context``."""
    following = (
        f"FROM {tier} AS n JOIN memory_index AS i ON i.memory_id = n.id "
        f"WHERE n.session_id = {session} AND n.rowid > {row} ORDER BY n.rowid LIMIT 1"
    )
    return (
        f"DELETE FROM memory_fts WHERE rowid = (SELECT i.rowid {following}); "
        f"INSERT INTO memory_fts (rowid, content, context) "
        f"SELECT i.rowid, n.content, {context} {following}"
    )


def _triggers(tier: str) -> list[str]:
    own = "(SELECT rowid FROM memory_index WHERE memory_id = {}.id)"
    return [
        f"""CREATE TRIGGER {tier}_keyword_insert AFTER INSERT ON {tier} BEGIN
            INSERT INTO memory_index (memory_id, tier) VALUES (NEW.id, '{tier}');
            INSERT INTO memory_fts (rowid, content, context) VALUES ({own.format("NEW")},
                NEW.content, {_previous(tier, "NEW.session_id", "NEW.rowid")});
            {_refresh_next(tier, "NEW.session_id", "NEW.rowid", "NEW.content")};
        END""",
        f"""CREATE TRIGGER {tier}_keyword_delete AFTER DELETE ON {tier} BEGIN
            DELETE FROM memory_fts WHERE rowid = {own.format("OLD")};
            DELETE FROM memory_index WHERE memory_id = OLD.id;
            {
            _refresh_next(
                tier, "OLD.session_id", "OLD.rowid", _previous(tier, "OLD.session_id", "OLD.rowid")
            )
        };
        END""",
        f"""CREATE TRIGGER {tier}_keyword_update AFTER UPDATE OF content, session_id ON {tier}
            WHEN OLD.content IS NOT NEW.content OR OLD.session_id IS NOT NEW.session_id BEGIN
            DELETE FROM memory_fts WHERE rowid = {own.format("NEW")};
            INSERT INTO memory_fts (rowid, content, context) VALUES ({own.format("NEW")},
                NEW.content, {_previous(tier, "NEW.session_id", "NEW.rowid")});
            {
            _refresh_next(
                tier, "OLD.session_id", "OLD.rowid", _previous(tier, "OLD.session_id", "OLD.rowid")
            )
        };
            {_refresh_next(tier, "NEW.session_id", "NEW.rowid", "NEW.content")};
        END""",
    ]


def up(conn: apsw.Connection) -> None:
    """Rebuild the keyword index with the context column and its triggers."""
    for tier in TIERS:
        for event in ("insert", "delete", "update"):
            conn.execute(f"DROP TRIGGER {tier}_keyword_{event}")
    conn.execute("DROP TABLE memory_fts")
    conn.execute(
        "CREATE VIRTUAL TABLE memory_fts USING fts5(content, context, content='', "
        "contentless_delete=1, tokenize='porter unicode61')"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS idx_scratchpad_session ON scratchpad(session_id)")
    for tier in TIERS:
        conn.execute(
            f"""INSERT INTO memory_fts (rowid, content, context)
            SELECT i.rowid, t.content, CASE WHEN t.session_id IS NULL THEN NULL ELSE
                LAG(t.content) OVER (PARTITION BY t.session_id ORDER BY t.rowid) END
            FROM {tier} AS t JOIN memory_index AS i ON i.memory_id = t.id"""
        )
        for statement in _triggers(tier):
            conn.execute(statement)

"""Version 7: the keyword index holds a window of conversation around each memory.

Version 6 indexed the previous memory of the same session as ``context``. On LoCoMo a
wider window finds more of the turns that hold an answer: ``context`` now holds the two
previous memories of the same session and tier (insertion order) and a new column,
``after``, the two next ones. Recall weighs both lower than a memory's own words.

Triggers keep the window exact: inserting, editing, moving or deleting a memory also
re-indexes the two memories before and the two after it, in its old and its new session,
so a forgotten memory's words never stay behind in a neighbour's window.
"""

from __future__ import annotations

import apsw

VERSION = 7
DESCRIPTION = "keyword index: two memories before (context) and after (after) in the session"

TIERS = ("scratchpad", "episodic", "semantic")
WINDOW = 2


def _window_text(tier: str, row: str, before: bool) -> str:
    """The contents of the ``WINDOW`` memories before (or after) ``row``, a row alias of
    ``tier`` with ``session_id`` and ``rowid``, one per line; NULL without a session."""
    compare, order = ("<", "DESC") if before else (">", "")
    parts = [
        f"coalesce((SELECT w.content FROM {tier} AS w WHERE w.session_id = {row}.session_id "
        f"AND w.rowid {compare} {row}.rowid ORDER BY w.rowid {order} LIMIT 1 OFFSET {offset}), '')"
        for offset in range(WINDOW)
    ]
    return f"CASE WHEN {row}.session_id IS NULL THEN NULL ELSE {' || char(10) || '.join(parts)} END"


def _index_rows(tier: str, rowids: str) -> str:
    """Insert the keyword rows of the memories of ``tier`` whose rowids ``rowids`` (a
    SELECT of one column ``r``) yields. The lookup is driven from those rowids, so it is a
    primary-key search whatever the planner's statistics say."""
    return (
        "INSERT INTO memory_fts (rowid, content, context, after) "
        f"SELECT i.rowid, t.content, {_window_text(tier, 't', True)}, "
        f"{_window_text(tier, 't', False)} "
        f"FROM ({rowids}) AS n CROSS JOIN {tier} AS t ON t.rowid = n.r "
        "JOIN memory_index AS i ON i.memory_id = t.id"
    )


def neighbours(tier: str, session: str, row: str) -> str:
    """A SELECT of the rowids ``r`` of the ``WINDOW`` memories on each side of position
    ``row`` in ``session`` of ``tier`` (both SQL expressions)."""
    side = (
        "SELECT r FROM (SELECT rowid AS r FROM {tier} WHERE session_id = {session} "
        "AND rowid {compare} {row} ORDER BY rowid {order} LIMIT {window})"
    )
    return " UNION ALL ".join(
        side.format(
            tier=tier, session=session, row=row, compare=compare, order=order, window=WINDOW
        )
        for compare, order in (("<", "DESC"), (">", "ASC"))
    )


def reindex_around(tier: str, session: str, row: str) -> str:
    """Re-index the ``WINDOW`` memories on each side of position ``row`` in ``session``."""
    near = neighbours(tier, session, row)
    return (
        "DELETE FROM memory_fts WHERE rowid IN (SELECT i.rowid FROM "
        f"({near}) AS n CROSS JOIN {tier} AS t ON t.rowid = n.r "
        "JOIN memory_index AS i ON i.memory_id = t.id); "
        f"{_index_rows(tier, near)}"
    )


def _triggers(tier: str) -> list[str]:
    own = "(SELECT rowid FROM memory_index WHERE memory_id = {}.id)"
    return [
        f"""CREATE TRIGGER {tier}_keyword_insert AFTER INSERT ON {tier} BEGIN
            INSERT INTO memory_index (memory_id, tier) VALUES (NEW.id, '{tier}');
            {_index_rows(tier, "SELECT NEW.rowid AS r")};
            {reindex_around(tier, "NEW.session_id", "NEW.rowid")};
        END""",
        f"""CREATE TRIGGER {tier}_keyword_delete AFTER DELETE ON {tier} BEGIN
            DELETE FROM memory_fts WHERE rowid = {own.format("OLD")};
            DELETE FROM memory_index WHERE memory_id = OLD.id;
            {reindex_around(tier, "OLD.session_id", "OLD.rowid")};
        END""",
        f"""CREATE TRIGGER {tier}_keyword_update AFTER UPDATE OF content, session_id ON {tier}
            WHEN OLD.content IS NOT NEW.content OR OLD.session_id IS NOT NEW.session_id BEGIN
            DELETE FROM memory_fts WHERE rowid = {own.format("NEW")};
            {_index_rows(tier, "SELECT NEW.rowid AS r")};
            {reindex_around(tier, "OLD.session_id", "OLD.rowid")};
            {reindex_around(tier, "NEW.session_id", "NEW.rowid")};
        END""",
    ]


def fill(conn: apsw.Connection, tier: str) -> None:
    """Index every memory of ``tier`` (already in ``memory_index``), set-based."""
    window = "OVER (PARTITION BY t.session_id ORDER BY t.rowid)"

    def side(function: str) -> str:
        parts = [f"coalesce({function}(t.content, {n}) {window}, '')" for n in range(1, WINDOW + 1)]
        return f"CASE WHEN t.session_id IS NULL THEN NULL ELSE {' || char(10) || '.join(parts)} END"

    # In rowid order: FTS5 flushes a segment whenever a rowid is lower than the previous
    # one, and the window comes out in session order (2.3x slower at 100k memories).
    conn.execute(
        f"""INSERT INTO memory_fts (rowid, content, context, after)
        SELECT i.rowid, t.content, {side("LAG")}, {side("LEAD")}
        FROM {tier} AS t JOIN memory_index AS i ON i.memory_id = t.id ORDER BY i.rowid"""
    )


def up(conn: apsw.Connection) -> None:
    """Rebuild the keyword index with the window columns and its triggers."""
    for tier in TIERS:
        for event in ("insert", "delete", "update"):
            conn.execute(f"DROP TRIGGER {tier}_keyword_{event}")
    conn.execute("DROP TABLE memory_fts")
    conn.execute(
        "CREATE VIRTUAL TABLE memory_fts USING fts5(content, context, after, content='', "
        "contentless_delete=1, tokenize='porter unicode61')"
    )
    for tier in TIERS:
        fill(conn, tier)
        for statement in _triggers(tier):
            conn.execute(statement)

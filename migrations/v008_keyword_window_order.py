"""Version 8: the keyword window is re-indexed once per transaction, in rowid order.

Version 7's triggers re-indexed a memory's neighbours inside every write, new memory
first. FTS5 keeps new rows in RAM only while their rowids increase: a lower rowid
flushes everything pending as a new segment. So a ``remember()`` wrote three segments,
a transaction of many ``remember()`` calls in interleaved sessions one or more per
call, and merging all those segments made writes slower as the file grew (mean 1.8 ms
at 2k memories, 8.8 ms at 14k) and batches slow (about 2,000 memories/s).

Now the triggers only note which memories need re-indexing (``keyword_dirty``: the
memory written and the two before and after it in its session, in its old and new
place); the store re-indexes them all in one statement, in rowid order, just before the
transaction commits (and before a keyword search inside the transaction). A committed
file never holds a ``keyword_dirty`` row, so every reader sees an exact index. A
deleted memory's own keyword row still goes at once, in its trigger.

Whoever writes the tier tables without the store (a later migration, say) must work
the table off (:func:`work_off`) in the same transaction.
"""

from __future__ import annotations

import apsw

from migrations.v007_keyword_window import TIERS, WINDOW
from migrations.v007_keyword_window import _window_text as window_text

VERSION = 8
DESCRIPTION = "keyword window re-indexed once per transaction, in rowid order (keyword_dirty)"


def neighbours(tier: str, session: str, row: str) -> str:
    """A SELECT of the rowids ``r`` of the ``WINDOW`` memories on each side of position
    ``row`` in ``session`` of ``tier`` (both SQL expressions; none without a session)."""
    side = (
        "SELECT r FROM (SELECT rowid AS r FROM {tier} WHERE session_id = {session} "
        "AND rowid {compare} {row} ORDER BY rowid {order} LIMIT {window})"
    )
    sides = " UNION ALL ".join(
        side.format(
            tier=tier, session=session, row=row, compare=compare, order=order, window=WINDOW
        )
        for compare, order in (("<", "DESC"), (">", "ASC"))
    )
    return f"SELECT r FROM ({sides})"


def _mark(tier: str, rowids: str) -> str:
    """Note the memories of ``tier`` whose rowids ``rowids`` yields (each once) as needing
    re-indexing. Not ``OR IGNORE``: an upsert's conflict clause overrides a trigger's."""
    return (
        f"INSERT INTO keyword_dirty (tier, r) SELECT '{tier}', n.r FROM ({rowids}) AS n "
        f"WHERE NOT EXISTS (SELECT 1 FROM keyword_dirty AS k WHERE k.tier = '{tier}' "
        "AND k.r = n.r)"
    )


def triggers(tier: str) -> list[str]:
    """The three triggers that keep ``memory_index`` and ``keyword_dirty`` in step."""
    new_near = neighbours(tier, "NEW.session_id", "NEW.rowid")
    old_near = neighbours(tier, "OLD.session_id", "OLD.rowid")
    own = "(SELECT rowid FROM memory_index WHERE memory_id = OLD.id)"
    return [
        f"""CREATE TRIGGER {tier}_keyword_insert AFTER INSERT ON {tier} BEGIN
            INSERT INTO memory_index (memory_id, tier) VALUES (NEW.id, '{tier}');
            {_mark(tier, f"SELECT NEW.rowid AS r UNION ALL {new_near}")};
        END""",
        f"""CREATE TRIGGER {tier}_keyword_delete AFTER DELETE ON {tier} BEGIN
            DELETE FROM memory_fts WHERE rowid = {own};
            DELETE FROM memory_index WHERE memory_id = OLD.id;
            {_mark(tier, old_near)};
        END""",
        f"""CREATE TRIGGER {tier}_keyword_update AFTER UPDATE OF content, session_id ON {tier}
            WHEN OLD.content IS NOT NEW.content OR OLD.session_id IS NOT NEW.session_id BEGIN
            {_mark(tier, f"SELECT NEW.rowid AS r UNION {old_near} UNION {new_near}")};
        END""",
    ]


def work_off_statements() -> list[str]:
    """Re-index every memory ``keyword_dirty`` names, then empty it: delete their keyword
    rows (a memory new in this transaction has none), insert them all in one statement in
    the index's rowid order (one FTS5 segment), driven from the dirty rows' keys."""
    deletes = [
        "DELETE FROM memory_fts WHERE rowid IN (SELECT i.rowid FROM keyword_dirty AS d "
        f"CROSS JOIN {tier} AS t ON t.rowid = d.r JOIN memory_index AS i ON i.memory_id = t.id "
        f"WHERE d.tier = '{tier}')"
        for tier in TIERS
    ]
    rows = " UNION ALL ".join(
        f"SELECT i.rowid AS rowid, t.content AS content, {window_text(tier, 't', True)} AS "
        f"context, {window_text(tier, 't', False)} AS after FROM keyword_dirty AS d "
        f"CROSS JOIN {tier} AS t ON t.rowid = d.r JOIN memory_index AS i ON i.memory_id = t.id "
        f"WHERE d.tier = '{tier}'"
        for tier in TIERS
    )
    insert = (
        "INSERT INTO memory_fts (rowid, content, context, after) "
        f"SELECT rowid, content, context, after FROM ({rows}) ORDER BY rowid"
    )
    return [*deletes, insert, "DELETE FROM keyword_dirty"]


WORK_OFF = work_off_statements()


def work_off(conn: apsw.Connection) -> bool:
    """Bring the keyword index up to date inside the caller's transaction; True if there
    was anything to do."""
    if conn.execute("SELECT 1 FROM keyword_dirty LIMIT 1").fetchone() is None:
        return False
    for statement in WORK_OFF:
        conn.execute(statement)
    return True


def up(conn: apsw.Connection) -> None:
    """Create ``keyword_dirty`` and replace the keyword triggers (the index is unchanged)."""
    conn.execute(
        "CREATE TABLE keyword_dirty (tier TEXT NOT NULL, r INTEGER NOT NULL, "
        "PRIMARY KEY (tier, r)) WITHOUT ROWID"
    )
    for tier in TIERS:
        for event in ("insert", "delete", "update"):
            conn.execute(f"DROP TRIGGER {tier}_keyword_{event}")
        for statement in triggers(tier):
            conn.execute(statement)

"""Version 8: the keyword window is re-indexed once per transaction, in rowid order.

Version 7's triggers re-indexed a memory's neighbours inside every write, new memory
first. FTS5 keeps new rows in RAM only while their rowids increase: a lower rowid
flushes everything pending as a new segment. So a ``remember()`` wrote three segments,
a transaction of many ``remember()`` calls in interleaved sessions one or more per
call, and merging all those segments made writes slower as the file grew (mean 1.8 ms
at 2k memories, 8.8 ms at 14k) and batches slow (about 2,000 memories/s).

Now the triggers only note what changed (``keyword_dirty``: the place of each memory
written, deleted or moved, with its session); just before the transaction commits (and
before a keyword search inside it) the store re-indexes those memories and the two
before and after each place, set-based, each once, in rowid order. A committed file
never holds a ``keyword_dirty`` row, so every reader sees an exact index. A deleted
memory's own keyword row still goes at once, in its trigger.

Whoever writes the tier tables without the store (a later migration, say) must work
the table off (:func:`work_off`) in the same transaction.
"""

from __future__ import annotations

import apsw

from migrations.sqlite.v007_keyword_window import TIERS, WINDOW
from migrations.sqlite.v007_keyword_window import _window_text as window_text

VERSION = 8
DESCRIPTION = "keyword window re-indexed once per transaction, in rowid order (keyword_dirty)"


def neighbour(tier: str, changed: str, offset: int, before: bool) -> str:
    """The rowid of the memory ``offset + 1`` places before (or after) position
    ``{changed}.r`` in session ``{changed}.session_id`` of ``tier`` (NULL if none)."""
    compare, order = ("<", "DESC") if before else (">", "ASC")
    return (
        f"(SELECT w.rowid FROM {tier} AS w WHERE w.session_id = {changed}.session_id "
        f"AND w.rowid {compare} {changed}.r ORDER BY w.rowid {order} LIMIT 1 OFFSET {offset})"
    )


def _note(tier: str, row: str) -> str:
    """Record that the memory at ``row`` (``NEW`` or ``OLD``) of ``tier`` changed."""
    return (
        f"INSERT INTO keyword_dirty (tier, r, session_id) "
        f"VALUES ('{tier}', {row}.rowid, {row}.session_id)"
    )


def triggers(tier: str) -> list[str]:
    """The three triggers that keep ``memory_index`` and ``keyword_dirty`` in step."""
    own = "(SELECT rowid FROM memory_index WHERE memory_id = OLD.id)"
    return [
        f"""CREATE TRIGGER {tier}_keyword_insert AFTER INSERT ON {tier} BEGIN
            INSERT INTO memory_index (memory_id, tier) VALUES (NEW.id, '{tier}');
            {_note(tier, "NEW")};
        END""",
        f"""CREATE TRIGGER {tier}_keyword_delete AFTER DELETE ON {tier} BEGIN
            DELETE FROM memory_fts WHERE rowid = {own};
            DELETE FROM memory_index WHERE memory_id = OLD.id;
            {_note(tier, "OLD")};
        END""",
        f"""CREATE TRIGGER {tier}_keyword_update AFTER UPDATE OF content, session_id ON {tier}
            WHEN OLD.content IS NOT NEW.content OR OLD.session_id IS NOT NEW.session_id BEGIN
            {_note(tier, "OLD")};
            {_note(tier, "NEW")};
        END""",
    ]


def work_off_statements() -> list[str]:
    """Re-index what ``keyword_dirty`` records, then empty it.

    Each row there is a memory written, or the place a memory left (deleted, moved
    away). Re-indexed are the memories at those rowids that still exist, and the
    ``WINDOW`` memories on each side of each place in its session now: every memory
    whose window changed is among them. Their keyword rows are deleted (a memory new in
    this transaction has none) and inserted again with one statement in the index's
    rowid order (one FTS5 segment), each once, driven from the recorded keys.
    """
    expand = " UNION ALL ".join(
        f"SELECT '{tier}' AS tier, {neighbour(tier, 'c', offset, before)} AS r "
        "FROM keyword_dirty AS c "
        f"WHERE c.tier = '{tier}' AND c.session_id IS NOT NULL"
        for tier in TIERS
        for before in (True, False)
        for offset in range(WINDOW)
    )
    expansion = (
        f"INSERT INTO keyword_dirty (tier, r) SELECT x.tier, x.r FROM ({expand}) AS x "
        "WHERE x.r IS NOT NULL"
    )

    def affected(tier: str) -> str:
        return (
            f"(SELECT DISTINCT r FROM keyword_dirty WHERE tier = '{tier}') AS d "
            f"CROSS JOIN {tier} AS t ON t.rowid = d.r JOIN memory_index AS i ON i.memory_id = t.id"
        )

    deletes = [
        f"DELETE FROM memory_fts WHERE rowid IN (SELECT i.rowid FROM {affected(tier)})"
        for tier in TIERS
    ]
    rows = " UNION ALL ".join(
        f"SELECT i.rowid AS rowid, t.content AS content, {window_text(tier, 't', True)} AS "
        f"context, {window_text(tier, 't', False)} AS after FROM {affected(tier)}"
        for tier in TIERS
    )
    insert = (
        "INSERT INTO memory_fts (rowid, content, context, after) "
        f"SELECT rowid, content, context, after FROM ({rows}) ORDER BY rowid"
    )
    return [expansion, *deletes, insert, "DELETE FROM keyword_dirty"]


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
        "CREATE TABLE keyword_dirty (tier TEXT NOT NULL, r INTEGER NOT NULL, session_id TEXT)"
    )
    for tier in TIERS:
        for event in ("insert", "delete", "update"):
            conn.execute(f"DROP TRIGGER {tier}_keyword_{event}")
        for statement in triggers(tier):
            conn.execute(statement)

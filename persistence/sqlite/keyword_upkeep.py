"""Keeping the keyword index (``memory_fts``) up to date: the steps
:mod:`persistence.sqlite.keyword_index` (the policy: when) and
:mod:`persistence.sqlite.bulk_index` take, running the statements
:mod:`~persistence.sqlite.sql.index_sql` and
:mod:`~persistence.sqlite.sql.keyword_window_sql` build."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from persistence.sqlite.sql import index_sql, keyword_window_sql
from persistence.statements import row, rows, run, run_all

BATCH_ROWS = 256
"""A transaction that leaves this many memories to re-index is a batch: its keyword rows
are written with FTS5's automerge off (see :func:`update_keyword_index`)."""

MERGE_PAGES = 64
"""Pages of keyword-index merge work per background step (a few milliseconds)."""


def defers_keyword_index(conn: apsw.Connection) -> bool:
    """True if the file's triggers leave keyword re-indexing to commit (schema 8 on)."""
    return row(conn, index_sql.KEYWORD_DIRTY_TABLE) is not None


def keyword_index_behind(conn: apsw.Connection) -> bool:
    """True if some memory waits for re-indexing (only a writer that bypassed the store
    can commit that)."""
    return row(conn, index_sql.KEYWORD_BEHIND) is not None


def fill_keyword_index(conn: apsw.Connection) -> None:
    """Rebuild ``memory_index`` and ``memory_fts`` (content and the window around it) from
    the tier tables, from scratch. The index triggers must be off meanwhile."""
    run_all(conn, index_sql.fill_keyword_index(defers_keyword_index(conn)))


def work_off_keyword_dirty(conn: apsw.Connection) -> bool:
    """Bring the keyword index up to date inside the caller's transaction; True if there
    was anything to do."""
    dirty = frozenset(found[0] for found in rows(conn, keyword_window_sql.DIRTY_TIERS))
    if not dirty:
        return False
    run_all(conn, keyword_window_sql.work_off(dirty))
    return True


def update_keyword_index(
    conn: apsw.Connection, counts: Sequence[Sequence[Any]] | None = None
) -> bool:
    """Re-index the memories this transaction's writes left waiting (``keyword_dirty``):
    each once, in one statement, in rowid order. The store calls it before every commit
    and before reading the keyword index inside a transaction. True if there were any.

    A batch is written with FTS5's ``automerge`` off, set back before the commit: FTS5
    flushes a large insert in several segments and would pay, inside the batch, for
    merging what came before (half the keyword time of a 10,000-record
    ``remember_many`` into 100k memories); those merges are left to the background
    thread's idle merges (persistence/sqlite/keyword_index.py) or to later commits. ``counts``:
    the rows of :data:`~persistence.sqlite.sql.index_sql.DIRTY_COUNTS`, looked up
    already. When none of the rows is in a session, no neighbour's keyword window
    changed: the neighbours are not looked for.
    """
    if counts is None:
        counts = rows(conn, index_sql.DIRTY_COUNTS)  # which tiers, and a batch? One look
    if not counts:
        return False
    if len(counts) == 1:  # one tier (remember()): no generators
        tier, waiting, in_sessions = counts[0]
        dirty, total, sessions = frozenset((str(tier),)), int(waiting or 0), bool(in_sessions)
    else:
        dirty = frozenset(str(tier) for tier, _, _ in counts)
        total = sum(int(n or 0) for _, n, _ in counts)
        sessions = any(in_sessions for _, _, in_sessions in counts)
    work = keyword_window_sql.work_off(dirty, sessions)
    if total < BATCH_ROWS:
        run_all(conn, work)
        return True
    setting = row(conn, index_sql.AUTOMERGE)
    run(conn, index_sql.set_automerge(0))
    try:
        run_all(conn, work)
        return True
    finally:
        run(conn, index_sql.set_automerge(4 if setting is None else int(setting[0])))


def merge_keyword_step(conn: apsw.Connection, pages: int = MERGE_PAGES) -> bool:
    """One step of merging the keyword index's segments, in a transaction of its own
    (``BEGIN IMMEDIATE``: ``apsw.BusyError`` when a writer holds the lock); True if it
    merged something (FTS5 adds to ``total_changes`` beyond the command's own one only
    then). It merges a level that holds four segments, as FTS5's automerge does inside
    commits; done while the writer rests, it leaves commits' automerge little to do
    (the bursts of up to hundreds of pages that made the write tail)."""
    if row(conn, index_sql.HAS_KEYWORD_INDEX) is None:
        return False
    # Transaction control, and APSW's change counter: engine machinery, not the index's SQL.
    conn.execute("BEGIN IMMEDIATE")
    try:
        before = conn.total_changes()
        run(conn, index_sql.merge_step(pages))
        merged = conn.total_changes() - before > 1  # the INSERT itself counts one
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return merged

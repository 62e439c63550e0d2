"""The keyword window's SQL: fill, re-index and work off ``keyword_dirty`` (every
commit); :mod:`persistence.sqlite.keyword_upkeep` runs it.

The tables and triggers these statements serve are created by the migrations only
(``migrations/sqlite/v007_keyword_window``, ``v008_keyword_window_order``); no copy of
their DDL is kept here (``tests/engines/sqlite/test_keyword_window_sql.py`` checks a new
file against the chain).
The statements are the runtime's own, not imported from the frozen modules: they have
moved on since v008 (one set per group of dirty tiers, the neighbour lookup skipped
without sessions, a window-function fill), and a frozen module never changes.

The keyword index (``memory_fts``) holds each memory's content, the ``WINDOW`` memories
before it in its session and tier (``context``) and the ``WINDOW`` after it (``after``).
Triggers only note what changed (``keyword_dirty``); :data:`WORK_OFF` re-indexes it once
per transaction, in rowid order (see migration v8 for why).
"""

from __future__ import annotations

from persistence.statements import Statement

TIERS = ("scratchpad", "episodic", "semantic")
WINDOW = 2


# --- keyword window -------------------------------------------------------------------


def window_text(tier: str, row: str, before: bool) -> str:
    """The contents of the ``WINDOW`` memories before (or after) ``row``, a row alias of
    ``tier`` with ``session_id`` and ``rowid``, one per line; NULL without a session."""
    compare, order = ("<", "DESC") if before else (">", "")
    parts = [
        f"coalesce((SELECT w.content FROM {tier} AS w WHERE w.session_id = {row}.session_id "
        f"AND w.rowid {compare} {row}.rowid ORDER BY w.rowid {order} LIMIT 1 OFFSET {offset}), '')"
        for offset in range(WINDOW)
    ]
    return f"CASE WHEN {row}.session_id IS NULL THEN NULL ELSE {' || char(10) || '.join(parts)} END"


def fill_keyword_window(tier: str) -> Statement:
    """Index every memory of ``tier`` (already in ``memory_index``), set-based."""
    window = "OVER (PARTITION BY t.session_id ORDER BY t.rowid)"

    def side(function: str) -> str:
        parts = [f"coalesce({function}(t.content, {n}) {window}, '')" for n in range(1, WINDOW + 1)]
        return f"CASE WHEN t.session_id IS NULL THEN NULL ELSE {' || char(10) || '.join(parts)} END"

    # In rowid order: FTS5 flushes a segment whenever a rowid is lower than the previous
    # one, and the window comes out in session order (2.3x slower at 100k memories).
    return Statement(
        f"""INSERT INTO memory_fts (rowid, content, context, after)
        SELECT i.rowid, t.content, {side("LAG")}, {side("LEAD")}
        FROM {tier} AS t JOIN memory_index AS i ON i.memory_id = t.id ORDER BY i.rowid"""
    )


def _neighbour(tier: str, changed: str, offset: int, before: bool) -> str:
    """The rowid of the memory ``offset + 1`` places before (or after) position
    ``{changed}.r`` in session ``{changed}.session_id`` of ``tier`` (NULL if none)."""
    compare, order = ("<", "DESC") if before else (">", "ASC")
    return (
        f"(SELECT w.rowid FROM {tier} AS w WHERE w.session_id = {changed}.session_id "
        f"AND w.rowid {compare} {changed}.r ORDER BY w.rowid {order} LIMIT 1 OFFSET {offset})"
    )


def _work_off_statements(tiers: tuple[str, ...] = TIERS) -> list[Statement]:
    """Re-index what ``keyword_dirty`` records for ``tiers``, then empty it.

    Each row there is a memory written, or the place a memory left (deleted, moved
    away). Re-indexed are the memories at those rowids that still exist, and the
    ``WINDOW`` memories on each side of each place in its session now: every memory
    whose window changed is among them. Their keyword rows are deleted and inserted
    again with one statement in the index's rowid order (one FTS5 segment), each once.
    Only the tiers named are visited: the expansion adds rows of a tier that already
    has some, so the caller passes the tiers ``keyword_dirty`` holds.
    """
    expand = " UNION ALL ".join(
        f"SELECT '{tier}' AS tier, {_neighbour(tier, 'c', offset, before)} AS r "
        "FROM keyword_dirty AS c "
        f"WHERE c.tier = '{tier}' AND c.session_id IS NOT NULL"
        for tier in tiers
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
        for tier in tiers
    ]
    rows = " UNION ALL ".join(
        f"SELECT i.rowid AS rowid, t.content AS content, {window_text(tier, 't', True)} AS "
        f"context, {window_text(tier, 't', False)} AS after FROM {affected(tier)}"
        for tier in tiers
    )
    insert = (
        "INSERT INTO memory_fts (rowid, content, context, after) "
        f"SELECT rowid, content, context, after FROM ({rows}) ORDER BY rowid"
    )
    texts = [expansion, *deletes, insert, "DELETE FROM keyword_dirty"]  # (expansion first)
    return [Statement(text) for text in texts]


WORK_OFF = _work_off_statements()
# The same work for each set of tiers that can be dirty, built once: a write to one tier
# (the common case) skips the other tiers' statements (a third of the commit's work each).
_WORK_OFF_FOR = {
    frozenset(tiers): _work_off_statements(tiers)
    for tiers in (
        tuple(t for n, t in enumerate(TIERS) if mask >> n & 1) for mask in range(1, 2 ** len(TIERS))
    )
}
DIRTY_TIERS = Statement("SELECT DISTINCT tier FROM keyword_dirty")
"""The tiers ``keyword_dirty`` holds rows of (one row each)."""


def work_off(dirty: frozenset[str], sessions: bool = True) -> list[Statement]:
    """Bring the keyword index up to date for the ``dirty`` tiers, inside the caller's
    transaction; ``sessions=False``: no dirty row has a session (then no neighbour's
    window changed, and the first statement, which adds the neighbours, would add none:
    it is left out)."""
    statements = _WORK_OFF_FOR.get(dirty, WORK_OFF)
    return statements if sessions else statements[1:]

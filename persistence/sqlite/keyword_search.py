"""The SQLite keyword search (FTS5 bm25): its steps, running the statements
:mod:`~persistence.sqlite.sql.index_sql` builds. A narrow filter is searched through the
rowids it accepts; a query whose words match very many rows leaves its commonest words
out of the ranking (:func:`bounded`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import apsw

from persistence.records import KeywordHits, KeywordParts, MemoryFilter, Tier
from persistence.sqlite.sql import index_sql
from persistence.sqlite.sql.index_sql import fts5_match, quoted
from persistence.statements import column, rows, stream, value
from persistence.stores.rows import index_backed
from persistence.stores.scope import WHOLE, Scope

NARROW_ROWS = 400
"""A filter that accepts at most this many memories is searched by their rowids: FTS5
seeks each one's row in every term's doclist (about 0.15 ms each at 100k memories)
instead of scoring every match in the file and checking it (300 ms at 1M memories for
a session of 50)."""

RANK_CAP = 20_000
"""No keyword query ranks more than this many matching memories, nor ranks a word
found in more (:func:`bounded`). FTS5's bm25 reads every row of each of the
expression's words once per query (for its weight: about 0.05 us a row) and scores each
match (about 1 us): a query with a word in a fifth of a million memories cost 50 ms or
more, one with several such words 200-400 ms. A file whose keyword rowids never went
past this (forgotten and rewritten memories' rows count) never takes the rule (a query
matches at most every row), so small files rank exactly as before."""

CURRENT_DEPTH = 2
"""A search for current memories first ranks this many times ``limit`` of the best
matching rows inside FTS5 (as a search without a filter does) and checks only those; if
fewer than ``limit`` are current, every match is checked (at 100k memories, 30% of them
superseded, checking every match took the keyword leg from 8 to 16-19 ms)."""


def narrow_rowids(conn: apsw.Connection, where: MemoryFilter, cap: int) -> list[int] | None:
    """The keyword-index rowids of the memories ``where`` accepts, when an index finds
    them (a session, agent, tag or time range is set) and there are at most ``cap``;
    else ``None``."""
    if not index_backed(where):
        return None
    tiers = list(Tier) if where.tier is None else [where.tier]
    found: list[int] = []
    for tier in tiers:
        found += map(int, column(conn, index_sql.narrow_rowids(where, tier, cap + 1 - len(found))))
        if len(found) > cap:
            return None
    return found


def _matches(conn: apsw.Connection, match: str, cap: int) -> int:
    return int(value(conn, index_sql.matches(match, cap)))


@dataclass(frozen=True, slots=True)
class Bounded:
    """What a query bounded by :func:`bounded` ranks: the FTS5 expression, the lowest
    keyword rowid ranked (``None``: every match; else the newest matches alone), and
    the sentence for recall's explanation that says what was left out."""

    match: str
    newest_from: int | None
    skipped: str
    matches: int
    """How many rows ``match`` covers at most (the kept words' counts summed; ``cap``
    among the newest): fewer found means a filter turned some away."""


def bounded(conn: apsw.Connection, words: Sequence[str], cap: int = RANK_CAP) -> Bounded | None:
    """The bounded search for ``words`` when ranking all their matches would rank more
    than ``cap`` rows; else ``None`` (rank them all).

    The rarest words are kept while together they match at most ``cap`` rows; the words
    after them (the commonest) are left out of the ranking, as a search engine's
    document-frequency cut-off does: a word in that many memories weighs little in bm25
    (at most ``log(file / cap)``; nothing past half the file) and costs a read of all
    its rows. If every word matches more than ``cap`` rows, the one whose newest ``cap``
    matches reach back furthest (the rarest of late) alone is ranked, among those
    matches. Each word's rows are counted up to ``cap + 1``, or walked newest first to
    the ``cap``-th (no scoring), and only in a file whose keyword rowids exceed ``cap``
    (one b-tree seek)."""
    if int(value(conn, index_sql.MAX_KEYWORD_ROWID)) <= cap:
        return None
    words = tuple(dict.fromkeys(words))  # a word said twice is counted once
    counts = {w: _matches(conn, quoted(w), cap) for w in words}
    live = sorted((w for w in words if counts[w]), key=lambda w: counts[w])
    kept, total = 0, 0
    while kept < len(live) and total + counts[live[kept]] <= cap:
        total += counts[live[kept]]
        kept += 1
    if kept == len(live):
        return None
    common = ", ".join(f"'{w}'" for w in words if w in live[kept:])
    if kept:
        ranked = [w for w in words if w in live[:kept]]  # in the query's order
        skipped = (
            f"keyword search: {common} (the commonest of the query's words, together in "
            f"over {cap:,} memories) left out of the keyword ranking"
        )
        return Bounded(fts5_match(ranked), None, skipped, total)
    floors: dict[str, int] = {}
    for w in live:
        floor = value(conn, index_sql.newest_floor(quoted(w), cap))
        if floor is None:  # its rows went since they were counted (another writer)
            return None
        floors[w] = int(floor)
    rarest = min(live, key=lambda w: floors[w])  # the sparsest among the newest rows
    skipped = (
        f"keyword search: every query word is in over {cap:,} memories: only "
        f"'{rarest}' ranked, among the newest {cap:,} memories holding it"
    )
    return Bounded(quoted(rarest), floors[rarest], skipped, cap)


def keyword_search(
    conn: apsw.Connection,
    words: Sequence[str],
    limit: int,
    where: MemoryFilter,
    context_weight: float,
    after_weight: float,
    narrow_cap: int = NARROW_ROWS,
    rank_cap: int | None = None,
) -> KeywordHits:
    """``(memory_id, bm25)`` of the memories ``where`` accepts that hold any of
    ``words``, best first (FTS5's bm25 is negative: lower is better; ties in index
    order).

    bm25 weighs a memory's own words 1, the two memories before it in its session
    ``context_weight`` and the two after it ``after_weight``. Without a filter the best
    rows are chosen inside FTS5 before the id lookup (twice as fast as joining every
    match); a filter is part of the query, so the best ``limit`` accepted rows come back
    however few memories it accepts. A filter that accepts few memories (at most
    ``narrow_cap``, see :data:`NARROW_ROWS`) is searched through their rowids, with the
    same scores. Otherwise, when ranking every match would rank more than ``rank_cap``
    rows, the commonest words are left out (:func:`bounded`; the result's ``skipped``
    says so), and fewer than ``limit`` rows may come back, unless a filter (an agent, a
    tier, a session, tags, a time or ``as_of``) turned away some of what was ranked:
    then every match is ranked, as without the bound (the filter stays exact)."""
    narrowed = narrow_rowids(conn, where, narrow_cap) if where.narrows else None
    if narrowed is not None and not narrowed:
        return KeywordHits()
    weights = (context_weight, after_weight)
    cut = None
    if narrowed is None:
        cut = bounded(conn, words, RANK_CAP if rank_cap is None else rank_cap)
    if narrowed is not None or cut is None:
        return KeywordHits(_ranked(conn, fts5_match(words), limit, where, weights, narrowed))
    found = _ranked(conn, cut.match, limit, where, weights, None, cut.newest_from)
    filtered = replace(where, current=False) != MemoryFilter()
    if filtered and len(found) < min(limit, cut.matches):  # the filter turned rows away
        return KeywordHits(_ranked(conn, fts5_match(words), limit, where, weights, None))
    return KeywordHits(found, cut.skipped)


def _ranked(
    conn: apsw.Connection, match: str, limit: int, where: MemoryFilter,
    weights: tuple[float, float], narrowed: list[int] | None, newest_from: int | None = None,
) -> list[tuple[str, float]]:  # fmt: skip
    """The best ``limit`` rows ``where`` accepts matching ``match`` (with
    ``newest_from``: among those at or above that keyword rowid): for current memories
    alone, first among the best ``CURRENT_DEPTH * limit`` matches (see
    :data:`CURRENT_DEPTH`), then, if fewer are current, among every match."""
    if narrowed is None and index_sql.current_only(where):
        depth = CURRENT_DEPTH * limit
        search = index_sql.search(match, limit, where, *weights, None, depth, newest_from)
        found = [(r[0], float(r[1])) for r in stream(conn, search)]
        if len(found) >= limit:
            return found
    search = index_sql.search(match, limit, where, *weights, narrowed, None, newest_from)
    return [(r[0], float(r[1])) for r in stream(conn, search)]


def keyword_parts(
    conn: apsw.Connection, match: str, memory_ids: Sequence[str], scope: Scope = WHOLE
) -> dict[str, KeywordParts]:
    """Which columns of each of ``memory_ids``' keyword row match ``match`` (an FTS5
    expression, :func:`~persistence.sqlite.sql.index_sql.fts5_match`): one
    column-filtered query per column; memories of ``scope`` only."""
    found = [
        {r[0] for r in rows(conn, statement)}
        for statement in index_sql.keyword_parts(match, memory_ids, scope)
    ]
    return {
        memory_id: KeywordParts(
            memory_id in found[0], memory_id in found[1], memory_id in found[2]
        )  # fmt: skip
        for memory_id in set().union(*found)
    }

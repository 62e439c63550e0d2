"""The SQLite keyword search (FTS5 bm25): its steps, running the statements
:mod:`~persistence.sqlite.sql.index_sql` builds. A narrow filter is searched through the
rowids it accepts; a query whose words match very many rows ranks its common words only
where they meet another query word (:func:`coordinated`)."""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from persistence.records import KeywordHits, KeywordParts, MemoryFilter, Tier
from persistence.sqlite.sql import index_sql
from persistence.sqlite.sql.index_sql import fts5_match, quoted, word_pairs
from persistence.statements import column, rows, stream, value
from persistence.stores.rows import index_backed
from persistence.stores.scope import WHOLE, Scope

NARROW_ROWS = 400
"""A filter that accepts at most this many memories is searched by their rowids: FTS5
seeks each one's row in every term's doclist (about 0.15 ms each at 100k memories)
instead of scoring every match in the file and checking it (300 ms at 1M memories for
a session of 50)."""

RANK_CAP = 20_000
"""A keyword query whose words match more memories than this ranks its common words
only where they meet another query word (:func:`coordinated`). FTS5's bm25 costs about
0.8 us per matching row (the row's size and every phrase's instances are read) while
walking the matches costs about 0.03 us: four words that each sit in 1% of a million
memories match 46,000 rows, and ranking them took 28-38 ms of a 1M recall's ~42 ms of
CPU. A file with at most this many memories never takes the rule (a query matches at
most every row), so small files rank exactly as before."""

ALONE_ROWS = RANK_CAP // 4
"""The rarest words are ranked wherever they are, as long as together they match at
most this many rows; the words after them are the query's common words."""

CURRENT_DEPTH = 2
"""A search for current memories first ranks this many times ``limit`` of the best
matching rows inside FTS5 (as a search without a filter does) and checks only those; if
fewer than ``limit`` are current, every match is checked (at 100k memories, 30% of them
superseded, checking every match took the keyword leg from 8 to 16-19 ms)."""

PAIRED_WORDS = 6
"""At most this many words (those that match anything) take the rule: 15 pairs. A
longer query keeps the ordinary search (each pair is two more phrases for bm25)."""


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


def coordinated(
    conn: apsw.Connection, words: Sequence[str], cap: int = RANK_CAP
) -> tuple[str, str] | None:
    """The FTS5 expression to rank instead of the plain ``OR`` of ``words``, and the
    sentence that says what it leaves out, when the plain one matches more than ``cap``
    rows; else ``None``.

    A common-terms rule (as Lucene's CommonTermsQuery, with "minimum should match 2" for
    the common words): the rarest words, while together they match at most
    ``cap // 4`` rows, count wherever they are; every other word (a common one) counts
    only in the rows that hold another query word as well
    (:func:`~persistence.sqlite.sql.index_sql.word_pairs`). At a million memories the
    best bm25 rows of a several-word query hold two or more of its words (the 100 best
    of a 4-word query over 46,000 matches all did), and ranking only those costs a
    fifth. Words that match nothing are left out; 2 to :data:`PAIRED_WORDS` words that
    match must remain, else ``None``. Each word's rows are counted up to
    ``cap // 4 + 1``, the plain ``OR``'s up to ``cap + 1``, and only when some word is
    common; nothing is counted in a file whose keyword rowids stay within ``cap`` (no
    query can match more there: one b-tree seek)."""
    if len(words) < 2 or int(value(conn, index_sql.MAX_KEYWORD_ROWID)) <= cap:
        return None
    alone_cap = cap // 4
    counts = {w: _matches(conn, quoted(w), alone_cap) for w in words}
    live = sorted((w for w in words if counts[w]), key=lambda w: counts[w])
    if not 2 <= len(live) <= PAIRED_WORDS:
        return None
    alone, total = 0, 0
    while alone < len(live) and total + counts[live[alone]] <= alone_cap:
        total += counts[live[alone]]
        alone += 1
    common = [w for w in words if w in live[alone:]]  # in the query's order
    if not common or _matches(conn, fts5_match(live), cap) <= cap:
        return None
    named = ", ".join(f"'{w}'" for w in common)
    skipped = (
        f"keyword search: the query's words match over {cap:,} memories, so {named} "
        f"(the commonest of them) counted only in memories holding another query word "
        "(bm25 over the word pairs)"
    )
    return word_pairs([w for w in words if w in live], common), skipped


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
    same scores. When ``words`` match more than ``rank_cap`` rows, the common ones count
    only in rows that hold another query word (:func:`coordinated`; the result's
    ``skipped`` says so) if that still gives ``limit`` rows; else every match is ranked.
    """
    narrowed = narrow_rowids(conn, where, narrow_cap) if where.narrows else None
    if narrowed is not None and not narrowed:
        return KeywordHits()
    cap = RANK_CAP if rank_cap is None else rank_cap
    pairs = coordinated(conn, words, cap) if narrowed is None else None
    weights = (context_weight, after_weight)
    if pairs is not None:
        hits = KeywordHits(_ranked(conn, pairs[0], limit, where, weights, None), pairs[1])
        if len(hits) >= limit:
            return hits
    return KeywordHits(_ranked(conn, fts5_match(words), limit, where, weights, narrowed))


def _ranked(
    conn: apsw.Connection, match: str, limit: int, where: MemoryFilter,
    weights: tuple[float, float], narrowed: list[int] | None,
) -> list[tuple[str, float]]:  # fmt: skip
    """The best ``limit`` rows ``where`` accepts matching ``match``: for current memories
    alone, first among the best ``CURRENT_DEPTH * limit`` matches (see
    :data:`CURRENT_DEPTH`), then, if fewer are current, among every match."""
    if narrowed is None and index_sql.current_only(where):
        depth = CURRENT_DEPTH * limit
        search = index_sql.search(match, limit, where, *weights, None, depth)
        found = [(r[0], float(r[1])) for r in stream(conn, search)]
        if len(found) >= limit:
            return found
    search = index_sql.search(match, limit, where, *weights, narrowed)
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

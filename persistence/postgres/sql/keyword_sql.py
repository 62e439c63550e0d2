"""SQL of the keyword search: FTS5's bm25 over each memory's keyword window, assembled
from the own-word postings (``tm_kw_postings``) and window pointers (``tm_kw_docs``) of
migration v012.

The score is FTS5's formula (k1 = 1.2, b = 0.75), negated (lower is better, <= 0):
for each lexeme of the query, idf = ln((N - df + 0.5) / (df + 0.5)) (at least 1e-6),
tf = hits in the memory's own words + ``context_weight`` x hits in the two memories
before it + ``after_weight`` x hits in the two after it, |D| = the window's tokens
(``wlen``), avgdl from ``tm_kw_stats``. Ties go in insertion order (``seq``), as FTS5's
rowid.

A memory's words are in its own window (part A), in the windows of the two memories
after it (B: it is before them) and of the two before it (C). The query's lexemes' owners
come from the posting table's primary key (``lex = ANY(...) AND scope = ANY(...)``: a
btree comparison, LEAKPROOF, so an index-only scan under row-level security too; the
scopes are the ones ``tm_kw_stats`` shows the connection); each owner's posting is
spread to its five windows through its document row, and summed per (window, lexeme):
the per-part term frequencies, and per lexeme the windows holding it (its document
frequency over every window, whatever the filter). Every window holding a query lexeme
is scored; the filter is a join of those windows to ``tm_memories`` by ``seq`` (its
unique index), inside the search, before the LIMIT. A word of several tokens (a phrase in
FTS5) matches a window holding all of its lexemes (anywhere in the window: positions are
not stored); its lexemes are scored one by one, as before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from persistence.postgres.sql import recall_filter_sql
from persistence.records import KeywordParts, MemoryFilter
from persistence.statements import Row, Statement
from persistence.stores.scope import WHOLE, Scope

_PUNCT = re.compile(r"[!-/:-@\[-`{-~]+")  # ASCII punctuation, as tm_tsv's [[:punct:]]

CATCH_UP: tuple[Statement, ...] = ()
"""Nothing waits: triggers index a memory in the statement that writes it."""

LEXEMES = """
SELECT w.word, coalesce(array_agg(DISTINCT u.lexeme) FILTER (WHERE u.lexeme IS NOT NULL), '{}')
FROM unnest(%(words)s::text[]) AS w(word) LEFT JOIN LATERAL unnest(tm_tsv(w.word)) AS u ON true
GROUP BY w.word
"""
"""Each word's lexemes (``tm_tsv``, immutable: the caller may keep them): the search is
planned for its lexemes (their statistics: few owners or many)."""

_WINDOWS = """
WITH stats AS MATERIALIZED (
    SELECT coalesce(sum(n), 0) AS n,
           coalesce(sum(tokens), 0)::float8 / greatest(coalesce(sum(n), 0), 1) AS avgdl
    FROM tm_kw_stats
), win AS MATERIALIZED (
    SELECT o.lex, x.w,
           coalesce(sum(o.tf) FILTER (WHERE x.part = 0), 0)::float8 AS fa,
           coalesce(sum(o.tf) FILTER (WHERE x.part = 1), 0)::float8 AS fb,
           coalesce(sum(o.tf) FILTER (WHERE x.part = 2), 0)::float8 AS fc
    FROM tm_kw_postings o JOIN tm_kw_docs d ON d.seq = o.seq
    CROSS JOIN LATERAL (VALUES (o.seq, 0), (d.a1, 1), (d.a2, 1), (d.b1, 2), (d.b2, 2))
        AS x(w, part)
    WHERE o.lex = ANY(%(lexes)s::text[]){scope} AND x.w IS NOT NULL
    GROUP BY o.lex, x.w
), idf AS MATERIALIZED (
    SELECT v.lex, greatest(ln((s.n - count(*) + 0.5) / (count(*) + 0.5)), 1e-6) AS idf
    FROM win v CROSS JOIN stats s GROUP BY v.lex, s.n
)"""
"""Per (window, query lexeme): the lexeme's term frequency in each part of the window
(A own, B the two before, C the two after), from its owners' postings (primary key:
``lex = ANY``, and the scope's own rows for a scoped connection); per lexeme its idf."""

_SCOPE = " AND o.scope = %(scope)s"

_PHRASES = """, cand AS MATERIALIZED (
    SELECT DISTINCT v.w FROM win v
    JOIN unnest(%(word_i)s::int[], %(word_lex)s::text[]) AS wl(i, lex) ON wl.lex = v.lex
    GROUP BY v.w, wl.i HAVING count(*) = (
        SELECT count(*) FROM unnest(%(word_i)s::int[]) AS x(i) WHERE x.i = wl.i)
)"""
"""Windows holding every lexeme of some word (a word of several tokens)."""

_SCORE = """, scored AS MATERIALIZED (
    SELECT v.w, -sum(i.idf * (t.f * 2.2)
                     / (t.f + 1.2 * (0.25 + 0.75 * d.wlen::float8 / s.avgdl))) AS score
    FROM win v {cand} JOIN idf i ON i.lex = v.lex JOIN tm_kw_docs d ON d.seq = v.w
    CROSS JOIN stats s
    CROSS JOIN LATERAL (SELECT v.fa + %(cw)s * v.fb + %(aw)s * v.fc AS f) t
    GROUP BY v.w
)
SELECT m.id, c.score FROM {best} c JOIN tm_memories m ON m.seq = c.w
WHERE {cond}
ORDER BY c.score, c.w LIMIT %(limit)s
"""
"""bm25 of every window holding a query lexeme; the filter on the memory rows; the best.
Without a filter only the best ``limit`` windows are joined to their memories (``best``)."""

_BEST = "(SELECT * FROM scored ORDER BY score, w LIMIT %(limit)s)"


def tsquery_text(words: Sequence[str]) -> str:
    """``to_tsquery`` input: each word quoted (several tokens make a phrase, as in FTS5),
    joined with ``|``; split as ``tm_tsv`` splits text. Empty if no word has a token."""
    cleaned = [" ".join(_PUNCT.sub(" ", w).split()) for w in words]
    quoted = ["'" + w.replace("\\", "\\\\").replace("'", "''") + "'" for w in cleaned if w]
    return " | ".join(quoted)


def lexemes(words: Sequence[str]) -> Statement:
    """``(word, its lexemes)`` of each of ``words`` (:data:`LEXEMES`)."""
    return Statement(LEXEMES, {"words": list(dict.fromkeys(words))})


def search(
    word_lexemes: Sequence[Sequence[str]], scope: str, limit: int, where: MemoryFilter,
    context_weight: float, after_weight: float,
) -> Statement | None:  # fmt: skip
    """``(memory_id, score)`` of the memories ``where`` accepts, best (lowest) first, for
    each query word's lexemes; ``scope``: the connection's (``''``: every scope it sees);
    ``None`` when no word has a lexeme."""
    per_word = [sorted(set(lexes)) for lexes in word_lexemes if lexes]
    if not per_word:
        return None
    cond, params = recall_filter_sql.condition(where, "m")
    sql = _WINDOWS.format(scope=_SCOPE if scope else "")
    best = _BEST if cond == "true" else "scored"
    if all(len(lexes) == 1 for lexes in per_word):
        sql += _SCORE.format(cand="", cond=cond, best=best)
    else:
        cand = "JOIN cand ON cand.w = v.w"
        sql += _PHRASES + _SCORE.format(cand=cand, cond=cond, best=best)
        pairs = [(i, lex) for i, lexes in enumerate(per_word) for lex in lexes]
        params.update(word_i=[i for i, _ in pairs], word_lex=[lex for _, lex in pairs])
    lexes = sorted({lex for lexes in per_word for lex in lexes})
    params.update(lexes=lexes, scope=scope, cw=context_weight, aw=after_weight, limit=limit)
    return Statement(sql, params)


_PARTS = """
WITH lexemes AS MATERIALIZED (
    SELECT DISTINCT u.lexeme AS lex FROM unnest(%(words)s::text[]) AS w, unnest(tm_tsv(w)) AS u
)
SELECT m.id, bool_or(p.seq = d.seq), bool_or(p.seq IN (d.b1, d.b2)),
       bool_or(p.seq IN (d.a1, d.a2))
FROM tm_memories m JOIN tm_kw_docs d ON d.seq = m.seq
JOIN tm_kw_postings p ON p.lex = ANY(ARRAY(SELECT lex FROM lexemes)) AND p.scope = d.scope
    AND p.seq = ANY(ARRAY[d.seq, d.b1, d.b2, d.a1, d.a2])
WHERE m.id = ANY(%(ids)s){scope}
GROUP BY m.id
"""


def parts(words: Sequence[str], memory_ids: Sequence[str], scope: Scope = WHOLE) -> Statement:
    """Which parts of each memory's keyword window hold a lexeme of ``words``: its own
    words (part A), the two memories before it (B), the two after it (C), read from the
    postings of the memory and of its neighbours; memories of ``scope`` only (row-level
    security filters them again). :func:`to_parts` decodes the rows."""
    mine, _ = scope.and_("m.scope", "%(agent)s")
    params = {"words": list(words), "ids": list(dict.fromkeys(memory_ids)), "agent": scope.agent_id}
    return Statement(_PARTS.format(scope=mine), params)


def to_parts(rows: Sequence[Row]) -> dict[str, KeywordParts]:
    """Memory id -> the parts :func:`parts`' rows say hold a query word (none: left out)."""
    found = {r[0]: KeywordParts(bool(r[1]), bool(r[2]), bool(r[3])) for r in rows}
    return {m: p for m, p in found.items() if p.own or p.before or p.after}


REBUILD = (Statement("SELECT tm_kw_rebuild()"),)
"""Re-index every memory from scratch, in the caller's transaction (repair, tests)."""

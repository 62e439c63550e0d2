"""SQL of the keyword search: FTS5's bm25 over ``tm_keywords`` (see migration v002).

The score is FTS5's formula (k1 = 1.2, b = 0.75), negated (lower is better, <= 0):
for each lexeme of the query, idf = ln((N - df + 0.5) / (df + 0.5)) (at least 1e-6),
tf = hits in the memory's own words + ``context_weight`` x hits in the two memories
before it + ``after_weight`` x hits in the two after it, |D| = the row's tokens, avgdl
from ``tm_kw_stats``. Ties go in insertion order (``seq``), as FTS5's rowid.

Every memory the GIN index finds is scored exactly, in one pass. The per-part term
frequencies come from the window's tsvector itself: its own words carry weight A, the
memories before B, after C, and their positions follow in that order, so for a one-lexeme
query ``ts_rank`` with weight 1 on a prefix of the parts (A; A and B; A, B and C) and 0
elsewhere is sum(1/j^2, j = 1..n)/(pi^2/6) for the n positions those parts hold, which
rounds back to n (exact to the 256 positions a lexeme keeps). ``ts_rank`` is a binary
search in the tsvector: three calls cost less than one ``array_position`` in ``kw_lex``
(measured: 1,200 memories x 4 lexemes, 0.6 ms against 14 ms), so no first stage is needed
to keep the exact scoring to a few hundred memories. Searches of single-token words
unfiltered or filtered by the keyword row's own columns (tier, agent, time range;
migration v006) take each lexeme's matches straight from the GIN index: the matches give
each lexeme's document frequency exactly (they hold every memory with it) and the
accepted ones are ranked. Others (a session, tags, retention, phrases) match the query
once, join the memories and count document frequencies with the index.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from persistence.postgres.sql import recall_filter_sql
from persistence.records import KeywordParts, MemoryFilter
from persistence.statements import Row, Statement
from persistence.stores.scope import WHOLE, Scope

_PUNCT = re.compile(r"[!-/:-@\[-`{-~]+")  # ASCII punctuation, as tm_tsv's [[:punct:]]

CATCH_UP = (
    Statement("SET CONSTRAINTS tm_kw_work IMMEDIATE"),
    Statement("SET CONSTRAINTS tm_kw_work DEFERRED"),
)
"""Runs this transaction's pending keyword work now (a search inside it sees its
writes), then defers the rest of its work to COMMIT again (inside a transaction only)."""

_HEAD = """
WITH stats AS MATERIALIZED (
    SELECT coalesce(sum(n), 0) AS n,
           coalesce(sum(tokens), 0)::float8 / greatest(coalesce(sum(n), 0), 1) AS avgdl
    FROM tm_kw_stats
), lexemes AS MATERIALIZED (
    SELECT DISTINCT u.lexeme AS lex, plainto_tsquery('simple', u.lexeme) AS lq
    FROM unnest(%(words)s::text[]) AS w, unnest(tm_tsv(w)) AS u
), q AS MATERIALIZED (SELECT to_tsquery('tm_english', %(q)s) AS q
), cand AS MATERIALIZED (
    SELECT k.memory_id, k.seq, k.kw, k.kw_len FROM tm_keywords k {join} CROSS JOIN q
    WHERE k.kw @@ q.q AND {cond}
)"""

_LEXEMES = _HEAD.split("), q AS MATERIALIZED")[0] + ")"
"""The statistics and the query's lexemes alone (the search by lexeme below)."""

_DF_FROM_CANDIDATES = """, idf AS MATERIALIZED (
    SELECT h.lex, greatest(ln((s.n - count(*) + 0.5) / (count(*) + 0.5)), 1e-6) AS idf
    FROM hits h CROSS JOIN stats s GROUP BY h.lex, s.n
)"""
"""Unfiltered, one token per word: every memory holding a query lexeme is a candidate,
so the candidates' hits give each lexeme's document frequency exactly."""

_DF_FROM_INDEX = """, idf AS MATERIALIZED (
    SELECT l.lex, greatest(ln((s.n - d.df + 0.5) / (d.df + 0.5)), 1e-6) AS idf
    FROM lexemes l CROSS JOIN stats s CROSS JOIN LATERAL
         (SELECT count(*) AS df FROM tm_keywords WHERE kw @@ l.lq) d
)"""
"""Filtered (or a phrase): document frequencies counted over the whole index (GIN)."""

_TF = (
    "round(1.0 / (1.64493406685 * greatest(1 - ts_rank('{{WEIGHTS}}', c.kw, l.lq)::float8, "
    "1e-7)) - 0.5)"
)
"""How many positions of a lexeme the window's parts picked by ``WEIGHTS`` (``D,C,B,A``,
1 = picked) hold, read from ``ts_rank`` (see the module docstring). Braces doubled: the
text is formatted again."""

_HITS = f""", hits AS MATERIALIZED (
    SELECT c.memory_id, c.seq, c.kw_len, l.lex, {{ok}} AS ok,
           CASE WHEN {{ok}} THEN {_TF.replace("WEIGHTS", "0,0,0,1")} END AS fa,
           CASE WHEN {{ok}} THEN {_TF.replace("WEIGHTS", "0,0,1,1")} END AS fab,
           CASE WHEN {{ok}} THEN {_TF.replace("WEIGHTS", "0,1,1,1")} END AS fabc
    FROM cand c CROSS JOIN lexemes l WHERE c.kw @@ l.lq
)"""
"""Each (candidate, query lexeme) it holds, with the lexeme's term frequency in each part
of the window for the accepted ones (``ok``): one ``@@`` per pair, whose hits give the
unfiltered document frequencies too."""

_HITS_BY_LEXEME = _HITS.replace(
    "FROM cand c CROSS JOIN lexemes l WHERE c.kw @@ l.lq",
    "FROM lexemes l JOIN tm_keywords c ON c.kw @@ l.lq",
).replace("{ok}", "({cond})")
"""Single-token words, a filter on the keyword row's own columns: each lexeme's matches
straight from the index (one bitmap scan per lexeme, no list of candidates matched
again per lexeme: 25% less time at 100k, the same results), each marked whether the
filter accepts it. Every match counts towards its lexeme's document frequency."""

_SCORE = """, tf AS (
    SELECT h.memory_id, h.seq, h.kw_len, i.idf,
           h.fa + %(cw)s * (h.fab - h.fa) + %(aw)s * (h.fabc - h.fab) AS f
    FROM hits h JOIN idf i ON i.lex = h.lex WHERE h.ok
)
SELECT t.memory_id,
       -sum(t.idf * (t.f * 2.2) / (t.f + 1.2 * (0.25 + 0.75 * t.kw_len::float8 / s.avgdl))) AS score
FROM tf t CROSS JOIN stats s
GROUP BY t.memory_id, t.seq ORDER BY score, t.seq LIMIT %(limit)s
"""


def tsquery_text(words: Sequence[str]) -> str:
    """``to_tsquery`` input: each word quoted (several tokens make a phrase, as in FTS5),
    joined with ``|``; split as ``tm_tsv`` splits text. Empty if no word has a token."""
    cleaned = [" ".join(_PUNCT.sub(" ", w).split()) for w in words]
    quoted = ["'" + w.replace("\\", "\\\\").replace("'", "''") + "'" for w in cleaned if w]
    return " | ".join(quoted)


def _single_tokens(words: Sequence[str]) -> bool:
    """True if each word is one token (letters and digits only, once split as
    ``tm_tsv`` splits): no phrase, so a candidate holds a lexeme iff it matches it."""
    return all(w.isalnum() for w in (" ".join(_PUNCT.sub(" ", w).split()) for w in words) if w)


def _on_keyword_rows(where: MemoryFilter) -> bool:
    """True if ``tm_keywords``' own columns decide ``where`` (tier, agent, time range)."""
    return (
        where.session_id is None and not where.tags and where.min_retention is None
        and not where.current and where.as_of is None
    )  # fmt: skip


def search(
    words: Sequence[str], limit: int, where: MemoryFilter, context_weight: float,
    after_weight: float,
) -> Statement | None:  # fmt: skip
    """``(memory_id, score)`` of the memories ``where`` accepts, best (lowest) first;
    ``None`` when no word has a token (nothing can match)."""
    query = tsquery_text(words)
    if not query:
        return None
    own_columns = _on_keyword_rows(where)
    if own_columns and _single_tokens(words):
        cond, params = recall_filter_sql.condition(where, "c")
        sql = _LEXEMES + _HITS_BY_LEXEME.format(cond=cond) + _DF_FROM_CANDIDATES + _SCORE
    else:
        join = "" if own_columns else "JOIN tm_memories m ON m.id = k.memory_id"
        cond, params = recall_filter_sql.condition(where, "k" if own_columns else "m")
        sql = _HEAD.format(join=join, cond=cond) + _HITS.format(ok="true") + _DF_FROM_INDEX
        sql += _SCORE
    params.update(words=list(words), q=query, cw=context_weight, aw=after_weight, limit=limit)
    return Statement(sql, params)


_PARTS = """
WITH lexemes AS MATERIALIZED (
    SELECT DISTINCT u.lexeme AS lex FROM unnest(%(words)s::text[]) AS w, unnest(tm_tsv(w)) AS u
)
SELECT k.memory_id, bool_or(k.kw_fa[p.p] > 0), bool_or(k.kw_fb[p.p] > 0),
       bool_or(k.kw_fc[p.p] > 0)
FROM tm_keywords k CROSS JOIN lexemes l
CROSS JOIN LATERAL (SELECT array_position(k.kw_lex, l.lex) AS p) p
WHERE k.memory_id = ANY(%(ids)s) AND p.p IS NOT NULL{scope}
GROUP BY k.memory_id
"""


def parts(words: Sequence[str], memory_ids: Sequence[str], scope: Scope = WHOLE) -> Statement:
    """Which parts of each memory's keyword window hold a lexeme of ``words``: the
    per-row term frequencies of its own words (weight A, ``kw_fa``), the memories before
    it (B, ``kw_fb``) and after it (C, ``kw_fc``); memories of ``scope`` only (row-level
    security filters them again). :func:`to_parts` decodes the rows."""
    mine, _ = scope.and_("k.scope", "%(agent)s")
    params = {"words": list(words), "ids": list(dict.fromkeys(memory_ids)), "agent": scope.agent_id}
    return Statement(_PARTS.format(scope=mine), params)


def to_parts(rows: Sequence[Row]) -> dict[str, KeywordParts]:
    """Memory id -> the parts :func:`parts`' rows say hold a query word (none: left out)."""
    found = {r[0]: KeywordParts(bool(r[1]), bool(r[2]), bool(r[3])) for r in rows}
    return {m: p for m, p in found.items() if p.own or p.before or p.after}


REBUILD = (
    Statement("DELETE FROM tm_keywords"),
    Statement(
        "INSERT INTO tm_kw_dirty (scope, tier, session_id, seq) "
        "SELECT scope, tier, NULL, seq FROM tm_memories"
    ),
    Statement("SELECT tm_kw_flag_tx()"),
    *CATCH_UP,
)
"""Re-index every memory from scratch, in the caller's transaction (repair, tests)."""

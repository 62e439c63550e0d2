"""Version 2: recall's keyword index (a table of its own, kept by triggers), the
embedding cache and the staged re-embedding.

Keyword data lives apart from the memory row (``tm_keywords``): the window (a memory's
own words (weight A), the two memories before it in its session and tier (B) and the two
after (C)) changes when a neighbour is written, and rewriting the memory row for that
costs 3.6-5.1 ms per insert against 0.9 ms without (benchmarks/postgres_spike). Triggers
on ``tm_memories`` note which places changed (``tm_kw_dirty``) and flag the transaction;
a deferred constraint trigger re-indexes every affected memory once, at COMMIT (``SET
CONSTRAINTS tm_kw_work IMMEDIATE`` runs it early: a search inside the transaction).

Text is split as FTS5's ``porter unicode61`` splits it: punctuation becomes space
(``tm_tsv``), words go through the original Porter stemmer, no stop words. bm25 needs
per-row term frequencies per part of the window (``kw_lex`` and ``kw_fa/fb/fc``) and the
row's token count (``kw_len``); ``tm_kw_stats`` keeps N and the total tokens per scope.
"""

VERSION = 2
DESCRIPTION = "keyword index with its session window, embedding cache, staged re-embedding"

_AFFECTED_WINDOW = """
    SELECT m.id FROM tm_memories m WHERE m.seq = d.seq
    UNION ALL
    (SELECT m.id FROM tm_memories m WHERE d.session_id IS NOT NULL AND m.scope = d.scope
       AND m.tier = d.tier AND m.session_id = d.session_id AND m.seq < d.seq
     ORDER BY m.seq DESC LIMIT 2)
    UNION ALL
    (SELECT m.id FROM tm_memories m WHERE d.session_id IS NOT NULL AND m.scope = d.scope
       AND m.tier = d.tier AND m.session_id = d.session_id AND m.seq > d.seq
     ORDER BY m.seq LIMIT 2)
"""

_SIDE = """(SELECT string_agg(w.content, E'\\n') AS t FROM
    (SELECT w.content FROM tm_memories w WHERE m.session_id IS NOT NULL
       AND w.scope = m.scope AND w.tier = m.tier AND w.session_id = m.session_id
       AND w.seq {cmp} m.seq ORDER BY w.seq {order} LIMIT 2) w)"""

STATEMENTS = (
    "CREATE TEXT SEARCH DICTIONARY tm_porter (TEMPLATE = snowball, Language = porter)",
    "CREATE TEXT SEARCH CONFIGURATION tm_english (COPY = english)",
    """ALTER TEXT SEARCH CONFIGURATION tm_english
        ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part,
                          numword, hword_numpart, numhword
        WITH tm_porter""",
    """CREATE FUNCTION tm_tsv(t text) RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
    $$ SELECT to_tsvector('tm_english'::regconfig,
                          regexp_replace(t, '[[:punct:]]+', ' ', 'g')) $$""",
    # one row per memory (all tiers), written only by tm_kw_work_off
    """CREATE TABLE tm_keywords (
        memory_id text PRIMARY KEY REFERENCES tm_memories (id) ON DELETE CASCADE,
        scope text NOT NULL DEFAULT tm_scope(),
        tier text NOT NULL,
        session_id text,
        seq bigint NOT NULL,
        kw tsvector NOT NULL,
        kw_len integer NOT NULL,
        kw_lex text[] NOT NULL,
        kw_fa real[] NOT NULL,
        kw_fb real[] NOT NULL,
        kw_fc real[] NOT NULL
    )""",
    "CREATE INDEX tm_keywords_kw ON tm_keywords USING gin (kw)",
    "CREATE INDEX tm_keywords_tier ON tm_keywords (tier, seq)",
    "CREATE INDEX tm_keywords_session ON tm_keywords (session_id)",
    """CREATE TABLE tm_kw_stats (
        scope text PRIMARY KEY,
        n bigint NOT NULL,
        tokens bigint NOT NULL
    )""",
    # statistics follow tm_keywords (inserts, re-indexing, deletes by cascade)
    """CREATE FUNCTION tm_kw_count() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO tm_kw_stats AS s (scope, n, tokens)
            SELECT scope, count(*), sum(kw_len) FROM new_rows GROUP BY scope
            ON CONFLICT (scope) DO UPDATE SET n = s.n + excluded.n,
                                              tokens = s.tokens + excluded.tokens;
        ELSIF TG_OP = 'UPDATE' THEN
            UPDATE tm_kw_stats s SET tokens = s.tokens + d.delta
            FROM (SELECT n.scope, sum(n.kw_len - o.kw_len) AS delta FROM new_rows n
                  JOIN old_rows o USING (memory_id) GROUP BY n.scope) d
            WHERE s.scope = d.scope AND d.delta <> 0;
        ELSE
            UPDATE tm_kw_stats s SET n = s.n - d.n, tokens = s.tokens - d.t
            FROM (SELECT scope, count(*) AS n, sum(kw_len) AS t FROM old_rows
                  GROUP BY scope) d
            WHERE s.scope = d.scope;
        END IF;
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER tm_keywords_count_insert AFTER INSERT ON tm_keywords
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION tm_kw_count()""",
    """CREATE TRIGGER tm_keywords_count_update AFTER UPDATE ON tm_keywords
        REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION tm_kw_count()""",
    """CREATE TRIGGER tm_keywords_count_delete AFTER DELETE ON tm_keywords
        REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION tm_kw_count()""",
    # places whose window changed in the running transaction, and its flag
    """CREATE TABLE tm_kw_dirty (
        scope text NOT NULL,
        tier text NOT NULL,
        session_id text,
        seq bigint NOT NULL
    )""",
    "CREATE TABLE tm_kw_flag (xid xid8 PRIMARY KEY)",
    """CREATE FUNCTION tm_kw_flag_tx() RETURNS void LANGUAGE sql AS
    $$ INSERT INTO tm_kw_flag VALUES (pg_current_xact_id()) ON CONFLICT DO NOTHING $$""",
    """CREATE FUNCTION tm_kw_note_rows() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO tm_kw_dirty SELECT scope, tier, session_id, seq FROM new_rows;
        ELSE
            INSERT INTO tm_kw_dirty SELECT scope, tier, session_id, seq FROM old_rows;
        END IF;
        PERFORM tm_kw_flag_tx();
        RETURN NULL;
    END $$""",
    """CREATE FUNCTION tm_kw_note_update() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO tm_kw_dirty VALUES (OLD.scope, OLD.tier, OLD.session_id, OLD.seq),
                                       (NEW.scope, NEW.tier, NEW.session_id, NEW.seq);
        PERFORM tm_kw_flag_tx();
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER tm_memories_kw_insert AFTER INSERT ON tm_memories
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION tm_kw_note_rows()""",
    """CREATE TRIGGER tm_memories_kw_delete AFTER DELETE ON tm_memories
        REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION tm_kw_note_rows()""",
    # row-level, and only for the columns the window reads: counter updates cost nothing
    """CREATE TRIGGER tm_memories_kw_update AFTER UPDATE OF content, tier, session_id
        ON tm_memories FOR EACH ROW
        WHEN (OLD.content IS DISTINCT FROM NEW.content OR OLD.tier IS DISTINCT FROM NEW.tier
              OR OLD.session_id IS DISTINCT FROM NEW.session_id)
        EXECUTE FUNCTION tm_kw_note_update()""",
    # the work-off: each memory at a dirty place, and two on each side of it in its
    # session and tier, is re-indexed once
    f"""CREATE FUNCTION tm_kw_work_off() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        WITH affected AS (
            SELECT DISTINCT a.id FROM
                (SELECT DISTINCT scope, tier, session_id, seq FROM tm_kw_dirty) d
            CROSS JOIN LATERAL ({_AFFECTED_WINDOW}) a
        ), win AS (
            SELECT m.id, m.scope, m.tier, m.session_id, m.seq,
                   setweight(tm_tsv(m.content), 'A')
                   || setweight(tm_tsv(coalesce(b.t, '')), 'B')
                   || setweight(tm_tsv(coalesce(f.t, '')), 'C') AS kw
            FROM affected x JOIN tm_memories m ON m.id = x.id
            LEFT JOIN LATERAL {_SIDE.format(cmp="<", order="DESC")} b ON true
            LEFT JOIN LATERAL {_SIDE.format(cmp=">", order="ASC")} f ON true
        )
        INSERT INTO tm_keywords AS k (memory_id, scope, tier, session_id, seq, kw, kw_len,
                                      kw_lex, kw_fa, kw_fb, kw_fc)
        SELECT win.id, win.scope, win.tier, win.session_id, win.seq, win.kw, t.len,
               t.lex, t.fa, t.fb, t.fc
        FROM win CROSS JOIN LATERAL (
            SELECT coalesce(sum(cardinality(u.positions)), 0) AS len,
                   coalesce(array_agg(u.lexeme), '{{}}') AS lex,
                   coalesce(array_agg(cardinality(array_positions(u.weights, 'A'))), '{{}}') AS fa,
                   coalesce(array_agg(cardinality(array_positions(u.weights, 'B'))), '{{}}') AS fb,
                   coalesce(array_agg(cardinality(array_positions(u.weights, 'C'))), '{{}}') AS fc
            FROM unnest(win.kw) u) t
        ON CONFLICT (memory_id) DO UPDATE SET tier = excluded.tier,
            session_id = excluded.session_id, seq = excluded.seq, kw = excluded.kw,
            kw_len = excluded.kw_len, kw_lex = excluded.kw_lex, kw_fa = excluded.kw_fa,
            kw_fb = excluded.kw_fb, kw_fc = excluded.kw_fc;
        DELETE FROM tm_kw_dirty;
        DELETE FROM tm_kw_flag WHERE xid = pg_current_xact_id();
        RETURN NULL;
    END $$""",
    """CREATE CONSTRAINT TRIGGER tm_kw_work AFTER INSERT ON tm_kw_flag
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION tm_kw_work_off()""",
    # embeddings by (scope, model, content hash); least recently used evicted
    """CREATE TABLE tm_embedding_cache (
        scope text NOT NULL DEFAULT tm_scope(),
        model_id text NOT NULL,
        content_hash bytea NOT NULL,
        embedding vector NOT NULL,
        used_at bigint NOT NULL,
        PRIMARY KEY (scope, model_id, content_hash)
    )""",
    "CREATE INDEX tm_embedding_cache_used ON tm_embedding_cache (scope, used_at)",
    # vectors of another model, staged until the swap
    """CREATE TABLE tm_embedding_rebuild (
        memory_id text PRIMARY KEY REFERENCES tm_memories (id) ON DELETE CASCADE,
        scope text NOT NULL DEFAULT tm_scope(),
        content_hash bytea NOT NULL,
        embedding vector NOT NULL
    )""",
)

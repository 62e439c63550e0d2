-- Spike schema: the memory tables of tiered-memory, PostgreSQL-shaped.
-- One table for the three tiers (a tier column) instead of three tables: one GIN keyword
-- index, one HNSW vector index, one id space (the "id lives in one tier" rule is the
-- primary key). Tags are a text[] on the row (GIN, @>) instead of memory_tags.
-- The keyword window (two memories before / after in the same tier and session) is
-- maintained IN the database by a deferred constraint trigger that runs once per
-- transaction at COMMIT (SQLite: the store's before_commit hook + keyword_dirty);
-- SET CONSTRAINTS tm_kw_work IMMEDIATE runs it early (a keyword search inside a
-- transaction that wrote: SQLite's write_pending).

CREATE EXTENSION IF NOT EXISTS vector;

-- FTS5's tokenize='porter unicode61': PostgreSQL's snowball has the original Porter
-- stemmer (Language = porter), no stopword list; punctuation is turned into spaces first
-- (tm_tsv) so that the parser's compound tokens (hyphenated words, file names, hosts,
-- versions, e-mails) split into words as unicode61 splits them. Not matched: unicode61's
-- diacritics folding (needs the unaccent extension, not in this server build).
CREATE TEXT SEARCH DICTIONARY tm_porter (TEMPLATE = snowball, Language = porter);
CREATE TEXT SEARCH CONFIGURATION tm_english (COPY = english);
ALTER TEXT SEARCH CONFIGURATION tm_english
    ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part,
                      numword, hword_numpart, numhword
    WITH tm_porter;
CREATE FUNCTION tm_tsv(t text) RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT to_tsvector('tm_english'::regconfig, regexp_replace(t, '[[:punct:]]+', ' ', 'g')) $$;

CREATE TABLE tm_meta (key text PRIMARY KEY, value text NOT NULL);
-- one row: bumped by every committing write transaction of a store; read FOR UPDATE at
-- BEGIN (serialises writers like BEGIN IMMEDIATE, and is an exact "data_version")
CREATE TABLE tm_version (one boolean PRIMARY KEY DEFAULT true CHECK (one), v bigint NOT NULL);
INSERT INTO tm_version VALUES (true, 0);

CREATE TABLE memories (
    seq        bigint GENERATED ALWAYS AS IDENTITY UNIQUE,  -- SQLite's rowid: insertion order
    id         text PRIMARY KEY,
    tier       text NOT NULL CHECK (tier IN ('scratchpad', 'episodic', 'semantic')),
    key        text UNIQUE,
    content    text NOT NULL,
    session_id text,
    agent_id   text,
    tags       text[] NOT NULL DEFAULT '{}',
    created_at bigint NOT NULL,
    retention  real NOT NULL DEFAULT 1.0,
    embedding  vector(384),
    kw         tsvector,   -- content (A) || two before (B) || two after (C)
    kw_len     integer,    -- tokens in kw (FTS5's column size, for bm25)
    kw_lex     text[],     -- the lexemes of kw, and per lexeme its hits in content (A),
    kw_fa      real[],     -- in the two before (B) and in the two after (C): bm25's tf
    kw_fb      real[],     -- without unnesting the tsvector at query time
    kw_fc      real[]
);
CREATE INDEX memories_kw ON memories USING gin (kw);
CREATE INDEX memories_window ON memories (tier, session_id, seq);
CREATE INDEX memories_session ON memories (session_id);
CREATE INDEX memories_agent ON memories (agent_id);
CREATE INDEX memories_tags ON memories USING gin (tags);
CREATE INDEX memories_created ON memories (created_at);
-- HNSW is created by the loader after the bulk insert (faster build)

-- keyword stats for bm25 (N, total tokens), kept by the work-off
CREATE TABLE tm_kw_stats (one boolean PRIMARY KEY DEFAULT true CHECK (one),
                          n bigint NOT NULL, tokens bigint NOT NULL);
INSERT INTO tm_kw_stats VALUES (true, 0, 0);

CREATE TABLE tm_kw_dirty (tier text NOT NULL, session_id text, seq bigint NOT NULL);
CREATE TABLE tm_kw_flag (xid xid8 PRIMARY KEY);

CREATE FUNCTION tm_kw_flag_tx() RETURNS void LANGUAGE sql AS
$$ INSERT INTO tm_kw_flag VALUES (pg_current_xact_id()) ON CONFLICT DO NOTHING $$;

CREATE FUNCTION tm_kw_note_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tm_kw_dirty SELECT tier, session_id, seq FROM new_rows;
    PERFORM tm_kw_flag_tx();
    RETURN NULL;
END $$;

CREATE FUNCTION tm_kw_note_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tm_kw_dirty SELECT tier, session_id, seq FROM old_rows;
    UPDATE tm_kw_stats SET n = n - d.dn, tokens = tokens - d.dt
      FROM (SELECT count(*) AS dn, coalesce(sum(kw_len), 0) AS dt FROM old_rows
            WHERE kw IS NOT NULL) d;
    PERFORM tm_kw_flag_tx();
    RETURN NULL;
END $$;

CREATE FUNCTION tm_kw_note_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tm_kw_dirty
    SELECT x.tier, x.session_id, x.seq FROM old_rows o JOIN new_rows n USING (seq)
    CROSS JOIN LATERAL (VALUES (o.tier, o.session_id, o.seq), (n.tier, n.session_id, n.seq))
         AS x (tier, session_id, seq)
    WHERE o.content IS DISTINCT FROM n.content OR o.session_id IS DISTINCT FROM n.session_id
       OR o.tier IS DISTINCT FROM n.tier;
    IF FOUND THEN PERFORM tm_kw_flag_tx(); END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER memories_kw_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION tm_kw_note_insert();
CREATE TRIGGER memories_kw_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION tm_kw_note_delete();
CREATE TRIGGER memories_kw_update AFTER UPDATE ON memories
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION tm_kw_note_update();

-- the work-off: every memory at a dirty place, and the two on each side of each dirty
-- place in its tier and session, is re-indexed once (kw, kw_len, stats)
CREATE FUNCTION tm_kw_work_off() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH affected AS (
        SELECT DISTINCT a.id FROM (SELECT DISTINCT tier, session_id, seq FROM tm_kw_dirty) d
        CROSS JOIN LATERAL (
            SELECT m.id FROM memories m WHERE m.seq = d.seq
            UNION ALL
            (SELECT m.id FROM memories m WHERE d.session_id IS NOT NULL AND m.tier = d.tier
               AND m.session_id = d.session_id AND m.seq < d.seq ORDER BY m.seq DESC LIMIT 2)
            UNION ALL
            (SELECT m.id FROM memories m WHERE d.session_id IS NOT NULL AND m.tier = d.tier
               AND m.session_id = d.session_id AND m.seq > d.seq ORDER BY m.seq LIMIT 2)
        ) a
    ), win AS (
        SELECT m.id, m.kw IS NOT NULL AS had, coalesce(m.kw_len, 0) AS old_len,
               setweight(tm_tsv(m.content), 'A')
               || setweight(tm_tsv(coalesce(b.t, '')), 'B')
               || setweight(tm_tsv(coalesce(f.t, '')), 'C') AS kw
        FROM affected x JOIN memories m ON m.id = x.id
        LEFT JOIN LATERAL (SELECT string_agg(w.content, E'\n') AS t FROM
            (SELECT content FROM memories w WHERE m.session_id IS NOT NULL AND w.tier = m.tier
               AND w.session_id = m.session_id AND w.seq < m.seq ORDER BY w.seq DESC LIMIT 2) w) b
          ON true
        LEFT JOIN LATERAL (SELECT string_agg(w.content, E'\n') AS t FROM
            (SELECT content FROM memories w WHERE m.session_id IS NOT NULL AND w.tier = m.tier
               AND w.session_id = m.session_id AND w.seq > m.seq ORDER BY w.seq LIMIT 2) w) f
          ON true
    ), sized AS (
        SELECT win.*, t.* FROM win CROSS JOIN LATERAL (
            SELECT coalesce(sum(cardinality(u.positions)), 0) AS len,
                   array_agg(u.lexeme) AS lex,
                   array_agg(cardinality(array_positions(u.weights, 'A'))) AS fa,
                   array_agg(cardinality(array_positions(u.weights, 'B'))) AS fb,
                   array_agg(cardinality(array_positions(u.weights, 'C'))) AS fc
            FROM unnest(win.kw) u) t
    ), upd AS (
        UPDATE memories m SET kw = s.kw, kw_len = s.len, kw_lex = s.lex, kw_fa = s.fa,
               kw_fb = s.fb, kw_fc = s.fc FROM sized s WHERE m.id = s.id
        RETURNING s.had, s.old_len, s.len
    )
    UPDATE tm_kw_stats SET n = n + d.added, tokens = tokens + d.delta
      FROM (SELECT count(*) FILTER (WHERE NOT had) AS added,
                   coalesce(sum(len - old_len), 0) AS delta FROM upd) d;
    DELETE FROM tm_kw_dirty;
    DELETE FROM tm_kw_flag WHERE xid = pg_current_xact_id();
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER tm_kw_work AFTER INSERT ON tm_kw_flag
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION tm_kw_work_off();

-- other processes' commits: one NOTIFY per writing transaction and writer (identical
-- payloads are folded by PostgreSQL), delivered only if it commits
CREATE FUNCTION tm_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('tm_changes', coalesce(current_setting('tm.writer', true), ''));
    RETURN NULL;
END $$;
CREATE TRIGGER memories_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON memories
    FOR EACH STATEMENT EXECUTE FUNCTION tm_notify();
CREATE TRIGGER meta_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON tm_meta
    FOR EACH STATEMENT EXECUTE FUNCTION tm_notify();

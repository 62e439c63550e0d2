"""Version 1: the memory tables, sessions, schedules, logs, meta and change tracking.

One table holds the three tiers (a ``tier`` column; an id lives in one tier because it
is the primary key); tags are a ``text[]`` on the row. Every table carries ``scope``,
the agent a scoped handle was opened for (``''``: the whole store), filled from the
connection's ``tm.scope`` setting: row-level security keys on it. ``seq`` is the
insertion order (SQLite's rowid): the keyword window and conversation turns follow it.
Vectors, keyword data and the graph live in tables of their own (later versions), so
updating a memory's counters rewrites no index entry of theirs.
"""

VERSION = 1
DESCRIPTION = "memory tables, sessions, schedules, audit logs, meta, change tracking"

STATEMENTS = (
    "CREATE EXTENSION IF NOT EXISTS vector",
    """CREATE TABLE tm_schema_version (
        version integer PRIMARY KEY,
        applied_at bigint NOT NULL,
        description text
    )""",
    """CREATE FUNCTION tm_scope() RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS
    $$ SELECT coalesce(current_setting('tm.scope', true), '') $$""",
    """CREATE TABLE tm_meta (
        key text PRIMARY KEY,
        value text NOT NULL
    )""",
    # One row per scope, bumped by every committing write transaction of that scope and
    # read FOR UPDATE at BEGIN: writers of one agent queue there (SQLite's BEGIN
    # IMMEDIATE), writers of different agents do not; its value is an exact data_version.
    """CREATE TABLE tm_version (
        scope text PRIMARY KEY,
        v bigint NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE tm_memories (
        seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
        scope text NOT NULL DEFAULT tm_scope(),
        id text PRIMARY KEY,
        tier text NOT NULL CHECK (tier IN ('scratchpad', 'episodic', 'semantic')),
        key text,
        content text NOT NULL,
        token_count integer NOT NULL DEFAULT 0,
        metadata text NOT NULL DEFAULT '{}',
        linked_memories text[] NOT NULL DEFAULT '{}',
        tags text[] NOT NULL DEFAULT '{}',
        session_id text,
        agent_id text,
        category text,
        source text,
        speaker text,
        importance double precision NOT NULL DEFAULT 0.5,
        retention double precision NOT NULL DEFAULT 1.0,
        access_count integer NOT NULL DEFAULT 0,
        last_accessed_at bigint,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL,
        CHECK ((tier = 'scratchpad') = (key IS NOT NULL))
    ) WITH (fillfactor = 90)""",
    "CREATE UNIQUE INDEX tm_memories_key ON tm_memories (scope, key) WHERE key IS NOT NULL",
    "CREATE INDEX tm_memories_tier ON tm_memories (scope, tier, id)",
    "CREATE INDEX tm_memories_window ON tm_memories (tier, session_id, seq)",
    "CREATE INDEX tm_memories_session ON tm_memories (session_id)",
    "CREATE INDEX tm_memories_agent ON tm_memories (agent_id)",
    "CREATE INDEX tm_memories_tags ON tm_memories USING gin (tags)",
    "CREATE INDEX tm_memories_created ON tm_memories (created_at)",
    # A memory's vector, apart from its row (counter updates rewrite no vector index
    # entry); the dimension is fixed, and the vector index made, by the first embedding.
    """CREATE TABLE tm_vectors (
        memory_id text PRIMARY KEY REFERENCES tm_memories (id) ON DELETE CASCADE,
        scope text NOT NULL DEFAULT tm_scope(),
        embedding vector NOT NULL
    )""",
    """CREATE TABLE tm_content_keys (
        memory_id text PRIMARY KEY,
        scope text NOT NULL DEFAULT tm_scope(),
        key bytea NOT NULL
    )""",
    "CREATE INDEX tm_content_keys_key ON tm_content_keys (key)",
    """CREATE TABLE tm_sessions (
        scope text NOT NULL DEFAULT tm_scope(),
        session_id text NOT NULL,
        started_at bigint NOT NULL,
        last_active_at bigint NOT NULL,
        turn_number integer NOT NULL DEFAULT 0,
        active_agents text NOT NULL DEFAULT '[]',
        scratchpad_state text NOT NULL DEFAULT '[]',
        metadata text NOT NULL DEFAULT '{}',
        is_active boolean NOT NULL DEFAULT true,
        pending_compaction boolean NOT NULL DEFAULT false,
        ended_at bigint,
        PRIMARY KEY (scope, session_id)
    )""",
    "CREATE INDEX tm_sessions_active ON tm_sessions (scope, last_active_at)",
    """CREATE TABLE tm_transcripts (
        seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
        scope text NOT NULL DEFAULT tm_scope(),
        id text PRIMARY KEY,
        session_id text NOT NULL,
        turn_number integer NOT NULL,
        role text NOT NULL,
        content text NOT NULL,
        speaker text,
        timestamp bigint NOT NULL,
        FOREIGN KEY (scope, session_id) REFERENCES tm_sessions (scope, session_id)
            ON DELETE CASCADE
    )""",
    "CREATE INDEX tm_transcripts_session ON tm_transcripts (scope, session_id, turn_number)",
    """CREATE TABLE tm_schedules (
        memory_id text PRIMARY KEY,
        scope text NOT NULL DEFAULT tm_scope(),
        next_review_at bigint NOT NULL,
        interval_ms bigint NOT NULL,
        review_count integer NOT NULL DEFAULT 0,
        ease_factor double precision NOT NULL DEFAULT 2.5,
        stability_days double precision NOT NULL DEFAULT 1.0,
        last_reviewed_at bigint
    )""",
    "CREATE INDEX tm_schedules_due ON tm_schedules (scope, next_review_at)",
    """CREATE TABLE tm_promotion_log (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        scope text NOT NULL DEFAULT tm_scope(),
        memory_id text NOT NULL,
        from_tier text NOT NULL,
        to_tier text NOT NULL,
        promoted_at bigint NOT NULL,
        reason text
    )""",
    "CREATE INDEX tm_promotion_log_memory ON tm_promotion_log (memory_id)",
    """CREATE TABLE tm_forgetting_log (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        scope text NOT NULL DEFAULT tm_scope(),
        memory_id text NOT NULL,
        tier text NOT NULL,
        forgotten_at bigint NOT NULL,
        retention double precision,
        reason text NOT NULL
    )""",
    "CREATE INDEX tm_forgetting_log_memory ON tm_forgetting_log (memory_id)",
    # Other processes' commits: one NOTIFY per writing transaction, delivered only if it
    # commits; the payload is "<writer id> <scope>" (the connection's settings).
    """CREATE FUNCTION tm_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('tm_changes',
            coalesce(current_setting('tm.writer', true), '') || ' ' || tm_scope());
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER tm_version_notify AFTER UPDATE ON tm_version
        FOR EACH ROW EXECUTE FUNCTION tm_notify()""",
)

"""Version 9: notes, their versions and links, and memories' content history.

The twin of the file's version 13: ``tm_notes`` (tags a JSON list; ``kw`` the keyword
vector of title, content and tags, kept by PostgreSQL as a generated column),
``tm_note_versions`` and ``tm_note_links`` (deleted with their note, cascade), and
``tm_memory_versions`` (deleted with their memory, cascade; in the memory's scope, which
it follows, as the memory's other rows do since version 7). Every table carries
``scope`` and row-level security as in version 4, so an agent-scoped handle reads and
writes only its own agent's notes.
"""

VERSION = 9
DESCRIPTION = "notes with versions, links and keywords; memories' content history"

SCOPED_TABLES = ("tm_notes", "tm_note_versions", "tm_note_links", "tm_memory_versions")
_SCOPE = "scope text NOT NULL DEFAULT tm_scope()"
_RULE = "tm_scope() = '' OR scope = tm_scope()"

STATEMENTS: tuple[str, ...] = (
    f"""CREATE TABLE tm_notes (
        seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
        {_SCOPE},
        id text PRIMARY KEY,
        agent_id text,
        title text NOT NULL,
        content text NOT NULL,
        tags text NOT NULL DEFAULT '[]',
        version integer NOT NULL,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL,
        created_by text,
        updated_by text,
        kw tsvector GENERATED ALWAYS AS (tm_tsv(title || ' ' || content || ' ' || tags)) STORED
    )""",
    "CREATE INDEX tm_notes_updated ON tm_notes (scope, updated_at)",
    "CREATE INDEX tm_notes_kw ON tm_notes USING gin (kw)",
    f"""CREATE TABLE tm_note_versions (
        note_id text NOT NULL REFERENCES tm_notes (id) ON DELETE CASCADE,
        {_SCOPE},
        version integer NOT NULL,
        title text NOT NULL,
        content text NOT NULL,
        tags text NOT NULL,
        author text,
        at bigint NOT NULL,
        changed text NOT NULL,
        PRIMARY KEY (note_id, version)
    )""",
    f"""CREATE TABLE tm_note_links (
        note_id text NOT NULL REFERENCES tm_notes (id) ON DELETE CASCADE,
        {_SCOPE},
        kind text NOT NULL CHECK (kind IN ('memory', 'entity')),
        target text NOT NULL,
        made_at bigint NOT NULL,
        PRIMARY KEY (note_id, kind, target)
    )""",
    "CREATE INDEX tm_note_links_target ON tm_note_links (kind, target)",
    f"""CREATE TABLE tm_memory_versions (
        memory_id text NOT NULL REFERENCES tm_memories (id) ON DELETE CASCADE,
        {_SCOPE},
        version integer NOT NULL,
        content text NOT NULL,
        author text,
        at bigint NOT NULL,
        PRIMARY KEY (memory_id, version)
    )""",
    # a memory's history is in the memory's scope, as its other rows (version 7)
    "CREATE TRIGGER tm_scope_of_memory BEFORE INSERT ON tm_memory_versions FOR EACH ROW "
    "WHEN (tm_scope() = '') EXECUTE FUNCTION tm_scope_of_memory()",
    """CREATE FUNCTION tm_memory_versions_follow() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE tm_memory_versions SET scope = NEW.scope
            WHERE memory_id = NEW.id AND scope <> NEW.scope;
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER tm_memory_versions_follow AFTER UPDATE ON tm_memories FOR EACH ROW
        WHEN (OLD.scope IS DISTINCT FROM NEW.scope)
        EXECUTE FUNCTION tm_memory_versions_follow()""",
    *(
        statement
        for table in SCOPED_TABLES
        for statement in (
            f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
            f"CREATE POLICY tm_scope_rows ON {table} USING ({_RULE}) WITH CHECK ({_RULE})",
        )
    ),
)

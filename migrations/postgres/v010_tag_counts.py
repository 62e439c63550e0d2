"""Version 10: memories per namespace tag and scope (``tm_tag_counts``), kept by a trigger.

The twin of the file's version 14. A namespace tag has the form ``family:ns:a.b`` (the
LangGraph store tags each item with one per prefix of its namespace); listing the
namespaces under a prefix read every item carrying such a tag. ``tm_tag_counts`` holds,
per scope and namespace tag, how many memories carry it (byte order, ``COLLATE "C"``, as
in SQLite, so a prefix is a range). A row trigger on ``tm_memories`` keeps it exact in the
transaction of every insert, delete and change of tags or scope; a count that falls to
zero loses its row. Existing databases are filled here. Row-level security as on every
table of agent data (version 8's form): a scoped handle counts its own agent's memories.
"""

VERSION = 10
DESCRIPTION = "memories per namespace tag and scope (tm_tag_counts), kept by a trigger"

_RULE = "tm_scope() = '' OR scope = tm_scope()"
_COUNTED = "'%:ns:%'"

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE tm_tag_counts (
        scope text NOT NULL DEFAULT tm_scope(),
        tag text COLLATE "C" NOT NULL,
        memories bigint NOT NULL,
        PRIMARY KEY (scope, tag)
    )""",
    "CREATE INDEX tm_tag_counts_tag ON tm_tag_counts (tag)",
    f"""INSERT INTO tm_tag_counts (scope, tag, memories)
        SELECT m.scope, t.tag, count(*) FROM tm_memories m, unnest(m.tags) AS t(tag)
        WHERE t.tag LIKE {_COUNTED} GROUP BY m.scope, t.tag""",
    f"""CREATE FUNCTION tm_tag_counts_follow() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP <> 'INSERT' THEN
            UPDATE tm_tag_counts c SET memories = c.memories - 1
                FROM unnest(OLD.tags) AS t(tag)
                WHERE t.tag LIKE {_COUNTED} AND c.scope = OLD.scope AND c.tag = t.tag;
            DELETE FROM tm_tag_counts c
                WHERE c.scope = OLD.scope AND c.tag = ANY (OLD.tags) AND c.memories <= 0;
        END IF;
        IF TG_OP <> 'DELETE' THEN
            INSERT INTO tm_tag_counts (scope, tag, memories)
                SELECT DISTINCT NEW.scope, t.tag, 1 FROM unnest(NEW.tags) AS t(tag)
                WHERE t.tag LIKE {_COUNTED}
                ON CONFLICT (scope, tag) DO UPDATE SET memories = tm_tag_counts.memories + 1;
        END IF;
        RETURN NULL;
    END $$""",
    f"""CREATE TRIGGER tm_memories_tag_counts_insert AFTER INSERT ON tm_memories FOR EACH ROW
        WHEN (array_to_string(NEW.tags, ' ') LIKE {_COUNTED})
        EXECUTE FUNCTION tm_tag_counts_follow()""",
    f"""CREATE TRIGGER tm_memories_tag_counts_delete AFTER DELETE ON tm_memories FOR EACH ROW
        WHEN (array_to_string(OLD.tags, ' ') LIKE {_COUNTED})
        EXECUTE FUNCTION tm_tag_counts_follow()""",
    """CREATE TRIGGER tm_memories_tag_counts_update AFTER UPDATE OF tags, scope ON tm_memories
        FOR EACH ROW
        WHEN (OLD.tags IS DISTINCT FROM NEW.tags OR OLD.scope IS DISTINCT FROM NEW.scope)
        EXECUTE FUNCTION tm_tag_counts_follow()""",
    "ALTER TABLE tm_tag_counts ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE tm_tag_counts FORCE ROW LEVEL SECURITY",
    "CREATE POLICY tm_scope_rows ON tm_tag_counts USING (scope LIKE tm_scope_pattern()) "
    f"WITH CHECK ({_RULE})",
)

"""Version 5: the embedding queue as a table kept by triggers (``tm_unembedded``).

Recall works off memories still without a vector before it searches; finding them with an
anti-join of ``tm_memories`` and ``tm_vectors`` read both tables on every recall (4-7 ms
at 10k memories, growing with the store). The queue holds exactly the memories with no
row in ``tm_vectors``: a new memory enters it unless its vector is already there, a
stored vector takes its memory out, a deleted vector (content changed, re-embedding)
puts a still existing memory back; deleting a memory removes its entry (cascade). Row-level
security as on every table of agent data (version 4).
"""

VERSION = 5
DESCRIPTION = "embedding queue kept by triggers"

STATEMENTS = (
    """CREATE TABLE tm_unembedded (
        memory_id text PRIMARY KEY REFERENCES tm_memories (id) ON DELETE CASCADE,
        scope text NOT NULL DEFAULT tm_scope(),
        seq bigint NOT NULL
    )""",
    "CREATE INDEX tm_unembedded_seq ON tm_unembedded (seq)",
    """INSERT INTO tm_unembedded (memory_id, scope, seq)
        SELECT m.id, m.scope, m.seq FROM tm_memories m
        WHERE NOT EXISTS (SELECT 1 FROM tm_vectors v WHERE v.memory_id = m.id)""",
    """CREATE FUNCTION tm_unembedded_memories() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO tm_unembedded (memory_id, scope, seq)
        SELECT n.id, n.scope, n.seq FROM new_rows n
        WHERE NOT EXISTS (SELECT 1 FROM tm_vectors v WHERE v.memory_id = n.id)
        ON CONFLICT (memory_id) DO NOTHING;
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER tm_memories_unembedded AFTER INSERT ON tm_memories
        REFERENCING NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION tm_unembedded_memories()""",
    """CREATE FUNCTION tm_unembedded_vectors() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            DELETE FROM tm_unembedded u USING new_rows n WHERE u.memory_id = n.memory_id;
        ELSE
            INSERT INTO tm_unembedded (memory_id, scope, seq)
            SELECT m.id, m.scope, m.seq FROM old_rows o JOIN tm_memories m ON m.id = o.memory_id
            WHERE NOT EXISTS (SELECT 1 FROM tm_vectors v WHERE v.memory_id = m.id)
            ON CONFLICT (memory_id) DO NOTHING;
        END IF;
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER tm_vectors_unembedded_insert AFTER INSERT ON tm_vectors
        REFERENCING NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION tm_unembedded_vectors()""",
    """CREATE TRIGGER tm_vectors_unembedded_delete AFTER DELETE ON tm_vectors
        REFERENCING OLD TABLE AS old_rows
        FOR EACH STATEMENT EXECUTE FUNCTION tm_unembedded_vectors()""",
    "ALTER TABLE tm_unembedded ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE tm_unembedded FORCE ROW LEVEL SECURITY",
    """CREATE POLICY tm_scope_rows ON tm_unembedded
        USING (tm_scope() = '' OR scope = tm_scope())
        WITH CHECK (tm_scope() = '' OR scope = tm_scope())""",
)

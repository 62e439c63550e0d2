"""Version 3: the knowledge graph (the twin of SQLite's versions 10 and 11).

- ``tm_entities``: one row per thing; the id derives from the normalised name and type,
  so it is unique per scope (two agents naming "Alice" get a row each). ``direct``: added
  through the graph API (kept until removed there), else derived from memories (collected
  when nothing supports it any more).
- ``tm_entity_aliases``: every normalised name (with its type) resolving to an entity,
  unique per scope, name and type; ``tokens`` holds the normalised name's words (GIN
  index) for recall's "which entities does this text name" (no FTS needed: no unaccent
  here, the words arrive normalised). ``seq`` keeps the aliases' order (SQLite's rowid).
- ``tm_relations``: subject -predicate-> object with confidence, weight (memories that
  support it) and ``valid_from``/``valid_to``; one current row per triple. The walk
  indexes cover the row (an index-only scan per entity and direction).
- ``tm_memory_entities`` / ``tm_memory_relations``: provenance with its ``origin``.
- ``tm_graph_queue``: memories waiting for extraction; ``tm_graph_dirty``: memories
  deleted in the open transaction.

Triggers on ``tm_memories`` queue new and edited memories and note deleted ones; a
deferred constraint trigger collects, at COMMIT, the provenance (queue row, content key)
of noted memories that are still gone and the derived rows nothing supports any more —
whoever deleted them, inside the store or not. A memory deleted and inserted again in one
transaction keeps its provenance and is not queued again. Ids compare bytewise
(``COLLATE "C"``), as in SQLite, so orders agree across backends.
"""

VERSION = 3
DESCRIPTION = "knowledge graph: entities, aliases, relations, provenance, extraction queue"

_ID = 'text COLLATE "C" NOT NULL'
_SCOPE = "scope text NOT NULL DEFAULT tm_scope()"
_WALK = "predicate, valid_from, valid_to, direct, created_at"

STATEMENTS = (
    f"""CREATE TABLE tm_entities (
        {_SCOPE},
        id {_ID},
        name text NOT NULL,
        type text COLLATE "C" NOT NULL,
        description text,
        direct boolean NOT NULL DEFAULT false,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL,
        PRIMARY KEY (scope, id)
    )""",
    "CREATE INDEX tm_entities_id ON tm_entities (id)",
    "CREATE INDEX tm_entities_type ON tm_entities (type, id)",
    f"""CREATE TABLE tm_entity_aliases (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        {_SCOPE},
        norm {_ID},
        type text COLLATE "C" NOT NULL,
        alias text NOT NULL,
        tokens text[] NOT NULL,
        entity_id {_ID},
        UNIQUE (scope, norm, type),
        FOREIGN KEY (scope, entity_id) REFERENCES tm_entities (scope, id)
            ON DELETE CASCADE ON UPDATE CASCADE
    )""",
    "CREATE INDEX tm_entity_aliases_entity ON tm_entity_aliases (entity_id)",
    "CREATE INDEX tm_entity_aliases_norm ON tm_entity_aliases (norm)",
    "CREATE INDEX tm_entity_aliases_tokens ON tm_entity_aliases USING gin (tokens)",
    f"""CREATE TABLE tm_relations (
        {_SCOPE},
        id {_ID} PRIMARY KEY,
        subject_id {_ID},
        predicate text COLLATE "C" NOT NULL,
        object_id {_ID},
        confidence double precision NOT NULL DEFAULT 1.0,
        weight double precision NOT NULL DEFAULT 0,
        valid_from bigint,
        valid_to bigint,
        direct boolean NOT NULL DEFAULT false,
        created_at bigint NOT NULL,
        FOREIGN KEY (scope, subject_id) REFERENCES tm_entities (scope, id),
        FOREIGN KEY (scope, object_id) REFERENCES tm_entities (scope, id)
    )""",
    # A walk asks each entity for its best supported relations, both ways: these give
    # them in that order and carry the row, so a hub's top few cost a few index entries.
    f"""CREATE INDEX tm_relations_subject ON tm_relations
        (subject_id, weight DESC, confidence DESC, id) INCLUDE ({_WALK}, object_id)""",
    f"""CREATE INDEX tm_relations_object ON tm_relations
        (object_id, weight DESC, confidence DESC, id) INCLUDE ({_WALK}, subject_id)""",
    """CREATE UNIQUE INDEX tm_relations_current ON tm_relations
        (scope, subject_id, predicate, object_id) WHERE valid_to IS NULL""",
    f"""CREATE TABLE tm_memory_entities (
        {_SCOPE},
        memory_id {_ID},
        entity_id {_ID},
        origin text NOT NULL,
        PRIMARY KEY (memory_id, entity_id, origin),
        FOREIGN KEY (scope, entity_id) REFERENCES tm_entities (scope, id) ON DELETE CASCADE
    )""",
    "CREATE INDEX tm_memory_entities_entity ON tm_memory_entities (entity_id, memory_id)",
    f"""CREATE TABLE tm_memory_relations (
        {_SCOPE},
        memory_id {_ID},
        relation_id {_ID} REFERENCES tm_relations (id) ON DELETE CASCADE,
        origin text NOT NULL,
        PRIMARY KEY (memory_id, relation_id, origin)
    )""",
    "CREATE INDEX tm_memory_relations_relation ON tm_memory_relations (relation_id, memory_id)",
    f"""CREATE TABLE tm_graph_queue (
        {_SCOPE},
        memory_id {_ID} PRIMARY KEY,
        attempts integer NOT NULL DEFAULT 0,
        not_before bigint NOT NULL DEFAULT 0,
        error text
    )""",
    "CREATE INDEX tm_graph_queue_due ON tm_graph_queue (not_before, memory_id)",
    f"""CREATE TABLE tm_graph_dirty (
        {_SCOPE},
        memory_id {_ID} PRIMARY KEY
    )""",
    # Derived relations, then entities, among these that nothing supports any more (an
    # entity also stays while a relation uses it); the rest re-weighed.
    """CREATE FUNCTION tm_graph_collect(ents text[], rels text[]) RETURNS void
    LANGUAGE plpgsql AS $$
    DECLARE ends text[] := '{}';
    BEGIN
        IF cardinality(rels) > 0 THEN
            WITH gone AS (
                DELETE FROM tm_relations AS r WHERE r.id = ANY (rels) AND NOT r.direct
                AND NOT EXISTS (SELECT 1 FROM tm_memory_relations AS m
                                WHERE m.relation_id = r.id)
                RETURNING r.subject_id, r.object_id)
            SELECT coalesce(array_agg(e), '{}') INTO ends
            FROM gone, unnest(ARRAY[gone.subject_id, gone.object_id]) AS e;
            UPDATE tm_relations AS r SET weight = w.n
            FROM (SELECT x.id, (SELECT count(DISTINCT m.memory_id) FROM tm_memory_relations
                                AS m WHERE m.relation_id = x.id) AS n
                  FROM tm_relations AS x WHERE x.id = ANY (rels)) AS w
            WHERE r.id = w.id AND r.weight IS DISTINCT FROM w.n;
        END IF;
        ents := ents || ends;
        IF cardinality(ents) > 0 THEN
            DELETE FROM tm_entities AS e WHERE e.id = ANY (ents) AND NOT e.direct
            AND NOT EXISTS (SELECT 1 FROM tm_memory_entities AS m
                            WHERE m.entity_id = e.id AND m.scope = e.scope)
            AND NOT EXISTS (SELECT 1 FROM tm_relations AS r
                            WHERE r.subject_id = e.id AND r.scope = e.scope)
            AND NOT EXISTS (SELECT 1 FROM tm_relations AS r
                            WHERE r.object_id = e.id AND r.scope = e.scope);
        END IF;
    END $$""",
    # At COMMIT: memories noted as deleted and still gone lose their provenance, queue
    # row and content key; what nothing supports any more goes.
    """CREATE FUNCTION tm_graph_collect_garbage() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE gone text[]; ents text[]; rels text[];
    BEGIN
        DELETE FROM tm_graph_dirty AS d
            WHERE EXISTS (SELECT 1 FROM tm_memories AS m WHERE m.id = d.memory_id);
        WITH d AS (DELETE FROM tm_graph_dirty RETURNING memory_id)
            SELECT coalesce(array_agg(memory_id), '{}') INTO gone FROM d;
        IF cardinality(gone) = 0 THEN
            RETURN NULL;
        END IF;
        WITH d AS (DELETE FROM tm_memory_entities WHERE memory_id = ANY (gone)
                   RETURNING entity_id)
            SELECT coalesce(array_agg(DISTINCT entity_id), '{}') INTO ents FROM d;
        WITH d AS (DELETE FROM tm_memory_relations WHERE memory_id = ANY (gone)
                   RETURNING relation_id)
            SELECT coalesce(array_agg(DISTINCT relation_id), '{}') INTO rels FROM d;
        DELETE FROM tm_graph_queue WHERE memory_id = ANY (gone);
        DELETE FROM tm_content_keys WHERE memory_id = ANY (gone);
        PERFORM tm_graph_collect(ents, rels);
        RETURN NULL;
    END $$""",
    """CREATE CONSTRAINT TRIGGER tm_graph_dirty_collect AFTER INSERT ON tm_graph_dirty
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
        EXECUTE FUNCTION tm_graph_collect_garbage()""",
    """CREATE FUNCTION tm_graph_memory_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NOT EXISTS (SELECT 1 FROM tm_graph_dirty WHERE memory_id = NEW.id) THEN
            INSERT INTO tm_graph_queue (memory_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
        END IF;
        RETURN NULL;
    END $$""",
    """CREATE FUNCTION tm_graph_memory_edited() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO tm_graph_queue (memory_id) VALUES (NEW.id) ON CONFLICT (memory_id)
            DO UPDATE SET attempts = 0, not_before = 0, error = NULL;
        RETURN NULL;
    END $$""",
    """CREATE FUNCTION tm_graph_memory_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO tm_graph_dirty (memory_id) VALUES (OLD.id) ON CONFLICT DO NOTHING;
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER tm_memories_graph_insert AFTER INSERT ON tm_memories
        FOR EACH ROW EXECUTE FUNCTION tm_graph_memory_inserted()""",
    """CREATE TRIGGER tm_memories_graph_update AFTER UPDATE OF content ON tm_memories
        FOR EACH ROW WHEN (OLD.content IS DISTINCT FROM NEW.content)
        EXECUTE FUNCTION tm_graph_memory_edited()""",
    """CREATE TRIGGER tm_memories_graph_delete AFTER DELETE ON tm_memories
        FOR EACH ROW EXECUTE FUNCTION tm_graph_memory_deleted()""",
    # Memories already stored get their graph built in the background.
    "INSERT INTO tm_graph_queue (scope, memory_id) SELECT scope, id FROM tm_memories",
)

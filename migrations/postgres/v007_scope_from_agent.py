"""Version 7: a memory the operator writes for an agent is in that agent's scope.

On a file an agent-scoped handle sees every memory whose ``agent_id`` is its agent,
whoever wrote it. Here, so far, a row's scope was the writer's: a memory the unscoped
(operator's) handle wrote with ``agent_id="a"`` had scope ``''`` and agent ``a``'s
handle did not see it. Now:

- ``tm_memories``: written by an unscoped connection, a memory's scope is its
  ``agent_id`` (``''`` for none), on insert and when ``agent_id`` changes; a scoped
  connection's rows keep its scope (the handle already names its own agent).
- the rows that belong to one memory (its vector, keyword-index row (already the
  memory's), schedule, content key, promotion- and forgetting-log rows, embedding
  rebuild mark, and the embedding queue where it exists) take the memory's scope when an
  unscoped connection writes them, and follow it when it changes (keyword statistics
  moved along).

Sessions and the knowledge graph keep the writer's scope: an operator's sessions and the
entities it extracts are store-wide (the operator's), as on a file.
"""

VERSION = 7
DESCRIPTION = "a memory's scope is its agent_id when an unscoped handle writes it"

MEMORY_ROWS = (
    "tm_vectors",
    "tm_content_keys",
    "tm_schedules",
    "tm_promotion_log",
    "tm_forgetting_log",
    "tm_embedding_rebuild",
)
"""Tables of rows that belong to one memory (``memory_id``), scoped like it."""
OPTIONAL_MEMORY_ROWS = ("tm_unembedded",)
"""The same, for tables a later-merged migration may have made (triggered if present)."""

_FOLLOW = "UPDATE {table} SET scope = NEW.scope WHERE memory_id = NEW.id AND scope <> NEW.scope"

_ROW_TRIGGER = (
    "CREATE TRIGGER tm_scope_of_memory BEFORE INSERT ON {table} FOR EACH ROW "
    "WHEN (tm_scope() = '') EXECUTE FUNCTION tm_scope_of_memory()"
)

STATEMENTS: tuple[str, ...] = (
    """CREATE FUNCTION tm_scope_from_agent() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.scope := coalesce(NEW.agent_id, '');
        RETURN NEW;
    END $$""",
    """CREATE TRIGGER tm_scope_from_agent BEFORE INSERT OR UPDATE OF agent_id
        ON tm_memories FOR EACH ROW WHEN (tm_scope() = '')
        EXECUTE FUNCTION tm_scope_from_agent()""",
    """CREATE FUNCTION tm_scope_of_memory() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.scope := coalesce((SELECT scope FROM tm_memories WHERE id = NEW.memory_id),
                              NEW.scope);
        RETURN NEW;
    END $$""",
    *(_ROW_TRIGGER.format(table=table) for table in MEMORY_ROWS),
    "DO $$ BEGIN IF to_regclass('tm_unembedded') IS NOT NULL THEN EXECUTE "
    + "'"
    + _ROW_TRIGGER.format(table="tm_unembedded").replace("'", "''")
    + "'"
    + "; END IF; END $$",
    # a memory moved to another scope takes its rows along (keyword statistics too)
    f"""CREATE FUNCTION tm_scope_follow() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE moved record;
    BEGIN
        {"; ".join(_FOLLOW.format(table=t) for t in MEMORY_ROWS)};
        IF to_regclass('tm_unembedded') IS NOT NULL THEN
            EXECUTE 'UPDATE tm_unembedded SET scope = $1 WHERE memory_id = $2'
                USING NEW.scope, NEW.id;
        END IF;
        UPDATE tm_keywords SET scope = NEW.scope WHERE memory_id = NEW.id
            AND scope <> NEW.scope RETURNING kw_len INTO moved;
        IF FOUND THEN
            UPDATE tm_kw_stats SET n = n - 1, tokens = tokens - moved.kw_len
                WHERE scope = OLD.scope;
            INSERT INTO tm_kw_stats AS s (scope, n, tokens) VALUES (NEW.scope, 1, moved.kw_len)
                ON CONFLICT (scope) DO UPDATE SET n = s.n + 1, tokens = s.tokens + excluded.tokens;
        END IF;
        RETURN NULL;
    END $$""",
    # any UPDATE (a column list would miss the scope the BEFORE trigger sets); the WHEN
    # keeps it off every other update's queue
    """CREATE TRIGGER tm_scope_follow AFTER UPDATE ON tm_memories FOR EACH ROW
        WHEN (OLD.scope IS DISTINCT FROM NEW.scope) EXECUTE FUNCTION tm_scope_follow()""",
)

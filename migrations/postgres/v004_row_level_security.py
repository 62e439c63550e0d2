"""Version 4: row-level security keyed on the connection's scope.

Every table holding an agent's data gets one policy: a connection whose ``tm.scope`` is
set (an agent-scoped handle) reads, changes and writes only rows of that scope; one
whose scope is ``''`` (the operator's handle) sees the whole store. New rows take the
scope from the column default (``tm_scope()``), and the check refuses a row of another
scope. ``FORCE`` applies the policy to the tables' owner too (who bypasses it
otherwise), so it holds for the role the library connects as; isolation from code that
can change its own ``tm.scope`` needs a role per tenant (see the README).

Store-wide, no policy: ``tm_schema_version``, ``tm_meta`` (embedding model, settings),
``tm_version`` (a row per scope already; writers of any scope must reach their own) and
``tm_kw_flag`` (a transaction id, no data). Keyword statistics (``tm_kw_stats``, a row
per scope) are under the policy: a scoped handle's idf is its own agent's.
"""

VERSION = 4
DESCRIPTION = "row-level security on every table of agent data, keyed on tm.scope"

SCOPED_TABLES = (
    "tm_memories",
    "tm_vectors",
    "tm_content_keys",
    "tm_sessions",
    "tm_transcripts",
    "tm_schedules",
    "tm_promotion_log",
    "tm_forgetting_log",
    "tm_keywords",
    "tm_kw_stats",
    "tm_kw_dirty",
    "tm_embedding_cache",
    "tm_embedding_rebuild",
    "tm_entities",
    "tm_entity_aliases",
    "tm_relations",
    "tm_memory_entities",
    "tm_memory_relations",
    "tm_graph_queue",
    "tm_graph_dirty",
)
"""The tables whose rows belong to one scope (each has a ``scope`` column)."""

_RULE = "tm_scope() = '' OR scope = tm_scope()"

STATEMENTS = tuple(
    statement
    for table in SCOPED_TABLES
    for statement in (
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
        f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY tm_scope_rows ON {table} USING ({_RULE}) WITH CHECK ({_RULE})",
    )
)

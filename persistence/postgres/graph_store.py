"""The knowledge graph on PostgreSQL: the shared :class:`~persistence.stores.graph.GraphStore`
over the server's database, its graph SQL, and a cache of "no alias" kept while the
handle's version says nothing changed (recall asks at every call; a round trip each
would cost more than the answer).

No :class:`~persistence.stores.graph_scope.GraphScope` filters here: on an agent-scoped
handle the graph rows carry the scope and row-level security shows the agent its own,
so facts without a source memory are allowed (a file refuses them)."""

from __future__ import annotations

from persistence.postgres.database import PgDatabase
from persistence.postgres.empty_cache import EmptyAtVersion
from persistence.postgres.sql import graph_sql
from persistence.stores.graph import GraphStore


def pg_graph_store(engine: PgDatabase) -> GraphStore:
    """The graph of the store whose database is ``engine`` (writes join its transactions)."""
    return GraphStore(engine, graph_sql, EmptyAtVersion(engine))

"""The knowledge graph on PostgreSQL: the shared :class:`~persistence.stores.graph.GraphStore`
over the server's database, its graph SQL, and a cache of "no alias" kept while the
handle's version says nothing changed (recall asks at every call; a round trip each
would cost more than the answer).

No :class:`~persistence.stores.graph_scope.GraphScope` filters here: on an agent-scoped
handle the graph rows carry the scope and row-level security shows the agent its own,
so facts without a source memory are allowed (a file refuses them)."""

from __future__ import annotations

from collections.abc import Sequence

from persistence.engine import Connection
from persistence.postgres.database import PgDatabase
from persistence.postgres.empty_cache import EmptyAtVersion
from persistence.postgres.sql import graph_sql
from persistence.statements import run_all
from persistence.stores.graph import GraphStore


def collect(conn: Connection, entity_ids: Sequence[str], relation_ids: Sequence[str]) -> None:
    """What nothing supports any more goes, in one round trip (the server's
    ``tm_graph_collect``)."""
    run_all(conn, graph_sql.collect(entity_ids, relation_ids))


def pg_graph_store(engine: PgDatabase) -> GraphStore:
    """The graph of the store whose database is ``engine`` (writes join its transactions)."""
    return GraphStore(engine, graph_sql, collect, EmptyAtVersion(engine))

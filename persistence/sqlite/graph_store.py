"""The knowledge graph of a file: the shared :class:`~persistence.stores.graph.GraphStore`
over the file's database and its graph SQL. The store collects deleted memories'
provenance just before each commit (:func:`graph_sql.collect_garbage`).

On an agent-scoped handle the graph SQL's scope predicate cuts every read to the part
the agent's memories assert (:mod:`persistence.stores.graph_scope`), and facts without a
source memory are refused: a file's graph rows record no owner (PostgreSQL's do)."""

from __future__ import annotations

from persistence.sqlite.database import Database
from persistence.sqlite.sql import graph_sql
from persistence.stores.graph import GraphStore
from persistence.stores.graph_scope import GraphScope
from persistence.stores.scope import WHOLE, Scope


def sqlite_graph_store(engine: Database, scope: Scope = WHOLE) -> GraphStore:
    """The graph of the file whose database is ``engine`` (writes join its transactions), as
    ``scope`` sees it."""
    return GraphStore(engine, graph_sql, scope=GraphScope(scope, graph_sql, sourceless_facts=False))

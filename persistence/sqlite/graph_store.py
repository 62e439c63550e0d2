"""The knowledge graph of a file: the shared :class:`~persistence.stores.graph.GraphStore`
over the file's database, its graph SQL and its collection steps
(:mod:`persistence.sqlite.graph_steps`, which also collects deleted memories' provenance
just before each commit).

On an agent-scoped handle the graph SQL's scope predicate cuts every read to the part
the agent's memories assert (:mod:`persistence.stores.graph_scope`), and facts without a
source memory are refused: a file's graph rows record no owner (PostgreSQL's do)."""

from __future__ import annotations

from persistence.sqlite import graph_steps
from persistence.sqlite.database import Database
from persistence.sqlite.sql import graph_sql
from persistence.stores.graph import GraphStore
from persistence.stores.graph_scope import GraphScope
from persistence.stores.scope import WHOLE, Scope


def sqlite_graph_store(engine: Database, scope: Scope = WHOLE) -> GraphStore:
    """The graph of the file whose database is ``engine`` (writes join its transactions), as
    ``scope`` sees it."""
    scoped = GraphScope(scope, graph_sql, sourceless_facts=False)
    return GraphStore(engine, graph_sql, graph_steps.collect, scope=scoped)

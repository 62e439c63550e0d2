"""The knowledge graph of a file: the shared :class:`~persistence.stores.graph.GraphStore`
over the file's database and its graph SQL. The store collects deleted memories'
provenance just before each commit (:func:`graph_sql.collect_garbage`)."""

from __future__ import annotations

from persistence.sqlite.database import Database
from persistence.sqlite.sql import graph_sql
from persistence.stores.graph import GraphStore


def sqlite_graph_store(db: Database) -> GraphStore:
    """The graph of the file whose database is ``db`` (writes join its transactions)."""
    return GraphStore(db, graph_sql)

"""The knowledge graph's part of a JSON import, written once for both engines.

The document's side (tables, fields, checks) is :mod:`persistence.transfer.graph_io`;
this module writes a checked :class:`~persistence.transfer.graph_io.GraphDocument`
inside the import's transaction: the lookups and writes both engines build alike
(:class:`GraphWriteStatements`) and the graph family's reads and provenance writes
(over its :class:`~persistence.stores.graph_engine.GraphSql`) run here; what a merge
leaves unsupported is collected by the engine's own step. Replace mode takes the
document's graph as it is. Merge mode joins entities by id and name, relations by id
or by the same current ``subject -predicate-> object``; the provenance of a memory
follows the version of that memory the merge kept; whatever is left unsupported is
collected in the same transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from persistence import statements
from persistence.engine import Connection
from persistence.statements import Statement, run, value
from persistence.stores import graph_reads
from persistence.stores.graph_engine import Collect, GraphSql
from persistence.stores.graph_rows import add_provenance
from persistence.transfer.graph_io import GRAPH_TABLES, GraphDocument
from persistence.transfer.json_import import Count, Mode


class GraphWriteStatements(Protocol):
    """The graph writes and lookups of an import both engines build alike."""

    def insert_graph_row(self, table: str, row: Mapping[str, Any]) -> Statement: ...
    def unqueue(self, memory_ids: Iterable[str]) -> Statement: ...
    def mark_direct(self, eid: str, direct: bool) -> Statement: ...
    def has_relation(self, rid: str) -> Statement: ...
    def current_twin(self, triple: Sequence[str]) -> Statement: ...


def write_graph(
    conn: Connection, sql: GraphWriteStatements, graph: GraphSql, collect: Collect,
    doc: GraphDocument, mode: Mode, written: set[str], count: Count,
) -> None:  # fmt: skip
    """Write the document's graph (after its memories; ``written`` are the memories
    whose document version was written)."""
    if mode == "replace":
        for table in GRAPH_TABLES:
            for _, row in doc.rows[table]:
                run(conn, sql.insert_graph_row(table, row))
                count(table, "inserted")
        return
    _merge_graph(conn, sql, graph, collect, doc, written, count)


def _merge_graph(
    conn: Connection, sql: GraphWriteStatements, graph: GraphSql, collect: Collect,
    doc: GraphDocument, written: set[str], count: Count,
) -> None:  # fmt: skip
    touched_entities: list[str] = []
    touched_relations: list[str] = []
    if written:  # the document's version of these memories won: their old facts go
        touched_entities, touched_relations = graph_reads.drop_provenance(
            graph, conn, sorted(written)
        )
        run(conn, sql.unqueue(written))
    entity_map: dict[str, str] = {}
    for _, row in doc.rows["entities"]:
        if not graph_reads.entity_exists(graph, conn, row["id"]):
            run(conn, sql.insert_graph_row("entities", row))
            count("entities", "inserted")
        else:
            run(conn, sql.mark_direct(row["id"], row["direct"]))
            count("entities", "skipped")
        entity_map[row["id"]] = row["id"]
    for _, row in doc.rows["entity_aliases"]:
        found = graph_reads.resolve(graph, conn, row["norm"], row["type"])
        if found is None:
            run(conn, sql.insert_graph_row("entity_aliases", row))
            count("entity_aliases", "inserted")
        else:
            count("entity_aliases", "skipped")
            if found != row["entity_id"]:
                entity_map[row["entity_id"]] = found  # the name is the store's entity's
    relation_map = _merge_relations(conn, sql, doc, entity_map, touched_relations, count)
    for _, row in doc.rows["memory_entities"]:
        if row["memory_id"] not in written:
            count("memory_entities", "skipped")
            continue
        eid = entity_map.get(row["entity_id"], row["entity_id"])
        add_provenance(graph, conn, row["memory_id"], [eid], [], row["origin"])
        count("memory_entities", "inserted")
    for _, row in doc.rows["memory_relations"]:
        if row["memory_id"] not in written:
            count("memory_relations", "skipped")
            continue
        rid = relation_map[row["relation_id"]]
        add_provenance(graph, conn, row["memory_id"], [], [rid], row["origin"])
        touched_relations.append(rid)
        count("memory_relations", "inserted")
    for _, row in doc.rows["graph_queue"]:
        if row["memory_id"] not in written:
            count("graph_queue", "skipped")
            continue
        run(conn, sql.insert_graph_row("graph_queue", row))
        count("graph_queue", "inserted")
    collect(conn, [*touched_entities, *entity_map.values()], touched_relations)


def _merge_relations(
    conn: Connection, sql: GraphWriteStatements, doc: GraphDocument, entity_map: dict[str, str],
    touched: list[str], count: Count,
) -> dict[str, str]:  # fmt: skip
    """Insert the document's relations the store lacks (by id, or by the same current
    triple); document relation id -> the store's."""
    relation_map: dict[str, str] = {}
    for _, row in doc.rows["relations"]:
        subject = entity_map.get(row["subject_id"], row["subject_id"])
        obj = entity_map.get(row["object_id"], row["object_id"])
        held = statements.row(conn, sql.has_relation(row["id"])) is not None
        twin = row["id"] if held else None
        if twin is None and row["valid_to"] is None:
            current = value(conn, sql.current_twin((subject, row["predicate"], obj)))
            twin = None if current is None else str(current)
        if twin is not None:
            relation_map[row["id"]] = twin
            count("relations", "skipped")
            continue
        inserted = {**row, "subject_id": subject, "object_id": obj}
        run(conn, sql.insert_graph_row("relations", inserted))
        relation_map[row["id"]] = row["id"]
        touched.append(row["id"])
        count("relations", "inserted")
    return relation_map

"""The knowledge graph's part of a JSON import, written once for both engines.

The document's side (tables, fields, checks) is :mod:`persistence.transfer.graph_io`;
this module writes a checked :class:`~persistence.transfer.graph_io.GraphDocument`
inside the import's transaction through the engine's :class:`GraphWriteSql`. Replace
mode takes the document's graph as it is. Merge mode joins entities by id and name,
relations by id or by the same current ``subject -predicate-> object``; the provenance
of a memory follows the version of that memory the merge kept; whatever is left
unsupported is collected in the same transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from persistence.engine import Connection
from persistence.transfer.graph_io import GRAPH_TABLES, GraphDocument
from persistence.transfer.json_import import Count, Mode


class GraphWriteSql(Protocol):
    """The engine's graph writes and lookups of an import."""

    def insert_graph_row(self, conn: Connection, table: str, row: Mapping[str, Any]) -> None: ...
    def drop_provenance(
        self, conn: Connection, memory_ids: Sequence[str]
    ) -> tuple[list[str], list[str]]: ...
    def unqueue(self, conn: Connection, memory_ids: Iterable[str]) -> None: ...
    def has_entity(self, conn: Connection, eid: str) -> bool: ...
    def mark_direct(self, conn: Connection, eid: str, direct: bool) -> None: ...
    def resolve(self, conn: Connection, norm: str, etype: str) -> str | None: ...
    def has_relation(self, conn: Connection, rid: str) -> bool: ...
    def current_twin(self, conn: Connection, triple: Sequence[str]) -> str | None: ...
    def add_provenance(
        self,
        conn: Connection,
        memory_id: str,
        entity_ids: Sequence[str],
        relation_ids: Sequence[str],
        origin: str,
    ) -> None: ...
    def collect(
        self, conn: Connection, entity_ids: Sequence[str], relation_ids: Sequence[str]
    ) -> None: ...


def write_graph(
    conn: Connection, sql: GraphWriteSql, doc: GraphDocument, mode: Mode, written: set[str],
    count: Count,
) -> None:  # fmt: skip
    """Write the document's graph (after its memories; ``written`` are the memories
    whose document version was written)."""
    if mode == "replace":
        for table in GRAPH_TABLES:
            for _, row in doc.rows[table]:
                sql.insert_graph_row(conn, table, row)
                count(table, "inserted")
        return
    _merge_graph(conn, sql, doc, written, count)


def _merge_graph(
    conn: Connection, sql: GraphWriteSql, doc: GraphDocument, written: set[str], count: Count
) -> None:
    touched_entities: list[str] = []
    touched_relations: list[str] = []
    if written:  # the document's version of these memories won: their old facts go
        touched_entities, touched_relations = sql.drop_provenance(conn, sorted(written))
        sql.unqueue(conn, written)
    entity_map: dict[str, str] = {}
    for _, row in doc.rows["entities"]:
        if not sql.has_entity(conn, row["id"]):
            sql.insert_graph_row(conn, "entities", row)
            count("entities", "inserted")
        else:
            sql.mark_direct(conn, row["id"], row["direct"])
            count("entities", "skipped")
        entity_map[row["id"]] = row["id"]
    for _, row in doc.rows["entity_aliases"]:
        found = sql.resolve(conn, row["norm"], row["type"])
        if found is None:
            sql.insert_graph_row(conn, "entity_aliases", row)
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
        sql.add_provenance(conn, row["memory_id"], [eid], [], row["origin"])
        count("memory_entities", "inserted")
    for _, row in doc.rows["memory_relations"]:
        if row["memory_id"] not in written:
            count("memory_relations", "skipped")
            continue
        rid = relation_map[row["relation_id"]]
        sql.add_provenance(conn, row["memory_id"], [], [rid], row["origin"])
        touched_relations.append(rid)
        count("memory_relations", "inserted")
    for _, row in doc.rows["graph_queue"]:
        if row["memory_id"] not in written:
            count("graph_queue", "skipped")
            continue
        sql.insert_graph_row(conn, "graph_queue", row)
        count("graph_queue", "inserted")
    sql.collect(conn, [*touched_entities, *entity_map.values()], touched_relations)


def _merge_relations(
    conn: Connection, sql: GraphWriteSql, doc: GraphDocument, entity_map: dict[str, str],
    touched: list[str], count: Count,
) -> dict[str, str]:  # fmt: skip
    """Insert the document's relations the store lacks (by id, or by the same current
    triple); document relation id -> the store's."""
    relation_map: dict[str, str] = {}
    for _, row in doc.rows["relations"]:
        subject = entity_map.get(row["subject_id"], row["subject_id"])
        obj = entity_map.get(row["object_id"], row["object_id"])
        twin = row["id"] if sql.has_relation(conn, row["id"]) else None
        if twin is None and row["valid_to"] is None:
            twin = sql.current_twin(conn, (subject, row["predicate"], obj))
        if twin is not None:
            relation_map[row["id"]] = twin
            count("relations", "skipped")
            continue
        sql.insert_graph_row(conn, "relations", {**row, "subject_id": subject, "object_id": obj})
        relation_map[row["id"]] = row["id"]
        touched.append(row["id"])
        count("relations", "inserted")
    return relation_map

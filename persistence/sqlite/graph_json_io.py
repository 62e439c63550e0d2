"""The knowledge graph's part of a JSON export and import, on SQLite.

The document's side (tables, fields, checks) is :mod:`persistence.transfer.graph_io`;
this module reads the graph tables for an export and writes a checked
:class:`~persistence.transfer.graph_io.GraphDocument` inside the import's transaction.
Replace mode takes the document's graph as it is. Merge mode joins entities by id and
name, relations by id or by the same current ``subject -predicate-> object``; the
provenance of a memory follows the version of that memory the merge kept; whatever is
left unsupported is collected in the same transaction.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import apsw

from persistence.sqlite.sql import dedup_sql, graph_sql, json_io_sql
from persistence.transfer.graph_io import GRAPH_TABLES, GraphDocument
from persistence.transfer.json_import import Count, Mode


def row_count(conn: apsw.Connection) -> int:
    """Rows the graph adds to an export."""
    if not graph_sql.has_graph(conn):
        return 0
    return sum(json_io_sql.row_count(conn, t) for t in GRAPH_TABLES)


def pages(conn: apsw.Connection, table: str, size: int) -> Iterator[list[apsw.SQLiteValues]]:
    """One graph table's rows in pages of ``size``, in a stable order."""
    rows = json_io_sql.graph_rows(conn, table)
    while page := list(itertools.islice(rows, size)):
        yield page


def write_graph(
    conn: apsw.Connection,
    doc: GraphDocument,
    mode: Mode,
    written: set[str],
    all_memories: Sequence[str],
    count: Count,
) -> None:
    """Write the document's graph (after its memories) in the import's transaction.

    ``written`` are the memories whose document version was written; without a graph in
    the document they are queued for extraction.
    """
    if not graph_sql.has_graph(conn):
        return
    dedup_sql.rebuild(conn)  # derived from the memories as imported
    if mode == "replace":
        json_io_sql.clear_graph(conn)
    if not doc.present:
        graph_sql.enqueue(conn, sorted(written if mode == "merge" else set(all_memories)))
        graph_sql.collect_garbage(conn)
        return
    if mode == "replace":
        for table in GRAPH_TABLES:
            for _, row in doc.rows[table]:
                json_io_sql.insert_graph_row(conn, table, row)
                count(table, "inserted")
        return
    _merge_graph(conn, doc, written, count)


def _merge_graph(
    conn: apsw.Connection, doc: GraphDocument, written: set[str], count: Count
) -> None:
    touched_entities: list[str] = []
    touched_relations: list[str] = []
    # The document's version of these memories won: their old provenance goes.
    if written:
        touched_entities, touched_relations = graph_sql.drop_provenance(conn, sorted(written))
        json_io_sql.unqueue(conn, written)
    entity_map: dict[str, str] = {}
    for _, row in doc.rows["entities"]:
        if not json_io_sql.has_entity(conn, row["id"]):
            json_io_sql.insert_graph_row(conn, "entities", row)
            count("entities", "inserted")
        else:
            json_io_sql.mark_direct(conn, row["id"], row["direct"])
            count("entities", "skipped")
        entity_map[row["id"]] = row["id"]
    for _, row in doc.rows["entity_aliases"]:
        found = graph_sql.resolve(conn, row["norm"], row["type"])
        if found is None:
            json_io_sql.insert_graph_row(conn, "entity_aliases", row)
            count("entity_aliases", "inserted")
        else:
            count("entity_aliases", "skipped")
            if found != row["entity_id"]:
                entity_map[row["entity_id"]] = found  # the name is the file's entity's
    relation_map: dict[str, str] = {}
    for _, row in doc.rows["relations"]:
        subject = entity_map.get(row["subject_id"], row["subject_id"])
        obj = entity_map.get(row["object_id"], row["object_id"])
        if json_io_sql.has_relation(conn, row["id"]):
            relation_map[row["id"]] = row["id"]
            count("relations", "skipped")
            continue
        twin = None
        if row["valid_to"] is None:
            twin = json_io_sql.current_twin(conn, (subject, row["predicate"], obj))
        if twin is not None:
            relation_map[row["id"]] = twin
            count("relations", "skipped")
            continue
        json_io_sql.insert_graph_row(
            conn, "relations", {**row, "subject_id": subject, "object_id": obj}
        )
        relation_map[row["id"]] = row["id"]
        touched_relations.append(row["id"])
        count("relations", "inserted")
    for _, row in doc.rows["memory_entities"]:
        if row["memory_id"] not in written:
            count("memory_entities", "skipped")
            continue
        eid = entity_map.get(row["entity_id"], row["entity_id"])
        graph_sql.add_provenance(conn, row["memory_id"], [eid], [], row["origin"])
        count("memory_entities", "inserted")
    for _, row in doc.rows["memory_relations"]:
        if row["memory_id"] not in written:
            count("memory_relations", "skipped")
            continue
        rid = relation_map[row["relation_id"]]
        graph_sql.add_provenance(conn, row["memory_id"], [], [rid], row["origin"])
        touched_relations.append(rid)
        count("memory_relations", "inserted")
    for _, row in doc.rows["graph_queue"]:
        if row["memory_id"] not in written:
            count("graph_queue", "skipped")
            continue
        json_io_sql.insert_graph_row(conn, "graph_queue", row)
        count("graph_queue", "inserted")
    touched_entities += list(entity_map.values())
    graph_sql.collect(conn, touched_entities, touched_relations)
    graph_sql.collect_garbage(conn)

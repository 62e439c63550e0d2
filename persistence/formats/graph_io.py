"""The knowledge graph in JSON exports and imports.

An export lists six more tables after the memory tables: ``entities``,
``entity_aliases``, ``relations``, ``memory_entities``, ``memory_relations`` and
``graph_queue`` (memories still waiting for extraction), each in a stable order, so an
export imported into an empty file exports the same document again. Documents without
them (older exports) import as before, and their memories are queued for extraction.

Replace mode takes the document's graph as it is. Merge mode joins entities by id and
name, relations by id or by the same current ``subject -predicate-> object``; the
provenance of a memory follows the version of that memory the merge kept; whatever is
left unsupported is collected in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import apsw

from persistence import graph_records
from persistence.errors import InvalidImportError
from persistence.sqlite.connection import query_one, query_value
from persistence.sqlite.sql import dedup_sql, graph_sql

GRAPH_TABLES = (
    "entities", "entity_aliases", "relations", "memory_entities", "memory_relations",
    "graph_queue",
)  # fmt: skip
_FIELDS: dict[str, tuple[str, ...]] = {
    "entities": ("id", "name", "type", "description", "direct", "created_at", "updated_at"),
    "entity_aliases": ("norm", "type", "alias", "entity_id"),
    "relations": (
        "id", "subject_id", "predicate", "object_id", "confidence", "weight", "valid_from",
        "valid_to", "direct", "created_at",
    ),
    "memory_entities": ("memory_id", "entity_id", "origin"),
    "memory_relations": ("memory_id", "relation_id", "origin"),
    "graph_queue": ("memory_id", "attempts", "not_before", "error"),
}  # fmt: skip
_ORDER = {
    "entities": "id",
    "entity_aliases": "rowid",
    "relations": "id",
    "memory_entities": "memory_id, entity_id, origin",
    "memory_relations": "memory_id, relation_id, origin",
    "graph_queue": "memory_id",
}
_BOOLS = {("entities", "direct"), ("relations", "direct")}
_KEYS = {
    "entities": ("id",),
    "entity_aliases": ("norm", "type"),
    "relations": ("id",),
    "memory_entities": ("memory_id", "entity_id", "origin"),
    "memory_relations": ("memory_id", "relation_id", "origin"),
    "graph_queue": ("memory_id",),
}


def exported_rows(conn: apsw.Connection, table: str) -> Iterator[dict[str, Any]]:
    """The rows of one graph table as export objects, in a stable order."""
    if not graph_sql.has_graph(conn):
        return
    names = _FIELDS[table]
    sql = f"SELECT {', '.join(names)} FROM {table} ORDER BY {_ORDER[table]}"
    for row in conn.execute(sql):
        out = dict(zip(names, row, strict=True))
        for t, name in _BOOLS:
            if t == table:
                out[name] = bool(out[name])
        yield out


def row_count(conn: apsw.Connection) -> int:
    """Rows the graph adds to an export."""
    if not graph_sql.has_graph(conn):
        return 0
    return sum(int(query_value(conn, f"SELECT count(*) FROM {t}")) for t in GRAPH_TABLES)


@dataclass
class GraphDocument:
    """The graph tables of a document, checked; ``present`` is False for old exports."""

    present: bool = False
    rows: dict[str, list[tuple[str, dict[str, Any]]]] = field(default_factory=dict)

    @property
    def row_count(self) -> int:
        return sum(len(r) for r in self.rows.values())


def _fail(where: str, problem: str) -> InvalidImportError:
    return InvalidImportError(where, problem)


def _check_value(table: str, name: str, value: Any, where: str) -> None:
    nullable = name in ("description", "valid_from", "valid_to", "error")
    if value is None and nullable:
        return
    if (table, name) in _BOOLS:
        if not isinstance(value, bool):
            raise _fail(where, f"must be true or false, got {value!r}")
    elif name in ("confidence", "weight"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _fail(where, f"must be a number, got {value!r}")
        if name == "confidence" and not 0 <= value <= 1:
            raise _fail(where, f"must be within [0, 1], got {value!r}")
    elif name in ("created_at", "updated_at", "valid_from", "valid_to", "attempts", "not_before"):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
            raise _fail(where, f"must be an integer >= 0, got {value!r}")
    elif not isinstance(value, str) or not value:
        raise _fail(where, f"must be a non-empty string, got {value!r}")


def read_graph(tables: Mapping[str, Any], memory_ids: set[str]) -> GraphDocument:
    """Check the graph tables of a document (all or none must be there)."""
    present = [t for t in GRAPH_TABLES if t in tables]
    if not present:
        return GraphDocument()
    if len(present) != len(GRAPH_TABLES):
        missing = sorted(set(GRAPH_TABLES) - set(present))
        raise _fail("$.tables", f"has part of the knowledge graph: {missing} missing")
    doc = GraphDocument(present=True)
    for table in GRAPH_TABLES:
        if not isinstance(tables[table], list):
            raise _fail(f"tables.{table}", "must be a list")
        checked = []
        keys: set[tuple[Any, ...]] = set()
        for n, row in enumerate(tables[table]):
            where = f"tables.{table}[{n}]"
            if not isinstance(row, dict) or set(row) != set(_FIELDS[table]):
                raise _fail(where, f"must be an object with exactly {list(_FIELDS[table])}")
            for name in _FIELDS[table]:
                _check_value(table, name, row[name], f"{where}.{name}")
            key = tuple(row[k] for k in _KEYS[table])
            if key in keys:
                raise _fail(where, f"repeats {'/'.join(_KEYS[table])} {key!r}")
            keys.add(key)
            checked.append((where, row))
        doc.rows[table] = checked
    _check_graph_references(doc, memory_ids)
    return doc


def _check_graph_references(doc: GraphDocument, memory_ids: set[str]) -> None:
    entities = {r["id"] for _, r in doc.rows["entities"]}
    relations = {r["id"] for _, r in doc.rows["relations"]}
    for where, r in doc.rows["entities"]:
        if not graph_records.TYPE.match(r["type"]):
            raise _fail(f"{where}.type", f"{r['type']!r} is not a short identifier")
    for where, r in doc.rows["entity_aliases"]:
        if r["entity_id"] not in entities:
            raise _fail(f"{where}.entity_id", f"names entity {r['entity_id']!r}, not there")
    for where, r in doc.rows["relations"]:
        if not graph_records.PREDICATE.match(r["predicate"]):
            raise _fail(f"{where}.predicate", f"{r['predicate']!r} is not a short identifier")
        for end in ("subject_id", "object_id"):
            if r[end] not in entities:
                raise _fail(f"{where}.{end}", f"names entity {r[end]!r}, not there")
    for table, key, known in (
        ("memory_entities", "entity_id", entities),
        ("memory_relations", "relation_id", relations),
    ):
        for where, r in doc.rows[table]:
            if r[key] not in known:
                raise _fail(f"{where}.{key}", f"names {r[key]!r}, not there")
            if r["memory_id"] not in memory_ids:
                raise _fail(f"{where}.memory_id", f"names memory {r['memory_id']!r}, not there")
            if r["origin"] not in (graph_records.CALLER, graph_records.EXTRACTOR):
                raise _fail(f"{where}.origin", "must be 'caller' or 'extractor'")
    for where, r in doc.rows["graph_queue"]:
        if r["memory_id"] not in memory_ids:
            raise _fail(f"{where}.memory_id", f"names memory {r['memory_id']!r}, not there")


def _insert(conn: apsw.Connection, table: str, row: Mapping[str, Any]) -> None:
    names = _FIELDS[table]
    marks = ", ".join("?" for _ in names)
    values = [int(row[n]) if (table, n) in _BOOLS else row[n] for n in names]
    conn.execute(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})", values)


def clear(conn: apsw.Connection) -> None:
    """Empty every graph table (replace mode)."""
    for table in ("memory_relations", "memory_entities", "relations", "entity_aliases",
                  "entities", "graph_queue", "graph_dirty"):  # fmt: skip
        conn.execute(f"DELETE FROM {table}")


def write_graph(
    conn: apsw.Connection,
    doc: GraphDocument,
    mode: str,
    written: set[str],
    all_memories: Sequence[str],
    count: Callable[[str, str], None],
) -> None:
    """Write the document's graph (after its memories) in the import's transaction.

    ``written`` are the memories whose document version was written; without a graph in
    the document they are queued for extraction.
    """
    if not graph_sql.has_graph(conn):
        return
    dedup_sql.rebuild(conn)  # derived from the memories as imported
    if mode == "replace":
        clear(conn)
    if not doc.present:
        graph_sql.enqueue(conn, sorted(written if mode == "merge" else set(all_memories)))
        graph_sql.collect_garbage(conn)
        return
    if mode == "replace":
        for table in GRAPH_TABLES:
            for _, row in doc.rows[table]:
                _insert(conn, table, row)
                count(table, "inserted")
        return
    _merge_graph(conn, doc, written, count)


def _merge_graph(
    conn: apsw.Connection, doc: GraphDocument, written: set[str], count: Callable[[str, str], None]
) -> None:
    touched_entities: list[str] = []
    touched_relations: list[str] = []
    # The document's version of these memories won: their old provenance goes.
    if written:
        touched_entities, touched_relations = graph_sql.drop_provenance(conn, sorted(written))
        conn.execute(
            "DELETE FROM graph_queue WHERE memory_id IN (SELECT value FROM json_each(?))",
            (graph_sql._ids(written),),
        )
    entity_map: dict[str, str] = {}
    for _, row in doc.rows["entities"]:
        current = query_one(conn, "SELECT 1 FROM entities WHERE id = ?", (row["id"],))
        if current is None:
            _insert(conn, "entities", row)
            count("entities", "inserted")
        else:
            conn.execute(
                "UPDATE entities SET direct = max(direct, ?) WHERE id = ?",
                (int(row["direct"]), row["id"]),
            )
            count("entities", "skipped")
        entity_map[row["id"]] = row["id"]
    for _, row in doc.rows["entity_aliases"]:
        found = graph_sql.resolve(conn, row["norm"], row["type"])
        if found is None:
            _insert(conn, "entity_aliases", row)
            count("entity_aliases", "inserted")
        else:
            count("entity_aliases", "skipped")
            if found != row["entity_id"]:
                entity_map[row["entity_id"]] = found  # the name is the file's entity's
    relation_map: dict[str, str] = {}
    for _, row in doc.rows["relations"]:
        subject = entity_map.get(row["subject_id"], row["subject_id"])
        obj = entity_map.get(row["object_id"], row["object_id"])
        if query_one(conn, "SELECT 1 FROM relations WHERE id = ?", (row["id"],)) is not None:
            relation_map[row["id"]] = row["id"]
            count("relations", "skipped")
            continue
        twin = None
        if row["valid_to"] is None:
            twin = query_one(
                conn,
                "SELECT id FROM relations WHERE subject_id = ? AND predicate = ? "
                "AND object_id = ? AND valid_to IS NULL",
                (subject, row["predicate"], obj),
            )
        if twin is not None:
            relation_map[row["id"]] = str(twin[0])
            count("relations", "skipped")
            continue
        _insert(conn, "relations", {**row, "subject_id": subject, "object_id": obj})
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
        _insert(conn, "graph_queue", row)
        count("graph_queue", "inserted")
    touched_entities += list(entity_map.values())
    graph_sql.collect(conn, touched_entities, touched_relations)
    graph_sql.collect_garbage(conn)

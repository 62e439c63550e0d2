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

This module holds the graph's part of the document (its tables, fields and checks); a
backend does the reading and writing (:mod:`persistence.transfer.graph_write`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from persistence import graph_records
from persistence.errors import InvalidImportError

GRAPH_TABLES = (
    "entities", "entity_aliases", "relations", "memory_entities", "memory_relations",
    "graph_queue",
)  # fmt: skip
GRAPH_FIELDS: dict[str, tuple[str, ...]] = {
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
"""Each graph table's fields, in the order of an export row."""
GRAPH_BOOLS = frozenset({("entities", "direct"), ("relations", "direct")})
"""The (table, field) pairs that are true/false in the document."""
_KEYS = {
    "entities": ("id",),
    "entity_aliases": ("norm", "type"),
    "relations": ("id",),
    "memory_entities": ("memory_id", "entity_id", "origin"),
    "memory_relations": ("memory_id", "relation_id", "origin"),
    "graph_queue": ("memory_id",),
}


def row_to_json(table: str, values: Sequence[Any]) -> dict[str, Any]:
    """One graph row (values in :data:`GRAPH_FIELDS` order) as an export object."""
    out = dict(zip(GRAPH_FIELDS[table], values, strict=True))
    for t, name in GRAPH_BOOLS:
        if t == table:
            out[name] = bool(out[name])
    return out


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
    if (table, name) in GRAPH_BOOLS:
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
            if not isinstance(row, dict) or set(row) != set(GRAPH_FIELDS[table]):
                raise _fail(where, f"must be an object with exactly {list(GRAPH_FIELDS[table])}")
            for name in GRAPH_FIELDS[table]:
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

"""SQL the JSON export and import need beyond the record families' own: row counts,
the graph tables read and written whole, the emptying of a table for a replace, and the
graph lookups of a merge.

Table and column names come from the closed lists of :mod:`persistence.transfer`, never
from a document; values are always parameters.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import apsw
import orjson

from persistence.sqlite.connection import query_one, query_value
from persistence.transfer.graph_io import GRAPH_BOOLS, GRAPH_FIELDS
from persistence.transfer.json_export import TABLES

_ORDER = {
    "entities": "id",
    "entity_aliases": "rowid",
    "relations": "id",
    "memory_entities": "memory_id, entity_id, origin",
    "memory_relations": "memory_id, relation_id, origin",
    "graph_queue": "memory_id",
}
"""Each graph table's stable export order."""
_CLEARED = (
    "memory_relations", "memory_entities", "relations", "entity_aliases", "entities",
    "graph_queue", "graph_dirty",
)  # fmt: skip
"""The graph's tables in an order that empties them without breaking a foreign key."""


def row_count(conn: apsw.Connection, table: str) -> int:
    """How many rows ``table`` (one of the export's tables) holds."""
    if table not in TABLES and table not in GRAPH_FIELDS:
        raise ValueError(table)
    return int(query_value(conn, f"SELECT count(*) FROM {table}"))


def graph_rows(conn: apsw.Connection, table: str) -> Iterator[apsw.SQLiteValues]:
    """Every row of one graph table, values in the export's field order, in a stable order."""
    names = GRAPH_FIELDS[table]
    yield from conn.execute(f"SELECT {', '.join(names)} FROM {table} ORDER BY {_ORDER[table]}")


def insert_graph_row(conn: apsw.Connection, table: str, row: Mapping[str, Any]) -> None:
    """Insert one document row into a graph table (true/false stored as 1/0)."""
    names = GRAPH_FIELDS[table]
    marks = ", ".join("?" for _ in names)
    values = [int(row[n]) if (table, n) in GRAPH_BOOLS else row[n] for n in names]
    conn.execute(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})", values)


def clear_graph(conn: apsw.Connection) -> None:
    """Empty every graph table (replace mode)."""
    for table in _CLEARED:
        conn.execute(f"DELETE FROM {table}")


def clear_schedules_and_forgetting_log(conn: apsw.Connection) -> None:
    """Empty ``repetition_schedules`` and ``forgetting_log`` (replace mode)."""
    conn.execute("DELETE FROM repetition_schedules")
    conn.execute("DELETE FROM forgetting_log")


def unqueue(conn: apsw.Connection, memory_ids: Iterable[str]) -> None:
    """Take these memories off the extraction queue."""
    conn.execute(
        "DELETE FROM graph_queue WHERE memory_id IN (SELECT value FROM json_each(?))",
        (orjson.dumps(sorted(set(memory_ids))).decode(),),
    )


def has_entity(conn: apsw.Connection, eid: str) -> bool:
    """True if an entity with this id exists."""
    return query_one(conn, "SELECT 1 FROM entities WHERE id = ?", (eid,)) is not None


def mark_direct(conn: apsw.Connection, eid: str, direct: bool) -> None:
    """An entity becomes direct if the document says so (never the other way)."""
    conn.execute("UPDATE entities SET direct = max(direct, ?) WHERE id = ?", (int(direct), eid))


def has_relation(conn: apsw.Connection, rid: str) -> bool:
    """True if a relation with this id exists."""
    return query_one(conn, "SELECT 1 FROM relations WHERE id = ?", (rid,)) is not None


def current_twin(conn: apsw.Connection, triple: Sequence[str]) -> str | None:
    """The id of the current relation ``subject -predicate-> object``, if there is one."""
    twin = query_one(
        conn,
        "SELECT id FROM relations WHERE subject_id = ? AND predicate = ? "
        "AND object_id = ? AND valid_to IS NULL",
        tuple(triple),
    )
    return None if twin is None else str(twin[0])

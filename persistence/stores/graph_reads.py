"""The knowledge graph's single reads (and the provenance drop that returns ids),
written once: each runs an engine's statement (:class:`~persistence.stores.graph_engine.GraphSql`)
with :mod:`persistence.statements` on the caller's connection and decodes its rows.
Used by the shared graph store and by the engines' import code."""

from __future__ import annotations

from collections.abc import Sequence

from persistence.engine import Connection
from persistence.graph_records import Relation
from persistence.statements import Statement, column, row, rows, value
from persistence.stores.graph_engine import COUNT_NAMES, GraphSql


def _text(found: object) -> str | None:
    return None if found is None else str(found)


def has_graph(sql: GraphSql, conn: Connection) -> bool:
    """True if the store has the graph's tables (no round trip where it always has)."""
    statement = sql.has_graph()
    return statement is None or row(conn, statement) is not None


def entity_exists(sql: GraphSql, conn: Connection, eid: str, *, own: bool = False) -> bool:
    """True if an entity has this id (``own``: see :meth:`GraphSql.entity_exists`)."""
    return row(conn, sql.entity_exists(eid, own=own)) is not None


def resolve(
    sql: GraphSql, conn: Connection, norm: str, type_: str | None, *, own: bool = False
) -> str | None:
    """The entity a normalised name (of a type, or of any) resolves to (``own``: see
    :meth:`GraphSql.entity_exists`)."""
    return _text(value(conn, sql.resolve(norm, type_, own=own)))


def current_relation(
    sql: GraphSql, conn: Connection, subject: str, predicate: str, obj: str, other_than: str = ""
) -> str | None:
    """The id of the relation ``subject -predicate-> obj`` valid now, or ``None``."""
    return _text(value(conn, sql.current_relation(subject, predicate, obj, other_than)))


def content_of(sql: GraphSql, conn: Connection, memory_id: str) -> str | None:
    """A memory's content in any tier, or ``None``."""
    return _text(value(conn, sql.content_of(memory_id)))


def fetch_relations(sql: GraphSql, conn: Connection, ids: Sequence[str]) -> dict[str, Relation]:
    """The relations with these ids (missing ones left out)."""
    if not ids:
        return {}
    return {r[0]: sql.relation(r) for r in rows(conn, sql.fetch_relations(ids))}


def relations_of(sql: GraphSql, conn: Connection, eid: str) -> list[Relation]:
    """Every relation (also invalidated ones) with ``eid`` at one end, by id."""
    return [sql.relation(r) for r in rows(conn, sql.relations_of(eid))]


def memory_ids_about(sql: GraphSql, conn: Connection, eid: str, limit: int) -> list[str]:
    """Memories that name the entity (by id)."""
    return sql.texts("memory_entities", "memory_id", column(conn, sql.memory_ids_about(eid, limit)))


def asserting_memories(
    sql: GraphSql, conn: Connection, relation_ids: Sequence[str]
) -> dict[str, list[str]]:
    """Ids of the memories that assert each relation; unasserted ones left out."""
    if not relation_ids:
        return {}
    return sql.asserted(rows(conn, sql.asserting_memories(relation_ids)))


def facts_of(sql: GraphSql, conn: Connection, memory_id: str) -> tuple[list[str], list[Relation]]:
    """The entity ids and the relations (by id) that one memory asserts."""
    entities, relations = sql.facts_of(memory_id)
    ids = sql.texts("memory_entities", "entity_id", column(conn, entities))
    return ids, [sql.relation(r) for r in rows(conn, relations)]


def drop_provenance(
    sql: GraphSql, conn: Connection, memory_ids: Sequence[str], origin: str | None = None
) -> tuple[list[str], list[str]]:
    """Remove these memories' provenance (of one origin, or all); return the entities
    and relations it named (each sorted, once)."""
    entities, relations = sql.drop_provenance(memory_ids, origin)
    entity_ids = sql.texts("memory_entities", "entity_id", column(conn, entities))
    relation_ids = sql.texts("memory_relations", "relation_id", column(conn, relations))
    return sorted(set(entity_ids)), sorted(set(relation_ids))


def counts(sql: GraphSql, conn: Connection, statements: Sequence[Statement]) -> dict[str, int]:
    """The graph's counts the ``statements`` read (zeros before the graph's tables)."""
    if not has_graph(sql, conn):
        return dict.fromkeys(COUNT_NAMES, 0)
    values = [v for statement in statements for v in rows(conn, statement)[0]]
    return {name: int(v) for name, v in zip(COUNT_NAMES, values, strict=True)}

"""SQL of the knowledge graph on PostgreSQL: entities, aliases, relations, provenance, the
extraction queue (schema version 3, :mod:`migrations.postgres.v003_graph`).

PostgreSQL's :class:`~persistence.stores.graph_engine.GraphSql` (the shared
:mod:`persistence.stores.graph` runs it). Functions take a connection and run inside the
caller's transaction; lists go as one array parameter (``= ANY(%s)``). Deleted memories
need nothing from here: a deferred trigger collects their provenance at COMMIT.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg

from persistence.graph_records import Entity, Relation
from persistence.postgres.sql import meta_sql

Connection = psycopg.Connection[Any]
_WORDS = re.compile(r"\w+")


def _ids(values: Iterable[str]) -> list[str]:
    return sorted(set(values))


def _one(conn: Connection, query: str, params: Any) -> tuple[Any, ...] | None:
    row: tuple[Any, ...] | None = conn.execute(query, params).fetchone()
    return row


def _all(conn: Connection, query: str, params: Any) -> list[tuple[Any, ...]]:
    return list(conn.execute(query, params).fetchall())


# --- entities ------------------------------------------------------------------------

_ENTITY = "SELECT id, name, type, description, direct, created_at, updated_at FROM tm_entities"
_ENTITIES_WITH_ALIASES = (
    "SELECT e.id, e.name, e.type, e.description, e.direct, e.created_at, e.updated_at, a.alias "
    "FROM tm_entities AS e LEFT JOIN tm_entity_aliases AS a ON a.entity_id = e.id "
    "AND a.scope = e.scope WHERE e.id = ANY(%s::text[]) ORDER BY e.id, a.seq"
)
_ALIASES_OF = (
    "SELECT entity_id, alias FROM tm_entity_aliases WHERE entity_id = ANY(%s::text[]) "
    "ORDER BY entity_id, seq"
)
_ENTITY_EXISTS = "SELECT 1 FROM tm_entities WHERE id = %s"
_RESOLVE_TYPED = "SELECT entity_id FROM tm_entity_aliases WHERE norm = %s AND type = %s"
_RESOLVE_ANY = (
    "SELECT a.entity_id FROM tm_entity_aliases AS a JOIN tm_entities AS e "
    "ON e.id = a.entity_id AND e.scope = a.scope WHERE a.norm = %s "
    "ORDER BY (SELECT count(*) FROM tm_memory_entities AS m WHERE m.entity_id = a.entity_id) "
    "DESC, e.direct DESC, a.entity_id LIMIT 1"
)
_TOUCH_ENTITY = (
    "UPDATE tm_entities SET direct = direct OR %s, description = coalesce(%s, description), "
    "updated_at = %s WHERE id = %s"
)
_INSERT_ENTITY = (
    "INSERT INTO tm_entities (id, name, type, description, direct, created_at, updated_at) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s)"
)
_INSERT_ALIAS = (
    "INSERT INTO tm_entity_aliases (norm, type, alias, tokens, entity_id) "
    "VALUES (%s, %s, %s, %s, %s)"
)
_LIST_ALL = f"{_ENTITY} WHERE id > %s ORDER BY id LIMIT %s"
_LIST_TYPE = f"{_ENTITY} WHERE type = %s AND id > %s ORDER BY id LIMIT %s"
_MEMORIES_ABOUT = (
    "SELECT DISTINCT memory_id FROM tm_memory_entities WHERE entity_id = %s "
    "ORDER BY memory_id LIMIT %s"
)
_CAPPED_COUNT = (
    "SELECT count(*) FROM (SELECT 1 FROM tm_memory_entities WHERE entity_id = %s LIMIT %s) AS m"
)


def has_graph(conn: Connection) -> bool:
    """Always True: every PostgreSQL schema has the graph (no round trip)."""
    return True


def entity(row: Sequence[Any], aliases: tuple[str, ...] = ()) -> Entity:
    """The entity a row of ``tm_entities`` holds."""
    return Entity(
        id=row[0], name=row[1], type=row[2], description=row[3], aliases=aliases,
        direct=bool(row[4]), created_at=int(row[5]), updated_at=int(row[6]),
    )  # fmt: skip


def alias_rows(conn: Connection, ids: Sequence[str]) -> list[tuple[str, str]]:
    """``(entity id, alias)`` of these entities, in the order they were added."""
    return [(str(r[0]), str(r[1])) for r in _all(conn, _ALIASES_OF, (_ids(ids),))]


def entities_with_aliases(conn: Connection, ids: Sequence[str]) -> list[tuple[Any, ...]]:
    """Entity rows of these ids, one per alias (the alias last)."""
    return _all(conn, _ENTITIES_WITH_ALIASES, (_ids(ids),))


def entity_exists(conn: Connection, eid: str) -> bool:
    """True if an entity has this id."""
    return _one(conn, _ENTITY_EXISTS, (eid,)) is not None


def resolve(conn: Connection, norm: str, type_: str | None) -> str | None:
    """The entity a normalised name (of a type, or of any) resolves to; of several of
    different types, the best supported, then the directly added, then the smallest id."""
    if type_ is not None:
        row = _one(conn, _RESOLVE_TYPED, (norm, type_))
    else:
        row = _one(conn, _RESOLVE_ANY, (norm,))
    return None if row is None else str(row[0])


def touch_entity(
    conn: Connection, eid: str, direct: bool, description: str | None, now: int
) -> None:
    """Mark the entity direct (if ``direct``), set a new description, move ``updated_at``."""
    conn.execute(_TOUCH_ENTITY, (direct, description, now, eid))


def insert_entity(
    conn: Connection, eid: str, name: str, type_: str, description: str | None, direct: bool,
    now: int,
) -> None:  # fmt: skip
    """A new entity row."""
    conn.execute(_INSERT_ENTITY, (eid, name, type_, description, direct, now, now))


def insert_alias(conn: Connection, norm: str, type_: str, alias: str, eid: str) -> None:
    """A name that resolves to ``eid``, with its words for recall's lookup."""
    conn.execute(_INSERT_ALIAS, (norm, type_, alias, _WORDS.findall(norm), eid))


def entity_rows(
    conn: Connection, type_: str | None, limit: int, after: str
) -> list[tuple[Any, ...]]:
    """Entity rows (of one type, or all) in id order after ``after``."""
    if type_ is None:
        return _all(conn, _LIST_ALL, (after, limit))
    return _all(conn, _LIST_TYPE, (type_, after, limit))


def memory_ids_about(conn: Connection, eid: str, limit: int) -> list[str]:
    """Memories that name the entity (by id)."""
    return [str(r[0]) for r in _all(conn, _MEMORIES_ABOUT, (eid, limit))]


def capped_memory_count(conn: Connection, eid: str, cap: int) -> int:
    """How many memories name the entity, counting no further than ``cap``."""
    row = _one(conn, _CAPPED_COUNT, (eid, cap))
    return 0 if row is None else int(row[0])


# --- relations -----------------------------------------------------------------------

RELATION_COLUMNS = (
    "id, subject_id, predicate, object_id, confidence, weight, valid_from, valid_to, "
    "direct, created_at"
)
_RELATION = f"SELECT {RELATION_COLUMNS} FROM tm_relations"
_FETCH_RELATIONS = f"{_RELATION} WHERE id = ANY(%s::text[])"
_RELATIONS_OF = (
    f"{_RELATION} WHERE subject_id = %(e)s UNION {_RELATION} WHERE object_id = %(e)s ORDER BY 1"
)
_CURRENT = (
    "SELECT id FROM tm_relations WHERE subject_id = %s AND predicate = %s AND object_id = %s "
    "AND valid_to IS NULL AND id != %s"
)
_STRENGTHEN = (
    "UPDATE tm_relations SET confidence = greatest(confidence, %(c)s), "
    "direct = direct OR %(d)s, valid_from = CASE WHEN valid_from IS NULL "
    "OR %(f)s::bigint IS NULL THEN NULL ELSE least(valid_from, %(f)s::bigint) END WHERE id = %(id)s"
)
_INSERT_RELATION = (
    "INSERT INTO tm_relations (id, subject_id, predicate, object_id, confidence, weight, "
    "valid_from, valid_to, direct, created_at) VALUES (%s, %s, %s, %s, %s, 0, %s, %s, %s, %s)"
)
_INVALIDATE = "UPDATE tm_relations SET valid_to = %s WHERE id = %s RETURNING id"


def relation(row: Sequence[Any]) -> Relation:
    """A relation from a row of :data:`RELATION_COLUMNS`."""
    return Relation(
        id=row[0], subject_id=row[1], predicate=row[2], object_id=row[3],
        confidence=float(row[4]), weight=float(row[5]), valid_from=row[6], valid_to=row[7],
        direct=bool(row[8]), created_at=int(row[9]),
    )  # fmt: skip


def fetch_relations(conn: Connection, ids: Sequence[str]) -> dict[str, Relation]:
    """The relations with these ids (missing ones left out)."""
    if not ids:
        return {}
    return {r[0]: relation(r) for r in _all(conn, _FETCH_RELATIONS, (_ids(ids),))}


def relations_of(conn: Connection, eid: str) -> list[Relation]:
    """Every relation (also invalidated ones) with ``eid`` at one end, by id."""
    return [relation(r) for r in _all(conn, _RELATIONS_OF, {"e": eid})]


_ASSERTING = (
    "SELECT DISTINCT relation_id, memory_id FROM tm_memory_relations "
    "WHERE relation_id = ANY(%s::text[]) ORDER BY 1, 2"
)
_FACT_ENTITIES = "SELECT DISTINCT entity_id FROM tm_memory_entities WHERE memory_id = %s ORDER BY 1"
_FACT_RELATIONS = (
    f"{_RELATION} WHERE id IN (SELECT relation_id FROM tm_memory_relations "
    "WHERE memory_id = %s) ORDER BY 1"
)


def asserting_memories(conn: Connection, relation_ids: Sequence[str]) -> dict[str, list[str]]:
    """Ids of the memories that assert each relation (by memory id), in one query;
    relations no memory asserts are left out."""
    if not relation_ids:
        return {}
    found: dict[str, list[str]] = {}
    for rid, mid in _all(conn, _ASSERTING, (_ids(relation_ids),)):
        found.setdefault(str(rid), []).append(str(mid))
    return found


def facts_of(conn: Connection, memory_id: str) -> tuple[list[str], list[Relation]]:
    """The entity ids and the relations (by id) that one memory asserts."""
    entities = [str(r[0]) for r in _all(conn, _FACT_ENTITIES, (memory_id,))]
    return entities, [relation(r) for r in _all(conn, _FACT_RELATIONS, (memory_id,))]


def current_relation(
    conn: Connection, subject: str, predicate: str, obj: str, other_than: str = ""
) -> str | None:
    """The id of the relation ``subject -predicate-> obj`` valid now (not
    ``other_than``), or ``None``."""
    row = _one(conn, _CURRENT, (subject, predicate, obj, other_than))
    return None if row is None else str(row[0])


def strengthen_relation(
    conn: Connection, rid: str, confidence: float, direct: bool, valid_from: int | None
) -> None:
    """Asserted again: the larger confidence, ``direct`` sticks, the earlier start."""
    conn.execute(_STRENGTHEN, {"c": confidence, "d": direct, "f": valid_from, "id": rid})


def insert_relation(
    conn: Connection, rid: str, subject: str, predicate: str, obj: str, confidence: float,
    valid_from: int | None, valid_to: int | None, direct: bool, now: int,
) -> None:  # fmt: skip
    """Insert a relation row; its weight is 0 until its provenance re-weighs it."""
    conn.execute(
        _INSERT_RELATION,
        (rid, subject, predicate, obj, confidence, valid_from, valid_to, direct, now),
    )


def invalidate(conn: Connection, rid: str, at: int) -> bool:
    """Set ``valid_to``; False if the relation is missing."""
    return _one(conn, _INVALIDATE, (at, rid)) is not None


# --- provenance ----------------------------------------------------------------------

_MOVE_ENTITIES = (
    "INSERT INTO tm_memory_entities (memory_id, entity_id, origin) "
    "SELECT %s, entity_id, origin FROM tm_memory_entities WHERE memory_id = %s "
    "ON CONFLICT DO NOTHING"
)
_MOVE_RELATIONS = (
    "INSERT INTO tm_memory_relations (memory_id, relation_id, origin) "
    "SELECT %s, relation_id, origin FROM tm_memory_relations WHERE memory_id = %s "
    "ON CONFLICT DO NOTHING"
)
_ADD_ENTITIES = (
    "INSERT INTO tm_memory_entities (memory_id, entity_id, origin) "
    "SELECT %s, e, %s FROM unnest(%s::text[]) AS e ON CONFLICT DO NOTHING"
)
_ADD_RELATIONS = (
    "INSERT INTO tm_memory_relations (memory_id, relation_id, origin) "
    "SELECT %s, r, %s FROM unnest(%s::text[]) AS r ON CONFLICT DO NOTHING"
)
_REWEIGH = (
    "UPDATE tm_relations AS r SET weight = (SELECT count(DISTINCT m.memory_id) "
    "FROM tm_memory_relations AS m WHERE m.relation_id = r.id) WHERE r.id = ANY(%s::text[])"
)
_DROP_ENTITIES = (
    "DELETE FROM tm_memory_entities WHERE memory_id = ANY(%s::text[]) {}RETURNING entity_id"
)
_DROP_RELATIONS = (
    "DELETE FROM tm_memory_relations WHERE memory_id = ANY(%s::text[]) {}RETURNING relation_id"
)
_OF_ORIGIN = "AND origin = %s "
_COLLECT = "SELECT tm_graph_collect(%s::text[], %s::text[])"


def move_provenance(conn: Connection, drop: str, keep: str) -> None:
    """Every entity and relation memory ``drop`` supports, memory ``keep`` supports too."""
    conn.execute(_MOVE_ENTITIES, (keep, drop))
    conn.execute(_MOVE_RELATIONS, (keep, drop))


def add_provenance(
    conn: Connection,
    memory_id: str,
    entity_ids: Iterable[str],
    relation_ids: Iterable[str],
    origin: str,
) -> None:
    """Record that ``memory_id`` asserted these entities and relations (one statement
    per kind, rows already there left as they are), and re-weigh the relations."""
    entities = _ids(entity_ids)
    if entities:
        conn.execute(_ADD_ENTITIES, (memory_id, origin, entities))
    relations = _ids(relation_ids)
    if relations:
        conn.execute(_ADD_RELATIONS, (memory_id, origin, relations))
        reweigh(conn, relations)


def reweigh(conn: Connection, relation_ids: Sequence[str]) -> None:
    """``weight`` = how many memories support each relation."""
    if relation_ids:
        conn.execute(_REWEIGH, (_ids(relation_ids),))


def drop_provenance(
    conn: Connection, memory_ids: Sequence[str], origin: str | None = None
) -> tuple[list[str], list[str]]:
    """Delete these memories' provenance rows (of one origin, or all); the entities and
    relations they named come back (``RETURNING``)."""
    ids = _ids(memory_ids)
    where = "" if origin is None else _OF_ORIGIN
    params: tuple[Any, ...] = (ids,) if origin is None else (ids, origin)
    entities = [r[0] for r in _all(conn, _DROP_ENTITIES.format(where), params)]
    relations = [r[0] for r in _all(conn, _DROP_RELATIONS.format(where), params)]
    return _ids(entities), _ids(relations)


def collect(conn: Connection, entity_ids: Sequence[str], relation_ids: Sequence[str]) -> None:
    """Delete the derived relations, then entities, among these that nothing supports
    any more (an entity also stays while a relation uses it); re-weigh the rest."""
    if entity_ids or relation_ids:
        conn.execute(_COLLECT, (_ids(entity_ids), _ids(relation_ids)))


# --- removing and merging --------------------------------------------------------------

_DELETE_RELATIONS = "DELETE FROM tm_relations WHERE id = ANY(%s::text[])"
_DELETE_ENTITY = "DELETE FROM tm_entities WHERE id = %s RETURNING id"
_DELETE_RELATION = "DELETE FROM tm_relations WHERE id = %s RETURNING subject_id, object_id"
_MOVE_ALIASES = "UPDATE tm_entity_aliases SET entity_id = %s WHERE entity_id = %s"
_MERGE_PROVENANCE = (
    "INSERT INTO tm_memory_entities (memory_id, entity_id, origin) "
    "SELECT memory_id, %s, origin FROM tm_memory_entities WHERE entity_id = %s "
    "ON CONFLICT DO NOTHING"
)
_MERGE_ENTITY = (
    "UPDATE tm_entities AS k SET direct = k.direct OR d.direct, "
    "description = coalesce(k.description, d.description), updated_at = %(now)s "
    "FROM tm_entities AS d WHERE k.id = %(keep)s AND d.id = %(drop)s AND d.scope = k.scope"
)
_MOVE_RELATION = "UPDATE tm_relations SET subject_id = %s, object_id = %s WHERE id = %s"
_MERGE_RELATION_PROVENANCE = (
    "INSERT INTO tm_memory_relations (memory_id, relation_id, origin) "
    "SELECT memory_id, %s, origin FROM tm_memory_relations WHERE relation_id = %s "
    "ON CONFLICT DO NOTHING"
)
_JOIN_RELATION = (
    "UPDATE tm_relations SET confidence = greatest(confidence, %s), direct = direct OR %s "
    "WHERE id = %s"
)


def delete_entity(conn: Connection, eid: str) -> bool:
    """Delete an entity row (its aliases and provenance go with it); False if missing."""
    return _one(conn, _DELETE_ENTITY, (eid,)) is not None


def delete_relations(conn: Connection, ids: Sequence[str]) -> None:
    """Delete these relations (their provenance goes with them)."""
    conn.execute(_DELETE_RELATIONS, (list(ids),))


def remove_relation(conn: Connection, rid: str) -> tuple[str, str] | None:
    """Delete a relation (and its provenance); its endpoints, or ``None`` if missing."""
    row = _one(conn, _DELETE_RELATION, (rid,))
    return None if row is None else (str(row[0]), str(row[1]))


def merge_entity(conn: Connection, keep: str, drop: str, now: int) -> None:
    """``drop``'s aliases and provenance move to ``keep``, which takes its directness and
    (if it has none) its description."""
    conn.execute(_MOVE_ALIASES, (keep, drop))
    conn.execute(_MERGE_PROVENANCE, (keep, drop))
    conn.execute(_MERGE_ENTITY, {"now": now, "keep": keep, "drop": drop})


def move_relation(conn: Connection, rid: str, subject: str, obj: str) -> None:
    """Give a relation new endpoints."""
    conn.execute(_MOVE_RELATION, (subject, obj, rid))


def join_relation(conn: Connection, into: str, rel: Relation) -> None:
    """``rel`` joins relation ``into``: provenance, confidence and directness move over."""
    conn.execute(_MERGE_RELATION_PROVENANCE, (into, rel.id))
    conn.execute(_JOIN_RELATION, (rel.confidence, rel.direct, into))
    conn.execute(_DELETE_RELATIONS, ([rel.id],))


# --- traversal: one query per batch of a level's entities -------------------------------

_VALID = (
    "(r.valid_from IS NULL OR r.valid_from <= %(at)s) "
    "AND (r.valid_to IS NULL OR r.valid_to > %(at)s)"
)
_HOP_COLUMNS = ", ".join(f"r.{c.strip()}" for c in RELATION_COLUMNS.split(","))


def hop_sql(predicates: bool) -> str:
    """The relations each entity of ``%(nodes)s`` follows, in the nodes' order: its
    ``%(fanout)s`` best supported valid ones (weight, then confidence, then id) with it as
    subject, then as object. Each arm is an index scan of ``tm_relations_subject`` /
    ``tm_relations_object`` that stops after ``fanout`` rows, so a hub costs no more
    than a leaf; the columns are the relation's (:func:`relation`) after ``ord``."""
    only = " AND r.predicate = ANY(%(predicates)s::text[])" if predicates else ""
    arm = (
        "(SELECT {arm} AS arm, " + _HOP_COLUMNS + " FROM tm_relations AS r "
        "WHERE r.{end} = f.node AND " + _VALID + only + " "
        "ORDER BY r.weight DESC, r.confidence DESC, r.id LIMIT %(fanout)s)"
    )
    return (
        "SELECT f.ord, h.id, h.subject_id, h.predicate, h.object_id, h.confidence, h.weight, "
        "h.valid_from, h.valid_to, h.direct, h.created_at "
        "FROM unnest(%(nodes)s::text[]) WITH ORDINALITY AS f(node, ord) CROSS JOIN LATERAL ("
        + arm.format(arm=0, end="subject_id")
        + " UNION ALL "
        + arm.format(arm=1, end="object_id")
        + ") AS h ORDER BY f.ord, h.arm, h.weight DESC, h.confidence DESC, h.id"
    )


def hops(
    conn: Connection,
    nodes: Sequence[str],
    at: int,
    fanout: int,
    predicates: Sequence[str] | None,
) -> list[list[tuple[Any, ...]]]:
    """For each of ``nodes``, the relation rows it follows (:func:`hop_sql`)."""
    params: dict[str, Any] = {"nodes": list(nodes), "at": at, "fanout": fanout}
    if predicates is not None:
        params["predicates"] = list(predicates)
    found: list[list[tuple[Any, ...]]] = [[] for _ in nodes]
    for row in _all(conn, hop_sql(predicates is not None), params):
        found[int(row[0]) - 1].append(tuple(row[1:]))
    return found


# --- recall: entities named in a text --------------------------------------------------

_NAMED_IN = "SELECT entity_id, alias FROM tm_entity_aliases WHERE tokens && %s::text[] LIMIT %s"


def any_alias(conn: Connection) -> bool:
    """True if the handle sees any entity alias (row-level security applies)."""
    row = conn.execute("SELECT EXISTS (SELECT 1 FROM tm_entity_aliases)").fetchone()
    return bool(row and row[0])


def entities_named_in(conn: Connection, words: Sequence[str], limit: int) -> list[tuple[str, str]]:
    """``(entity id, alias)`` of aliases holding any of ``words`` (normalised words; the
    caller checks that the whole alias occurs in the text)."""
    if not words:
        return []
    return [(str(r[0]), str(r[1])) for r in _all(conn, _NAMED_IN, (list(words), limit))]


# --- the extraction queue --------------------------------------------------------------

_PENDING = (
    "SELECT q.memory_id, m.content, q.attempts FROM tm_graph_queue AS q "
    "LEFT JOIN tm_memories AS m ON m.id = q.memory_id WHERE q.not_before <= %s "
    "ORDER BY q.not_before, q.memory_id LIMIT %s"
)
_DEQUEUE = "DELETE FROM tm_graph_queue WHERE memory_id = %s"
_ENQUEUE = (
    "INSERT INTO tm_graph_queue (memory_id) SELECT unnest(%s::text[]) ON CONFLICT (memory_id) "
    "DO UPDATE SET attempts = 0, not_before = 0, error = NULL"
)
_POSTPONE = (
    "UPDATE tm_graph_queue SET attempts = attempts + 1, not_before = %s, error = %s "
    "WHERE memory_id = %s"
)
_CONTENT = "SELECT content FROM tm_memories WHERE id = %s"


def pending(conn: Connection, now: int, limit: int) -> list[tuple[str, str, int]]:
    """``(memory id, content, attempts)`` of memories waiting for extraction now."""
    return [(str(r[0]), r[1], int(r[2])) for r in _all(conn, _PENDING, (now, limit))]


def dequeue(conn: Connection, memory_id: str) -> None:
    """The memory's extraction is done."""
    conn.execute(_DEQUEUE, (memory_id,))


def enqueue(conn: Connection, memory_ids: Sequence[str]) -> None:
    """Queue memories for (re-)extraction."""
    if memory_ids:
        conn.execute(_ENQUEUE, (_ids(memory_ids),))


def postpone(conn: Connection, memory_id: str, until: int, error: str) -> None:
    """An extraction failed: retry at ``until``."""
    conn.execute(_POSTPONE, (until, error[:1000], memory_id))


def content_of(conn: Connection, memory_id: str) -> str | None:
    """A memory's content in any tier, or ``None``."""
    row = _one(conn, _CONTENT, (memory_id,))
    return None if row is None else str(row[0])


# --- statistics ------------------------------------------------------------------------

_COUNTS = (
    "SELECT (SELECT count(*) FROM tm_entities), (SELECT count(*) FROM tm_entity_aliases), "
    "(SELECT count(*) FROM tm_relations), "
    "(SELECT count(*) FROM tm_relations WHERE valid_to IS NULL), "
    "(SELECT count(*) FROM tm_memory_entities) + (SELECT count(*) FROM tm_memory_relations), "
    "(SELECT count(*) FROM tm_graph_queue), "
    "(SELECT count(*) FROM tm_graph_queue WHERE attempts > 0)"
)
COUNT_NAMES = (
    "entities", "aliases", "relations", "current_relations", "provenance",
    "extraction_pending", "extraction_failed",
)  # fmt: skip


def counts(conn: Connection) -> dict[str, int]:
    """The graph's row counts (one statement, so one snapshot)."""
    row = _one(conn, _COUNTS, ())
    assert row is not None
    return {name: int(value) for name, value in zip(COUNT_NAMES, row, strict=True)}


# --- facts kept with the data (``tm_meta``): the shared store reads them here -------------

read_meta = meta_sql.read
write_meta = meta_sql.write
add_to_counter = meta_sql.add

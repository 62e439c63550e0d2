"""SQL of the knowledge graph on PostgreSQL: entities, aliases, relations, provenance, the
extraction queue (schema version 3, :mod:`migrations.postgres.v003_graph`).

PostgreSQL's :class:`~persistence.stores.graph_engine.GraphSql` (the shared
:mod:`persistence.stores.graph` runs it, in the caller's transaction). Functions build
statements and decode rows; none runs one. Lists go as one array parameter
(``= ANY(%s)``). Deleted memories need nothing from here: a deferred trigger collects
their provenance at COMMIT.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from persistence.graph_records import Entity, Relation
from persistence.postgres.sql import meta_sql
from persistence.statements import Statement

Row = tuple[Any, ...]
_WORDS = re.compile(r"\w+")


def _ids(values: Iterable[str]) -> list[str]:
    return sorted(set(values))


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
_OWN = " AND scope = tm_scope()"
"""Of the connection's own scope (an unscoped connection sees every scope's rows)."""
_RESOLVE_TYPED = "SELECT entity_id FROM tm_entity_aliases WHERE norm = %s AND type = %s"
_RESOLVE_ANY = (
    "SELECT a.entity_id FROM tm_entity_aliases AS a JOIN tm_entities AS e "
    "ON e.id = a.entity_id AND e.scope = a.scope WHERE a.norm = %s{own} "
    "ORDER BY (SELECT count(*) FROM tm_memory_entities AS m WHERE m.entity_id = a.entity_id) "
    "DESC, e.direct DESC, a.entity_id LIMIT 1"
)
_TOUCH_ENTITY = (
    "UPDATE tm_entities SET direct = direct OR %s, description = coalesce(%s, description), "
    "updated_at = %s WHERE id = %s AND scope = tm_scope()"
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

_NAMING_EACH = (
    "WITH counted AS MATERIALIZED (SELECT e.id, (SELECT count(*) FROM (SELECT 1 FROM "
    "tm_memory_entities WHERE entity_id = e.id LIMIT %(cap)s) AS r) AS n "
    "FROM unnest(%(ids)s::text[]) AS e(id)) "
    "SELECT DISTINCT c.id, c.n, m.memory_id FROM counted AS c JOIN tm_memory_entities AS m "
    "ON m.entity_id = c.id WHERE c.n < %(cap)s ORDER BY c.id, m.memory_id"
)


def has_graph() -> None:
    """None: every PostgreSQL schema has the graph (no round trip)."""
    return None


def entity(row: Sequence[Any], aliases: tuple[str, ...] = ()) -> Entity:
    """The entity a row of ``tm_entities`` holds."""
    return Entity(
        id=row[0], name=row[1], type=row[2], description=row[3], aliases=aliases,
        direct=bool(row[4]), created_at=int(row[5]), updated_at=int(row[6]),
    )  # fmt: skip


def texts(table: str, column: str, values: Iterable[Any]) -> list[str]:
    """``values`` read from ``table.column`` as texts (the server checks the types)."""
    return [str(v) for v in values]


def alias_rows(ids: Sequence[str]) -> Statement:
    """``(entity id, alias)`` of these entities, in the order they were added."""
    return Statement(_ALIASES_OF, (_ids(ids),))


def entities_with_aliases(ids: Sequence[str]) -> Statement:
    """Entity rows of these ids, one per alias (the alias last)."""
    return Statement(_ENTITIES_WITH_ALIASES, (_ids(ids),))


def entity_exists(eid: str, *, own: bool = False) -> Statement:
    """A row if an entity has this id (``own``: in the connection's scope; a write links
    only to its own scope's entities, which an unscoped connection would not tell apart)."""
    return Statement(_ENTITY_EXISTS + _OWN * own, (eid,))


def resolve(norm: str, type_: str | None, *, own: bool = False) -> Statement:
    """The entity a normalised name (of a type, or of any) resolves to; of several of
    different types, the best supported, then the directly added, then the smallest id
    (``own``: as :func:`entity_exists`)."""
    if type_ is not None:
        return Statement(_RESOLVE_TYPED + _OWN * own, (norm, type_))
    return Statement(_RESOLVE_ANY.format(own=" AND a.scope = tm_scope()" * own), (norm,))


def touch_entity(eid: str, direct: bool, description: str | None, now: int) -> Statement:
    """Mark the entity direct (if ``direct``), set a new description, move ``updated_at``."""
    return Statement(_TOUCH_ENTITY, (direct, description, now, eid))


def insert_entity(
    eid: str, name: str, type_: str, description: str | None, direct: bool, now: int
) -> Statement:
    """A new entity row."""
    return Statement(_INSERT_ENTITY, (eid, name, type_, description, direct, now, now))


def insert_alias(norm: str, type_: str, alias: str, eid: str) -> Statement:
    """A name that resolves to ``eid``, with its words for recall's lookup."""
    return Statement(_INSERT_ALIAS, (norm, type_, alias, _WORDS.findall(norm), eid))


def entity_rows(type_: str | None, limit: int, after: str) -> Statement:
    """Entity rows (of one type, or all) in id order after ``after``."""
    if type_ is None:
        return Statement(_LIST_ALL, (after, limit))
    return Statement(_LIST_TYPE, (type_, after, limit))


def memory_ids_about(eid: str, limit: int) -> Statement:
    """Memories that name the entity (by id)."""
    return Statement(_MEMORIES_ABOUT, (eid, limit))


def capped_memory_count(eid: str, cap: int) -> Statement:
    """How many memories name the entity, counting no further than ``cap``."""
    return Statement(_CAPPED_COUNT, (eid, cap))


def memories_naming_each(eids: Sequence[str], most: int) -> Statement:
    """``(entity id, how many rows name it, memory id)`` of the memories naming each of
    ``eids`` that at most ``most`` rows name (counted as :func:`capped_memory_count`
    counts, no further than ``most + 1``), in memory id order per entity: the rows of an
    entity with more are never read."""
    return Statement(_NAMING_EACH, {"ids": _ids(eids), "cap": most + 1})


# --- relations -----------------------------------------------------------------------

RELATION_COLUMNS = (
    "id, subject_id, predicate, object_id, confidence, weight, valid_from, valid_to, "
    "direct, created_at"
)
_RELATION = f"SELECT {RELATION_COLUMNS} FROM tm_relations"
_FETCH_RELATIONS = f"{_RELATION} WHERE id = ANY(%s::text[])"
_RELATIONS_OF = (
    f"{_RELATION} WHERE subject_id = %s UNION {_RELATION} WHERE object_id = %s ORDER BY 1"
)
_CURRENT = (
    "SELECT id FROM tm_relations WHERE subject_id = %s AND predicate = %s AND object_id = %s "
    "AND valid_to IS NULL AND id != %s"
)
_STRENGTHEN = (
    "UPDATE tm_relations SET confidence = greatest(confidence, %s), "
    "direct = direct OR %s, valid_from = CASE WHEN valid_from IS NULL "
    "OR %s::bigint IS NULL THEN NULL ELSE least(valid_from, %s::bigint) END WHERE id = %s"
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


def fetch_relations(ids: Sequence[str]) -> Statement:
    """The relations with these ids (missing ones left out)."""
    return Statement(_FETCH_RELATIONS, (_ids(ids),))


def relations_of(eid: str) -> Statement:
    """Every relation (also invalidated ones) with ``eid`` at one end, by id."""
    return Statement(_RELATIONS_OF, (eid, eid))


_ASSERTING = (
    "SELECT DISTINCT relation_id, memory_id FROM tm_memory_relations "
    "WHERE relation_id = ANY(%s::text[]) ORDER BY 1, 2"
)
_FACT_ENTITIES = "SELECT DISTINCT entity_id FROM tm_memory_entities WHERE memory_id = %s ORDER BY 1"
_FACT_RELATIONS = (
    f"{_RELATION} WHERE id IN (SELECT relation_id FROM tm_memory_relations "
    "WHERE memory_id = %s) ORDER BY 1"
)


def asserting_memories(relation_ids: Sequence[str]) -> Statement:
    """``(relation id, memory id)`` of the memories that assert each relation, in one
    query."""
    return Statement(_ASSERTING, (_ids(relation_ids),))


def asserted(rows: Sequence[Row]) -> dict[str, list[str]]:
    """Rows of :func:`asserting_memories` as relation id -> memory ids."""
    found: dict[str, list[str]] = {}
    for rid, mid in rows:
        found.setdefault(str(rid), []).append(str(mid))
    return found


def facts_of(memory_id: str) -> tuple[Statement, Statement]:
    """The entity ids, then the relation rows (by id), that one memory asserts."""
    return Statement(_FACT_ENTITIES, (memory_id,)), Statement(_FACT_RELATIONS, (memory_id,))


def current_relation(subject: str, predicate: str, obj: str, other_than: str = "") -> Statement:
    """The id of the relation ``subject -predicate-> obj`` valid now (not
    ``other_than``)."""
    return Statement(_CURRENT, (subject, predicate, obj, other_than))


def strengthen_relation(
    rid: str, confidence: float, direct: bool, valid_from: int | None
) -> Statement:
    """Asserted again: the larger confidence, ``direct`` sticks, the earlier start."""
    return Statement(_STRENGTHEN, (confidence, direct, valid_from, valid_from, rid))


def insert_relation(
    rid: str, subject: str, predicate: str, obj: str, confidence: float,
    valid_from: int | None, valid_to: int | None, direct: bool, now: int,
) -> Statement:  # fmt: skip
    """Insert a relation row; its weight is 0 until its provenance re-weighs it."""
    return Statement(
        _INSERT_RELATION,
        (rid, subject, predicate, obj, confidence, valid_from, valid_to, direct, now),
    )


def invalidate(rid: str, at: int) -> Statement:
    """Set ``valid_to``; a row comes back if the relation is there."""
    return Statement(_INVALIDATE, (at, rid))


def current_relations(subject: str, predicate: str, at: int | None = None) -> Statement:
    """The relation rows ``subject -predicate-> *`` valid now (``at``: valid then), by id."""
    if at is None:
        return Statement(
            f"{_RELATION} WHERE subject_id = %s AND predicate = %s AND valid_to IS NULL ORDER BY 1",
            (subject, predicate),
        )
    return Statement(
        f"{_RELATION} WHERE subject_id = %s AND predicate = %s "
        "AND (valid_from IS NULL OR valid_from <= %s) AND (valid_to IS NULL OR valid_to > %s) "
        "ORDER BY 1",
        (subject, predicate, at, at),
    )


def set_validity(rid: str, valid_from: int | None, valid_to: int | None) -> Statement:
    """Set both bounds of when a relation holds."""
    return Statement(
        "UPDATE tm_relations SET valid_from = %s, valid_to = %s WHERE id = %s",
        (valid_from, valid_to, rid),
    )


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


def move_provenance(drop: str, keep: str) -> list[Statement]:
    """Every entity and relation memory ``drop`` supports, memory ``keep`` supports too."""
    return [Statement(_MOVE_ENTITIES, (keep, drop)), Statement(_MOVE_RELATIONS, (keep, drop))]


def add_entity_provenance(memory_id: str, entity_ids: Sequence[str], origin: str) -> Statement:
    return Statement(_ADD_ENTITIES, (memory_id, origin, _ids(entity_ids)))


def add_relation_provenance(memory_id: str, relation_ids: Sequence[str], origin: str) -> Statement:
    return Statement(_ADD_RELATIONS, (memory_id, origin, _ids(relation_ids)))


def reweigh(relation_ids: Sequence[str]) -> Statement:
    return Statement(_REWEIGH, (_ids(relation_ids),))


def drop_provenance(
    memory_ids: Sequence[str], origin: str | None = None
) -> tuple[Statement, Statement]:
    """Delete these memories' provenance rows (of one origin, or all); the entities,
    then the relations, they named come back (``RETURNING``)."""
    ids = _ids(memory_ids)
    where = "" if origin is None else _OF_ORIGIN
    params: tuple[Any, ...] = (ids,) if origin is None else (ids, origin)
    return (
        Statement(_DROP_ENTITIES.format(where), params),
        Statement(_DROP_RELATIONS.format(where), params),
    )


def collect(entity_ids: Sequence[str], relation_ids: Sequence[str]) -> list[Statement]:
    """Delete the derived relations, then entities, among these that nothing supports
    any more (an entity also stays while a relation uses it); re-weigh the rest: one
    call of the server's function (nothing for nothing)."""
    if not entity_ids and not relation_ids:
        return []
    return [Statement(_COLLECT, (_ids(entity_ids), _ids(relation_ids)))]


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
    "description = coalesce(k.description, d.description), updated_at = %s "
    "FROM tm_entities AS d WHERE k.id = %s AND d.id = %s AND d.scope = k.scope"
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


def delete_entity(eid: str) -> Statement:
    """Delete an entity row (its aliases and provenance go with it), returning a row if
    it was there."""
    return Statement(_DELETE_ENTITY, (eid,))


def delete_relations(ids: Sequence[str]) -> Statement:
    """Delete these relations (their provenance goes with them)."""
    return Statement(_DELETE_RELATIONS, (list(ids),))


def remove_relation(rid: str) -> Statement:
    """Delete a relation (and its provenance), returning its endpoints if it was there."""
    return Statement(_DELETE_RELATION, (rid,))


def move_aliases(keep: str, drop: str) -> Statement:
    return Statement(_MOVE_ALIASES, (keep, drop))


def merge_entity_provenance(keep: str, drop: str) -> Statement:
    return Statement(_MERGE_PROVENANCE, (keep, drop))


def merge_entity(keep: str, drop: str, now: int) -> Statement:
    """``keep`` takes ``drop``'s directness and (having none) description (a join of the
    two rows, in one scope)."""
    return Statement(_MERGE_ENTITY, (now, keep, drop))


def move_relation(rid: str, subject: str, obj: str) -> Statement:
    """Give a relation new endpoints."""
    return Statement(_MOVE_RELATION, (subject, obj, rid))


def merge_relation_provenance(into: str, rid: str) -> Statement:
    return Statement(_MERGE_RELATION_PROVENANCE, (into, rid))


def join_relation(into: str, confidence: float, direct: bool) -> Statement:
    return Statement(_JOIN_RELATION, (confidence, direct, into))


# --- traversal: one query per batch of a level's entities -------------------------------

_VALID = "(r.valid_from IS NULL OR r.valid_from <= %s) AND (r.valid_to IS NULL OR r.valid_to > %s)"
_HOP_COLUMNS = ", ".join(f"r.{c.strip()}" for c in RELATION_COLUMNS.split(","))


def hop_sql(predicates: bool) -> str:
    """The relations each of the nodes (the first parameter) follows, in the nodes' order:
    its ``fanout`` best supported valid ones (weight, then confidence, then id) with it as
    subject, then as object (the parameters: :func:`hops`). Each arm is an index scan of
    ``tm_relations_subject`` / ``tm_relations_object`` that stops after ``fanout`` rows,
    so a hub costs no more than a leaf; the columns are the relation's (:func:`relation`)
    after ``ord``."""
    only = " AND r.predicate = ANY(%s::text[])" if predicates else ""
    arm = (
        "(SELECT {arm} AS arm, " + _HOP_COLUMNS + " FROM tm_relations AS r "
        "WHERE r.{end} = f.node AND " + _VALID + only + " "
        "ORDER BY r.weight DESC, r.confidence DESC, r.id LIMIT %s)"
    )
    return (
        "SELECT f.ord, h.id, h.subject_id, h.predicate, h.object_id, h.confidence, h.weight, "
        "h.valid_from, h.valid_to, h.direct, h.created_at "
        "FROM unnest(%s::text[]) WITH ORDINALITY AS f(node, ord) CROSS JOIN LATERAL ("
        + arm.format(arm=0, end="subject_id")
        + " UNION ALL "
        + arm.format(arm=1, end="object_id")
        + ") AS h ORDER BY f.ord, h.arm, h.weight DESC, h.confidence DESC, h.id"
    )


def hops(
    nodes: Sequence[str], at: int, fanout: int, predicates: Sequence[str] | None
) -> list[Statement]:
    """The relation rows all of ``nodes`` follow, in one statement (:func:`hop_sql`):
    the nodes, then each arm's time, time, (predicates,) fanout."""
    arm = [at, at, *([] if predicates is None else [list(predicates)]), fanout]
    return [Statement(hop_sql(predicates is not None), [list(nodes), *arm, *arm])]


def hop_rows(nodes: Sequence[str], results: Iterable[list[Row]]) -> list[list[Row]]:
    """For each of ``nodes``, its relation rows (split from the one statement's rows by
    their ``ord``)."""
    found: list[list[Row]] = [[] for _ in nodes]
    for rows in results:
        for row in rows:
            found[int(row[0]) - 1].append(tuple(row[1:]))
    return found


# --- recall: entities named in a text --------------------------------------------------

_NAMED_IN = "SELECT entity_id, alias FROM tm_entity_aliases WHERE tokens && %s::text[] LIMIT %s"


_ANY_ALIAS = Statement("SELECT EXISTS (SELECT 1 FROM tm_entity_aliases)")


def any_alias() -> Statement:
    """True if the handle sees any entity alias (row-level security applies)."""
    return _ANY_ALIAS


def entities_named_in(words: Sequence[str], limit: int) -> Statement:
    """``(entity id, alias)`` of aliases holding any of ``words`` (normalised words; the
    caller checks that the whole alias occurs in the text)."""
    return Statement(_NAMED_IN, (list(words), limit))


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


def pending(now: int, limit: int) -> Statement:
    """``(memory id, content, attempts)`` of memories waiting for extraction now."""
    return Statement(_PENDING, (now, limit))


def queued(rows: Sequence[Row]) -> list[tuple[str, str, int]]:
    """Rows of :func:`pending`."""
    return [(str(r[0]), r[1], int(r[2])) for r in rows]


def dequeue(memory_id: str) -> Statement:
    """The memory's extraction is done."""
    return Statement(_DEQUEUE, (memory_id,))


def enqueue(memory_ids: Sequence[str]) -> list[Statement]:
    """Queue memories for (re-)extraction."""
    return [Statement(_ENQUEUE, (_ids(memory_ids),))] if memory_ids else []


def postpone(memory_id: str, until: int, error: str) -> Statement:
    """An extraction failed: retry at ``until``."""
    return Statement(_POSTPONE, (until, error[:1000], memory_id))


def content_of(memory_id: str) -> Statement:
    """A memory's content in any tier."""
    return Statement(_CONTENT, (memory_id,))


# --- statistics ------------------------------------------------------------------------

_COUNTS = (
    "SELECT (SELECT count(*) FROM tm_entities), (SELECT count(*) FROM tm_entity_aliases), "
    "(SELECT count(*) FROM tm_relations), "
    "(SELECT count(*) FROM tm_relations WHERE valid_to IS NULL), "
    "(SELECT count(*) FROM tm_memory_entities) + (SELECT count(*) FROM tm_memory_relations), "
    "(SELECT count(*) FROM tm_graph_queue), "
    "(SELECT count(*) FROM tm_graph_queue WHERE attempts > 0)"
)


def counts() -> list[Statement]:
    """The graph's row counts, in one statement (so one snapshot): its row's values are
    :data:`~persistence.stores.graph_engine.COUNT_NAMES` in turn."""
    return [Statement(_COUNTS)]


# --- facts kept with the data (``tm_meta``): the shared store reads them here -------------

read_meta = meta_sql.read
write_meta = meta_sql.write
add_to_counter = meta_sql.add

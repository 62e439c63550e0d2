"""The knowledge graph's row logic, written once over an engine's graph SQL
(:class:`~persistence.stores.graph_engine.GraphSql`): ids and shown names, finding or
creating entities and relations, reading entities with their aliases, removing and
merging. Each function takes the engine's SQL and connection first and runs in the
caller's transaction or snapshot."""

from __future__ import annotations

import hashlib
import os
import unicodedata
from collections.abc import Sequence

from persistence.engine import Connection
from persistence.graph_records import (
    DEFAULT_TYPE,
    MENTIONED_WITH,
    Entity,
    EntityFact,
    RelationFact,
    normalise,
)
from persistence.stores.graph_engine import GraphSql, Row


def display(name: str) -> str:
    """A name as shown: NFC, spaces collapsed."""
    return " ".join(unicodedata.normalize("NFC", name).split())


def entity_id(norm: str, type_: str) -> str:
    """The stable id of an entity first written with this normalised name and type (the
    same on every engine, so ids agree across them)."""
    digest = hashlib.blake2b(f"{type_}\x1f{norm}".encode(), digest_size=12).hexdigest()
    return f"ent_{digest}"


def relation_id() -> str:
    """A fresh relation id."""
    return f"rel_{os.urandom(12).hex()}"


# --- entities ------------------------------------------------------------------------------


def ensure_entity(
    sql: GraphSql,
    conn: Connection,
    name: str,
    type_: str,
    now: int,
    *,
    direct: bool,
    description: str | None = None,
) -> tuple[str, bool]:
    """The id of the entity ``name`` of ``type_`` resolves to, created if new; and
    whether it was created. ``direct`` marks it as added through the graph API. A name
    of the default type finds an entity of that name of any type."""
    norm = normalise(name)
    found = sql.resolve(conn, norm, type_)
    if found is None and type_ == DEFAULT_TYPE:
        found = sql.resolve(conn, norm, None)  # an untyped mention of a typed entity is it
    if found is not None:
        if direct or description is not None:
            sql.touch_entity(conn, found, direct, description, now)
        return found, False
    eid = entity_id(norm, type_)
    created = not sql.entity_exists(conn, eid)
    if created:  # else the id's entity was merged away and its alias moved: a new one takes it
        sql.insert_entity(conn, eid, display(name), type_, description, direct, now)
    sql.insert_alias(conn, norm, type_, display(name), eid)
    return eid, created


def _with_aliases(
    sql: GraphSql, rows: Sequence[Row], aliases: dict[str, list[str]]
) -> list[Entity]:
    return [sql.entity(r, tuple(dict.fromkeys(aliases.get(r[0], ())))) for r in rows]


def fetch_entities(sql: GraphSql, conn: Connection, ids: Sequence[str]) -> dict[str, Entity]:
    """The entities with these ids (missing ones left out), with their aliases."""
    if not ids:
        return {}
    rows = sql.entities_with_aliases(conn, ids)  # one row per alias
    aliases: dict[str, list[str]] = {}
    for r in rows:
        names = aliases.setdefault(r[0], [])
        if r[7] is not None:
            names.append(r[7])
    return {e.id: e for e in _with_aliases(sql, rows, aliases)}


def fetch_entity(sql: GraphSql, conn: Connection, eid: str) -> Entity | None:
    """One entity, or ``None``."""
    return fetch_entities(sql, conn, [eid]).get(eid)


def list_entities(
    sql: GraphSql, conn: Connection, type_: str | None, limit: int, after: str = ""
) -> list[Entity]:
    """Entities (of one type, or all) in id order after ``after``."""
    rows = sql.entity_rows(conn, type_, limit, after)
    aliases: dict[str, list[str]] = {}
    for eid, alias in sql.alias_rows(conn, [r[0] for r in rows]) if rows else ():
        aliases.setdefault(eid, []).append(alias)
    return _with_aliases(sql, rows, aliases)


def remove_entity(sql: GraphSql, conn: Connection, eid: str) -> bool:
    """Delete an entity with its relations and provenance; False if missing."""
    rels = [r.id for r in sql.relations_of(conn, eid)]
    if rels:
        sql.delete_relations(conn, rels)
    return sql.delete_entity(conn, eid)


# --- relations -----------------------------------------------------------------------------


def ensure_relation(
    sql: GraphSql,
    conn: Connection,
    subject: str,
    predicate: str,
    obj: str,
    now: int,
    *,
    confidence: float,
    valid_from: int | None,
    valid_to: int | None,
    direct: bool,
) -> str:
    """The id of the current relation ``subject -predicate-> object``, created if none
    holds now (confidence becomes the larger of the two; ``direct`` sticks)."""
    if predicate == MENTIONED_WITH and obj < subject:
        subject, obj = obj, subject  # symmetric: one row per pair
    if valid_to is None:
        current = sql.current_relation(conn, subject, predicate, obj)
        if current is not None:
            sql.strengthen_relation(conn, current, confidence, direct, valid_from)
            return current
    rid = relation_id()
    sql.insert_relation(
        conn, rid, subject, predicate, obj, confidence, valid_from, valid_to, direct, now
    )
    return rid


def assert_facts(
    sql: GraphSql,
    conn: Connection,
    memory_id: str,
    entities: Sequence[EntityFact],
    relations: Sequence[RelationFact],
    origin: str,
    now: int,
) -> None:
    """Memory ``memory_id`` asserts these facts (found by ``origin``): their entities and
    relations are found or created (derived, not direct) and it is recorded as their
    provenance. A relation of an entity with itself is left out."""

    def found(name: str, type_: str) -> str:
        return ensure_entity(sql, conn, name, type_, now, direct=False)[0]

    entity_ids = [found(e.name, e.type) for e in entities]
    relation_ids = []
    for r in relations:
        s, o = found(r.subject, r.subject_type), found(r.object, r.object_type)
        if s == o:
            continue
        entity_ids += [s, o]
        rid = ensure_relation(
            sql, conn, s, r.predicate, o, now,
            confidence=r.confidence, valid_from=None, valid_to=None, direct=False,
        )  # fmt: skip
        relation_ids.append(rid)
    sql.add_provenance(conn, memory_id, entity_ids, relation_ids, origin)


def merge(sql: GraphSql, conn: Connection, keep: str, drop: str, now: int) -> None:
    """Fold entity ``drop`` into ``keep``: aliases, relations and provenance move over;
    relations that become the same current relation are joined."""
    sql.merge_entity(conn, keep, drop, now)
    touched: list[str] = []
    for rel in sql.relations_of(conn, drop):
        subject = keep if rel.subject_id == drop else rel.subject_id
        obj = keep if rel.object_id == drop else rel.object_id
        if subject == obj:  # a relation between the two merged entities: nothing left
            sql.delete_relations(conn, [rel.id])
            continue
        if rel.predicate == MENTIONED_WITH and obj < subject:
            subject, obj = obj, subject
        twin = None
        if rel.valid_to is None:
            twin = sql.current_relation(conn, subject, rel.predicate, obj, other_than=rel.id)
        if twin is None:
            sql.move_relation(conn, rel.id, subject, obj)
            continue
        sql.join_relation(conn, twin, rel)
        touched.append(twin)
    sql.reweigh(conn, touched)
    sql.delete_entity(conn, drop)

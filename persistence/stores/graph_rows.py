"""The knowledge graph's row logic, written once over an engine's graph SQL
(:class:`~persistence.stores.graph_engine.GraphSql`): ids and shown names, finding or
creating entities and relations, reading entities with their aliases, removing and
merging. Each function takes the engine's SQL and connection first and runs its
statements (:mod:`persistence.statements`) in the caller's transaction or snapshot."""

from __future__ import annotations

import hashlib
import os
import unicodedata
from collections.abc import Iterable, Sequence

from persistence.engine import Connection
from persistence.graph_records import (
    DEFAULT_TYPE,
    MENTIONED_WITH,
    Entity,
    EntityFact,
    RelationFact,
    normalise,
)
from persistence.statements import row, rows, run
from persistence.stores import graph_reads as reads
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
    # the writer's own scope only: a row of another scope's entity cannot be linked to
    found = reads.resolve(sql, conn, norm, type_, own=True)
    if found is None and type_ == DEFAULT_TYPE:  # an untyped mention of a typed entity
        found = reads.resolve(sql, conn, norm, None, own=True)
    if found is not None:
        if direct or description is not None:
            run(conn, sql.touch_entity(found, direct, description, now))
        return found, False
    eid = entity_id(norm, type_)
    created = not reads.entity_exists(sql, conn, eid, own=True)
    if created:  # else the id's entity was merged away and its alias moved: a new one takes it
        run(conn, sql.insert_entity(eid, display(name), type_, description, direct, now))
    run(conn, sql.insert_alias(norm, type_, display(name), eid))
    return eid, created


def _with_aliases(
    sql: GraphSql, found: Sequence[Row], aliases: dict[str, list[str]]
) -> list[Entity]:
    return [sql.entity(r, tuple(dict.fromkeys(aliases.get(r[0], ())))) for r in found]


def fetch_entities(sql: GraphSql, conn: Connection, ids: Sequence[str]) -> dict[str, Entity]:
    """The entities with these ids (missing ones left out), with their aliases."""
    if not ids:
        return {}
    found = rows(conn, sql.entities_with_aliases(ids))  # one row per alias
    aliases: dict[str, list[str]] = {}
    for r in found:
        names = aliases.setdefault(r[0], [])
        if r[7] is not None:
            names.append(r[7])
    return {e.id: e for e in _with_aliases(sql, found, aliases)}


def fetch_entity(sql: GraphSql, conn: Connection, eid: str) -> Entity | None:
    """One entity, or ``None``."""
    return fetch_entities(sql, conn, [eid]).get(eid)


def list_entities(
    sql: GraphSql, conn: Connection, type_: str | None, limit: int, after: str = ""
) -> list[Entity]:
    """Entities (of one type, or all) in id order after ``after``."""
    found = rows(conn, sql.entity_rows(type_, limit, after))
    named = rows(conn, sql.alias_rows([r[0] for r in found])) if found else []
    aliases: dict[str, list[str]] = {}
    names = sql.texts("entity_aliases", "alias", (alias for _, alias in named))
    for (eid, _), alias in zip(named, names, strict=True):
        aliases.setdefault(eid, []).append(alias)
    return _with_aliases(sql, found, aliases)


def remove_entity(sql: GraphSql, conn: Connection, eid: str) -> bool:
    """Delete an entity with its relations and provenance; False if missing."""
    rels = [r.id for r in reads.relations_of(sql, conn, eid)]
    if rels:
        run(conn, sql.delete_relations(rels))
    return row(conn, sql.delete_entity(eid)) is not None


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
        current = reads.current_relation(sql, conn, subject, predicate, obj)
        if current is not None:
            run(conn, sql.strengthen_relation(current, confidence, direct, valid_from))
            return current
    rid = relation_id()
    run(
        conn,
        sql.insert_relation(
            rid, subject, predicate, obj, confidence, valid_from, valid_to, direct, now
        ),
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
    add_provenance(sql, conn, memory_id, entity_ids, relation_ids, origin)


def add_provenance(
    sql: GraphSql, conn: Connection, memory_id: str, entity_ids: Iterable[str],
    relation_ids: Iterable[str], origin: str,
) -> None:  # fmt: skip
    """Record that ``memory_id`` asserted these entities and relations (rows already
    there left as they are), and re-weigh the relations."""
    entities, relations = sorted(set(entity_ids)), sorted(set(relation_ids))
    if entities:
        run(conn, sql.add_entity_provenance(memory_id, entities, origin))
    if relations:
        run(conn, sql.add_relation_provenance(memory_id, relations, origin))
        run(conn, sql.reweigh(relations))


def merge(sql: GraphSql, conn: Connection, keep: str, drop: str, now: int) -> None:
    """Fold entity ``drop`` into ``keep``: aliases, relations and provenance move over;
    relations that become the same current relation are joined."""
    run(conn, sql.move_aliases(keep, drop))
    run(conn, sql.merge_entity_provenance(keep, drop))
    run(conn, sql.merge_entity(keep, drop, now))
    touched: list[str] = []
    for rel in reads.relations_of(sql, conn, drop):
        subject = keep if rel.subject_id == drop else rel.subject_id
        obj = keep if rel.object_id == drop else rel.object_id
        if subject == obj:  # a relation between the two merged entities: nothing left
            run(conn, sql.delete_relations([rel.id]))
            continue
        if rel.predicate == MENTIONED_WITH and obj < subject:
            subject, obj = obj, subject
        twin = None
        if rel.valid_to is None:
            twin = reads.current_relation(sql, conn, subject, rel.predicate, obj, rel.id)
        if twin is None:
            run(conn, sql.move_relation(rel.id, subject, obj))
            continue
        run(conn, sql.merge_relation_provenance(twin, rel.id))  # rel joins twin
        run(conn, sql.join_relation(twin, rel.confidence, rel.direct))
        run(conn, sql.delete_relations([rel.id]))
        touched.append(twin)
    if touched:
        run(conn, sql.reweigh(touched))
    run(conn, sql.delete_entity(drop))

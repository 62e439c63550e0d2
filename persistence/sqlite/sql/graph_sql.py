"""SQL for the knowledge-graph family: entities, aliases, relations, provenance, the
extraction queue and garbage collection (schema version 10, :mod:`migrations.v010_knowledge_graph`).

Functions take an open connection and run inside the caller's transaction; lists are
passed as one JSON array parameter (``json_each``), never spliced into the text.
"""

from __future__ import annotations

import hashlib
import os
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

import apsw
import orjson

from persistence.graph_records import (
    DEFAULT_TYPE,
    MENTIONED_WITH,
    Entity,
    Reach,
    Relation,
    normalise,
)
from persistence.sqlite.connection import query_all, query_one, query_value
from persistence.sqlite.row_checks import (
    INT,
    NULL_INT,
    NULL_TEXT,
    REAL,
    TEXT,
    check_row,
    damaged_row,
    texts,
)


def has_graph(conn: apsw.Connection) -> bool:
    """True if the file has the graph tables (schema 10 on)."""
    return query_one(conn, "SELECT 1 FROM sqlite_schema WHERE name = 'graph_dirty'") is not None


def display(name: str) -> str:
    """A name as shown: NFC, spaces collapsed."""
    return " ".join(unicodedata.normalize("NFC", name).split())


def entity_id(norm: str, type_: str) -> str:
    """The stable id of an entity first written with this normalised name and type."""
    digest = hashlib.blake2b(f"{type_}\x1f{norm}".encode(), digest_size=12).hexdigest()
    return f"ent_{digest}"


def relation_id() -> str:
    """A fresh relation id."""
    return f"rel_{os.urandom(12).hex()}"


def _ids(values: Iterable[str]) -> str:
    return orjson.dumps(sorted(set(values))).decode()


# --- entities ------------------------------------------------------------------------

_ENTITY = "SELECT id, name, type, description, direct, created_at, updated_at FROM entities"


_ENTITY_NAMES = ("id", "name", "type", "description", "direct", "created_at", "updated_at")
_ENTITY_KINDS = (TEXT, TEXT, TEXT, NULL_TEXT, INT, INT, INT)


def _entity(row: Sequence[Any], aliases: tuple[str, ...] = ()) -> Entity:
    """The entity a row holds (damage if a column's type is not its own)."""
    check_row("entities", _ENTITY_NAMES, _ENTITY_KINDS, row)
    return Entity(
        id=row[0], name=row[1], type=row[2], description=row[3], aliases=aliases,
        direct=bool(row[4]), created_at=row[5], updated_at=row[6],
    )  # fmt: skip


def aliases_of(conn: apsw.Connection, ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Every alias (display text) of each entity, in a stable order."""
    found: dict[str, list[str]] = {}
    rows = query_all(
        conn,
        "SELECT entity_id, alias FROM entity_aliases WHERE entity_id IN "
        "(SELECT value FROM json_each(?)) ORDER BY entity_id, rowid",
        (_ids(ids),),
    )
    for eid, alias in rows:
        found.setdefault(eid, []).append(alias)
    texts("entity_aliases", "alias", (alias for _, alias in rows))
    return {k: tuple(dict.fromkeys(v)) for k, v in found.items()}


_ENTITIES_WITH_ALIASES = (
    "SELECT e.id, e.name, e.type, e.description, e.direct, e.created_at, e.updated_at, a.alias "
    "FROM entities AS e LEFT JOIN entity_aliases AS a ON a.entity_id = e.id "
    "WHERE e.id IN (SELECT value FROM json_each(?)) ORDER BY e.id, a.rowid"
)


def fetch_entities(conn: apsw.Connection, ids: Sequence[str]) -> dict[str, Entity]:
    """The entities with these ids (missing ones left out), with their aliases."""
    if not ids:
        return {}
    rows = query_all(conn, _ENTITIES_WITH_ALIASES, (_ids(ids),))  # one row per alias
    aliases: dict[str, list[str]] = {}
    for r in rows:
        names = aliases.setdefault(check_row("entities", _ENTITY_NAMES, _ENTITY_KINDS, r)[0], [])
        if r[7] is not None:
            names.append(r[7])
    return {r[0]: _entity(r, tuple(dict.fromkeys(aliases[r[0]]))) for r in rows}


def fetch_entity(conn: apsw.Connection, eid: str) -> Entity | None:
    """One entity, or ``None``."""
    return fetch_entities(conn, [eid]).get(eid)


def resolve(conn: apsw.Connection, norm: str, type_: str | None) -> str | None:
    """The entity a normalised name (of a type, or of any) resolves to.

    Of several entities of different types sharing the name, the best supported (then
    the directly added, then the smallest id) wins.
    """
    if type_ is not None:
        row = query_one(
            conn, "SELECT entity_id FROM entity_aliases WHERE norm = ? AND type = ?", (norm, type_)
        )
        return None if row is None else str(row[0])
    row = query_one(
        conn,
        "SELECT a.entity_id FROM entity_aliases AS a JOIN entities AS e ON e.id = a.entity_id "
        "WHERE a.norm = ? ORDER BY (SELECT count(*) FROM memory_entities AS m "
        "WHERE m.entity_id = a.entity_id) DESC, e.direct DESC, a.entity_id LIMIT 1",
        (norm,),
    )
    return None if row is None else str(row[0])


def ensure_entity(
    conn: apsw.Connection,
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
    found = resolve(conn, norm, type_)
    if found is None and type_ == DEFAULT_TYPE:
        found = resolve(conn, norm, None)  # an untyped mention of a typed entity is it
    if found is not None:
        if direct or description is not None:
            conn.execute(
                "UPDATE entities SET direct = max(direct, ?), "
                "description = coalesce(?, description), updated_at = ? WHERE id = ?",
                (int(direct), description, now, found),
            )
        return found, False
    eid = entity_id(norm, type_)
    if query_one(conn, "SELECT 1 FROM entities WHERE id = ?", (eid,)) is None:
        conn.execute(
            "INSERT INTO entities (id, name, type, description, direct, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (eid, display(name), type_, description, int(direct), now, now),
        )
        created = True
    else:  # the id's entity was merged away and its alias moved: a new one takes it
        created = False
    conn.execute(
        "INSERT INTO entity_aliases (norm, type, alias, entity_id) VALUES (?, ?, ?, ?)",
        (norm, type_, display(name), eid),
    )
    return eid, created


def add_alias(conn: apsw.Connection, eid: str, name: str, type_: str) -> bool:
    """Let ``name`` (of ``type_``) resolve to ``eid``; False if it names another entity."""
    norm = normalise(name)
    current = resolve(conn, norm, type_)
    if current is not None:
        return current == eid
    conn.execute(
        "INSERT INTO entity_aliases (norm, type, alias, entity_id) VALUES (?, ?, ?, ?)",
        (norm, type_, display(name), eid),
    )
    return True


def list_entities(
    conn: apsw.Connection, type_: str | None, limit: int, after: str = ""
) -> list[Entity]:
    """Entities (of one type, or all) in id order after ``after``."""
    if type_ is None:
        rows = query_all(conn, f"{_ENTITY} WHERE id > ? ORDER BY id LIMIT ?", (after, limit))
    else:
        rows = query_all(
            conn, f"{_ENTITY} WHERE type = ? AND id > ? ORDER BY id LIMIT ?", (type_, after, limit)
        )
    aliases = aliases_of(conn, [r[0] for r in rows])
    return [_entity(r, aliases.get(r[0], ())) for r in rows]


def memory_ids_about(conn: apsw.Connection, eid: str, limit: int) -> list[str]:
    """Memories that name the entity (most recently asserted first, by id)."""
    rows = query_all(
        conn,
        "SELECT DISTINCT memory_id FROM memory_entities WHERE entity_id = ? "
        "ORDER BY memory_id LIMIT ?",
        (eid, limit),
    )
    return texts("memory_entities", "memory_id", (r[0] for r in rows))


def capped_memory_count(conn: apsw.Connection, eid: str, cap: int) -> int:
    """How many memories name the entity, counting no further than ``cap``."""
    return int(
        query_value(
            conn,
            "SELECT count(*) FROM (SELECT 1 FROM memory_entities WHERE entity_id = ? LIMIT ?)",
            (eid, cap),
        )
    )


def memory_counts(conn: apsw.Connection, ids: Sequence[str]) -> dict[str, int]:
    """How many memories name each entity."""
    rows = query_all(
        conn,
        "SELECT entity_id, count(DISTINCT memory_id) FROM memory_entities WHERE entity_id IN "
        "(SELECT value FROM json_each(?)) GROUP BY entity_id",
        (_ids(ids),),
    )
    return {r[0]: int(r[1]) for r in rows}


# --- relations -----------------------------------------------------------------------

_RELATION = (
    "SELECT id, subject_id, predicate, object_id, confidence, weight, valid_from, valid_to, "
    "direct, created_at FROM relations"
)


_RELATION_NAMES = (
    "id", "subject_id", "predicate", "object_id", "confidence", "weight", "valid_from",
    "valid_to", "direct", "created_at",
)  # fmt: skip
_RELATION_KINDS = (TEXT, TEXT, TEXT, TEXT, REAL, REAL, NULL_INT, NULL_INT, INT, INT)


def _checked_relation(row: Sequence[Any]) -> Sequence[Any]:
    """A relations row, if each column holds its type (else damage)."""
    return check_row("relations", _RELATION_NAMES, _RELATION_KINDS, row)


def _relation(row: Sequence[Any]) -> Relation:
    """The relation a row holds (damage if a column's type is not its own)."""
    _checked_relation(row)
    return Relation(
        id=row[0], subject_id=row[1], predicate=row[2], object_id=row[3], confidence=row[4],
        weight=row[5], valid_from=row[6], valid_to=row[7], direct=bool(row[8]),
        created_at=row[9],
    )  # fmt: skip


def fetch_relations(conn: apsw.Connection, ids: Sequence[str]) -> dict[str, Relation]:
    """The relations with these ids (missing ones left out)."""
    if not ids:
        return {}
    rows = query_all(
        conn, f"{_RELATION} WHERE id IN (SELECT value FROM json_each(?))", (_ids(ids),)
    )
    return {r[0]: _relation(r) for r in rows}


def relations_of(conn: apsw.Connection, eid: str) -> list[Relation]:
    """Every relation (also invalidated ones) with ``eid`` at one end."""
    rows = query_all(
        conn,
        f"{_RELATION} WHERE subject_id = ? UNION {_RELATION} WHERE object_id = ? ORDER BY 1",
        (eid, eid),
    )
    return [_relation(r) for r in rows]


def asserting_memories(conn: apsw.Connection, relation_ids: Sequence[str]) -> dict[str, list[str]]:
    """Ids of the memories that assert each relation (by memory id); relations no memory
    asserts are left out."""
    if not relation_ids:
        return {}
    rows = query_all(
        conn,
        "SELECT DISTINCT relation_id, memory_id FROM memory_relations "
        "WHERE relation_id IN (SELECT value FROM json_each(?)) ORDER BY 1, 2",
        (_ids(relation_ids),),
    )
    found: dict[str, list[str]] = {}
    for rid, mid in rows:
        if type(rid) is not str or type(mid) is not str:
            raise damaged_row("memory_relations", ("relation_id", "memory_id"), (TEXT, TEXT),
                              (rid, mid))  # fmt: skip
        found.setdefault(rid, []).append(mid)
    return found


def facts_of(conn: apsw.Connection, memory_id: str) -> tuple[list[str], list[Relation]]:
    """The entity ids and the relations (by id) that one memory asserts."""
    entities = query_all(
        conn,
        "SELECT DISTINCT entity_id FROM memory_entities WHERE memory_id = ? ORDER BY 1",
        (memory_id,),
    )
    relations = query_all(
        conn,
        f"{_RELATION} WHERE id IN (SELECT relation_id FROM memory_relations "
        "WHERE memory_id = ?) ORDER BY 1",
        (memory_id,),
    )
    return texts("memory_entities", "entity_id", (r[0] for r in entities)), [
        _relation(r) for r in relations
    ]


def ensure_relation(
    conn: apsw.Connection,
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
        row = query_one(
            conn,
            "SELECT id FROM relations WHERE subject_id = ? AND predicate = ? AND object_id = ? "
            "AND valid_to IS NULL",
            (subject, predicate, obj),
        )
        if row is not None:
            conn.execute(
                "UPDATE relations SET confidence = max(confidence, ?), direct = max(direct, ?), "
                "valid_from = CASE WHEN valid_from IS NULL OR ? IS NULL THEN NULL "
                "ELSE min(valid_from, ?) END WHERE id = ?",
                (confidence, int(direct), valid_from, valid_from, row[0]),
            )
            return str(row[0])
    rid = relation_id()
    conn.execute(
        "INSERT INTO relations (id, subject_id, predicate, object_id, confidence, weight, "
        "valid_from, valid_to, direct, created_at) VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?)",
        (rid, subject, predicate, obj, confidence, valid_from, valid_to, int(direct), now),
    )
    return rid


def invalidate(conn: apsw.Connection, rid: str, at: int) -> bool:
    """Set ``valid_to``; False if the relation is missing."""
    return (
        query_one(conn, "UPDATE relations SET valid_to = ? WHERE id = ? RETURNING id", (at, rid))
        is not None
    )


# --- provenance ----------------------------------------------------------------------


def move_provenance(conn: apsw.Connection, drop: str, keep: str) -> None:
    """Every entity and relation memory ``drop`` supports, memory ``keep`` supports too."""
    for table, column in (("memory_entities", "entity_id"), ("memory_relations", "relation_id")):
        conn.execute(
            f"INSERT OR IGNORE INTO {table} (memory_id, {column}, origin) "
            f"SELECT ?, {column}, origin FROM {table} WHERE memory_id = ?",
            (keep, drop),
        )


def add_provenance(
    conn: apsw.Connection,
    memory_id: str,
    entity_ids: Iterable[str],
    relation_ids: Iterable[str],
    origin: str,
) -> None:
    """Record that ``memory_id`` asserted these entities and relations."""
    conn.executemany(
        "INSERT OR IGNORE INTO memory_entities (memory_id, entity_id, origin) VALUES (?, ?, ?)",
        [(memory_id, e, origin) for e in sorted(set(entity_ids))],
    )
    relations = sorted(set(relation_ids))
    conn.executemany(
        "INSERT OR IGNORE INTO memory_relations (memory_id, relation_id, origin) VALUES (?, ?, ?)",
        [(memory_id, r, origin) for r in relations],
    )
    reweigh(conn, relations)


def reweigh(conn: apsw.Connection, relation_ids: Sequence[str]) -> None:
    """``weight`` = how many memories support each relation."""
    if relation_ids:
        conn.execute(
            "UPDATE relations SET weight = (SELECT count(DISTINCT memory_id) FROM memory_relations "
            "AS m WHERE m.relation_id = relations.id) WHERE id IN (SELECT value FROM json_each(?))",
            (_ids(relation_ids),),
        )


def drop_provenance(
    conn: apsw.Connection, memory_ids: Sequence[str], origin: str | None = None
) -> tuple[list[str], list[str]]:
    """Remove these memories' provenance (of one origin, or all); return the entities
    and relations it touched."""
    ids = _ids(memory_ids)
    where = "memory_id IN (SELECT value FROM json_each(?))" + (
        "" if origin is None else " AND origin = ?"
    )
    params: tuple[Any, ...] = (ids,) if origin is None else (ids, origin)
    drop_entities = f"DELETE FROM memory_entities WHERE {where} RETURNING entity_id"
    drop_relations = f"DELETE FROM memory_relations WHERE {where} RETURNING relation_id"
    entities = texts(
        "memory_entities", "entity_id", (r[0] for r in query_all(conn, drop_entities, params))
    )
    relations = texts(
        "memory_relations", "relation_id", (r[0] for r in query_all(conn, drop_relations, params))
    )
    return sorted(set(entities)), sorted(set(relations))


def collect(conn: apsw.Connection, entity_ids: Sequence[str], relation_ids: Sequence[str]) -> None:
    """Delete the derived relations, then entities, among these that nothing supports
    any more (an entity also stays while a relation uses it); re-weigh the rest."""
    ends: list[str] = []
    if relation_ids:
        rows = query_all(
            conn,
            "DELETE FROM relations WHERE id IN (SELECT value FROM json_each(?)) AND direct = 0 "
            "AND NOT EXISTS (SELECT 1 FROM memory_relations AS m "
            "WHERE m.relation_id = relations.id) RETURNING subject_id, object_id",
            (_ids(relation_ids),),
        )
        ends = texts("relations", "subject_id or object_id", (e for row in rows for e in row))
        reweigh(conn, relation_ids)
    candidates = set(entity_ids) | set(ends)
    if candidates:
        conn.execute(
            "DELETE FROM entities WHERE id IN (SELECT value FROM json_each(?)) AND direct = 0 "
            "AND NOT EXISTS (SELECT 1 FROM memory_entities AS m WHERE m.entity_id = entities.id) "
            "AND NOT EXISTS (SELECT 1 FROM relations AS r WHERE r.subject_id = entities.id) "
            "AND NOT EXISTS (SELECT 1 FROM relations AS r WHERE r.object_id = entities.id)",
            (_ids(candidates),),
        )


def collect_garbage(conn: apsw.Connection) -> bool:
    """Work off ``graph_dirty`` (memories deleted in this transaction): the provenance of
    those still gone goes, and with it what nothing supports any more. True if there
    was anything to do. Runs just before every commit."""
    if query_one(conn, "SELECT 1 FROM graph_dirty LIMIT 1") is None:
        return False
    conn.execute(
        "DELETE FROM graph_dirty WHERE "
        "EXISTS (SELECT 1 FROM scratchpad WHERE id = graph_dirty.memory_id) OR "
        "EXISTS (SELECT 1 FROM episodic WHERE id = graph_dirty.memory_id) OR "
        "EXISTS (SELECT 1 FROM semantic WHERE id = graph_dirty.memory_id)"
    )
    gone = texts(
        "graph_dirty",
        "memory_id",
        (r[0] for r in query_all(conn, "DELETE FROM graph_dirty RETURNING memory_id")),
    )
    if gone:
        entities, relations = drop_provenance(conn, gone)
        kept = query_one(conn, "SELECT 1 FROM sqlite_schema WHERE name = 'memory_versions'")
        for table in ("graph_queue", "content_keys") + (("memory_versions",) if kept else ()):
            conn.execute(
                f"DELETE FROM {table} WHERE memory_id IN (SELECT value FROM json_each(?))",
                (_ids(gone),),
            )
        collect(conn, entities, relations)
    return True


def remove_entity(conn: apsw.Connection, eid: str) -> bool:
    """Delete an entity with its relations and provenance; False if missing."""
    rels = [r.id for r in relations_of(conn, eid)]
    if rels:
        conn.execute(
            "DELETE FROM relations WHERE id IN (SELECT value FROM json_each(?))", (_ids(rels),)
        )
    return query_one(conn, "DELETE FROM entities WHERE id = ? RETURNING id", (eid,)) is not None


def remove_relation(conn: apsw.Connection, rid: str) -> tuple[str, str] | None:
    """Delete a relation (and its provenance); its endpoints, or ``None`` if missing."""
    row = query_one(
        conn, "DELETE FROM relations WHERE id = ? RETURNING subject_id, object_id", (rid,)
    )
    return None if row is None else (str(row[0]), str(row[1]))


def merge(conn: apsw.Connection, keep: str, drop: str, now: int) -> None:
    """Fold entity ``drop`` into ``keep``: aliases, relations and provenance move over;
    relations that become the same current relation are joined."""
    conn.execute("UPDATE entity_aliases SET entity_id = ? WHERE entity_id = ?", (keep, drop))
    conn.execute(
        "INSERT OR IGNORE INTO memory_entities (memory_id, entity_id, origin) "
        "SELECT memory_id, ?, origin FROM memory_entities WHERE entity_id = ?",
        (keep, drop),
    )
    conn.execute(
        "UPDATE entities SET direct = max(direct, (SELECT direct FROM entities WHERE id = ?)), "
        "description = coalesce(description, (SELECT description FROM entities WHERE id = ?)), "
        "updated_at = ? WHERE id = ?",
        (drop, drop, now, keep),
    )
    touched: list[str] = []
    for rel in relations_of(conn, drop):
        subject = keep if rel.subject_id == drop else rel.subject_id
        obj = keep if rel.object_id == drop else rel.object_id
        if subject == obj:  # a relation between the two merged entities: nothing left
            conn.execute("DELETE FROM relations WHERE id = ?", (rel.id,))
            continue
        if rel.predicate == MENTIONED_WITH and obj < subject:
            subject, obj = obj, subject
        twin = None
        if rel.valid_to is None:
            twin = query_one(
                conn,
                "SELECT id FROM relations WHERE subject_id = ? AND predicate = ? AND object_id = ? "
                "AND valid_to IS NULL AND id != ?",
                (subject, rel.predicate, obj, rel.id),
            )
        if twin is None:
            conn.execute(
                "UPDATE relations SET subject_id = ?, object_id = ? WHERE id = ?",
                (subject, obj, rel.id),
            )
            continue
        conn.execute(
            "INSERT OR IGNORE INTO memory_relations (memory_id, relation_id, origin) "
            "SELECT memory_id, ?, origin FROM memory_relations WHERE relation_id = ?",
            (twin[0], rel.id),
        )
        conn.execute(
            "UPDATE relations SET confidence = max(confidence, ?), direct = max(direct, ?) "
            "WHERE id = ?",
            (rel.confidence, int(rel.direct), twin[0]),
        )
        conn.execute("DELETE FROM relations WHERE id = ?", (rel.id,))
        touched.append(str(twin[0]))
    reweigh(conn, touched)
    conn.execute("DELETE FROM entities WHERE id = ?", (drop,))


# --- traversal -------------------------------------------------------------------------

_VALID = (
    "(r.valid_from IS NULL OR r.valid_from <= :at) AND (r.valid_to IS NULL OR r.valid_to > :at)"
)
_HOP_COLUMNS = (
    "r.id, r.subject_id, r.predicate, r.object_id, r.confidence, r.weight, r.valid_from, "
    "r.valid_to, r.direct, r.created_at"
)


def hop_sql(predicates: bool) -> str:
    """The relations one entity (``:node``) follows: its ``:fanout`` best supported
    valid ones (weight, then confidence, then id) with it as subject, then as object.
    Each arm reads ``idx_relations_subject`` / ``idx_relations_object`` in that order and
    stops after ``:fanout`` rows, so a hub costs no more than a leaf; from schema 11 the
    indexes cover the row (:mod:`migrations.v011_relation_walk_index`), so no table page
    is read."""
    only = " AND r.predicate IN (SELECT value FROM json_each(:predicates))" if predicates else ""
    arm = (
        f"SELECT * FROM (SELECT {_HOP_COLUMNS} FROM relations AS r WHERE r.{{end}} = :node "
        f"AND {_VALID}{only} ORDER BY r.weight DESC, r.confidence DESC, r.id LIMIT :fanout)"
    )
    return arm.format(end="subject_id") + " UNION ALL " + arm.format(end="object_id")


def walk(
    conn: apsw.Connection,
    start: str,
    depth: int,
    at: int,
    fanout: int,
    cap: int,
    predicates: Sequence[str] | None = None,
    *,
    limit: int | None = None,
    target: str | None = None,
) -> list[Reach]:
    """The entities within ``depth`` hops of ``start`` (itself left out), each with its
    shallowest path, of those the best supported (then the one with the smallest
    relation ids); nearest, then best supported, then by id first; the first ``limit``.

    Breadth first, one level at a time; each entity is expanded once, at its shallowest
    depth, best supported first, following its ``fanout`` best supported relations valid
    at ``at`` (of ``predicates``) per direction (:func:`hop_sql`), both ways, never back
    to an entity reached on an earlier level (cycle-safe). No entity is expanded once
    ``cap`` relations have been read. The walk ends after the level on which ``limit``
    entities are reached (deeper ones would rank after them) or ``target`` is.
    """
    sql = hop_sql(predicates is not None)
    params: dict[str, Any] = {"node": start, "at": at, "fanout": fanout}
    if predicates is not None:
        params["predicates"] = orjson.dumps(list(predicates)).decode()
    # entity -> (depth, support, the entity it was reached from, the relation's row)
    reached: dict[str, tuple[int, float, str, tuple[Any, ...]]] = {start: (0, 0.0, "", ())}

    def ids(eid: str, last: tuple[Any, ...]) -> list[str]:
        """The relation ids along the path to ``eid``'s parent, then ``last``'s."""
        path = [last[0]]
        while eid != start:
            _, _, eid, row = reached[eid]
            path.append(row[0])
        return path[::-1]

    frontier = [start]
    read = 0
    for level in range(1, depth + 1):
        found: dict[str, tuple[int, float, str, tuple[Any, ...]]] = {}
        for node in frontier:
            if read >= cap:
                break
            base = reached[node][1]
            params["node"] = node
            for row in conn.execute(sql, params):
                _checked_relation(row)
                read += 1
                other = row[3] if row[1] == node else row[1]
                if other in reached:
                    continue
                support = base + row[5]
                have = found.get(other)
                if (
                    have is None
                    or support > have[1]
                    or (support == have[1] and ids(node, row) < ids(have[2], have[3]))
                ):
                    found[other] = (level, support, node, row)
        if not found:
            break
        reached.update(found)
        if (limit is not None and len(reached) > limit) or (target is not None and target in found):
            break
        frontier = sorted(found, key=lambda e: (-found[e][1], e))
    del reached[start]
    order = sorted(reached, key=lambda e: (reached[e][0], -reached[e][1], e))[:limit]
    relations: dict[str, Relation] = {}

    def via(eid: str) -> tuple[Relation, ...]:
        path = []
        while eid != start:
            _, _, eid, row = reached[eid]
            if row[0] not in relations:
                relations[row[0]] = _relation(row)
            path.append(relations[row[0]])
        return tuple(path[::-1])

    return [Reach(e, reached[e][0], via(e), reached[e][1]) for e in order]


# --- recall: entities named in a text --------------------------------------------------


def entities_named_in(
    conn: apsw.Connection, words: Sequence[str], limit: int
) -> list[tuple[str, str]]:
    """``(entity id, alias)`` of aliases that contain any of ``words`` (FTS5 index);
    the caller checks that the whole alias occurs in the text."""
    if not words:
        return []
    match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
    rows = query_all(
        conn,
        "SELECT entity_id, alias FROM entity_fts WHERE entity_fts MATCH ? LIMIT ?",
        (f"alias : ({match})", limit),
    )
    return [(str(r[0]), str(r[1])) for r in rows]


# --- the extraction queue --------------------------------------------------------------


def pending(conn: apsw.Connection, now: int, limit: int) -> list[tuple[str, str, int]]:
    """``(memory id, content, attempts)`` of memories waiting for extraction now."""
    rows = query_all(
        conn,
        "SELECT q.memory_id, coalesce(s.content, e.content, p.content), q.attempts "
        "FROM graph_queue AS q LEFT JOIN semantic AS s ON s.id = q.memory_id "
        "LEFT JOIN episodic AS e ON e.id = q.memory_id "
        "LEFT JOIN scratchpad AS p ON p.id = q.memory_id "
        "WHERE q.not_before <= ? ORDER BY q.not_before, q.memory_id LIMIT ?",
        (now, limit),
    )
    names, kinds = ("memory_id", "content", "attempts"), (TEXT, NULL_TEXT, INT)
    for r in rows:
        check_row("graph_queue", names, kinds, r)
    return [(r[0], r[1], r[2]) for r in rows]


def dequeue(conn: apsw.Connection, memory_id: str) -> None:
    """The memory's extraction is done."""
    conn.execute("DELETE FROM graph_queue WHERE memory_id = ?", (memory_id,))


def enqueue(conn: apsw.Connection, memory_ids: Sequence[str]) -> None:
    """Queue memories for (re-)extraction."""
    conn.execute(
        "INSERT OR REPLACE INTO graph_queue (memory_id) SELECT value FROM json_each(?)",
        (_ids(memory_ids),),
    )


def postpone(conn: apsw.Connection, memory_id: str, until: int, error: str) -> None:
    """An extraction failed: retry at ``until``."""
    conn.execute(
        "UPDATE graph_queue SET attempts = attempts + 1, not_before = ?, error = ? "
        "WHERE memory_id = ?",
        (until, error[:1000], memory_id),
    )


def content_of(conn: apsw.Connection, memory_id: str) -> str | None:
    """A memory's content in any tier, or ``None``."""
    row = query_one(
        conn,
        "SELECT content FROM semantic WHERE id = ?1 UNION ALL SELECT content FROM episodic "
        "WHERE id = ?1 UNION ALL SELECT content FROM scratchpad WHERE id = ?1",
        (memory_id,),
    )
    return None if row is None else str(row[0])


# --- statistics and integrity ----------------------------------------------------------

STAT_QUERIES = {
    "entities": "SELECT count(*) FROM entities",
    "aliases": "SELECT count(*) FROM entity_aliases",
    "relations": "SELECT count(*) FROM relations",
    "current_relations": "SELECT count(*) FROM relations WHERE valid_to IS NULL",
    "provenance": "SELECT (SELECT count(*) FROM memory_entities) + "
    "(SELECT count(*) FROM memory_relations)",
    "extraction_pending": "SELECT count(*) FROM graph_queue",
    "extraction_failed": "SELECT count(*) FROM graph_queue WHERE attempts > 0",
}


def counts(conn: apsw.Connection) -> dict[str, int]:
    """The graph's row counts (zeros before schema 10)."""
    if not has_graph(conn):
        return dict.fromkeys(STAT_QUERIES, 0)
    return {name: int(query_value(conn, sql)) for name, sql in STAT_QUERIES.items()}


_ALL_MEMORIES = (
    "SELECT id FROM scratchpad UNION ALL SELECT id FROM episodic UNION ALL SELECT id FROM semantic"
)


def check(conn: apsw.Connection) -> list[str]:
    """The graph's invariants: endpoints and provenance point at rows that exist, no
    derived entity or relation is left unsupported, aliases and their index agree."""
    if not has_graph(conn):
        return []
    problems = [
        f"relation {r[0]} has a missing {r[1]} entity {r[2]}"
        for r in query_all(
            conn,
            "SELECT id, 'subject', subject_id FROM relations WHERE subject_id NOT IN "
            "(SELECT id FROM entities) UNION ALL SELECT id, 'object', object_id FROM relations "
            "WHERE object_id NOT IN (SELECT id FROM entities) LIMIT 50",
        )
    ]
    problems += [
        f"{r[0]} provenance points at missing memory {r[1]}"
        for r in query_all(
            conn,
            "SELECT 'entity', memory_id FROM memory_entities WHERE memory_id NOT IN "
            f"({_ALL_MEMORIES}) UNION ALL SELECT 'relation', memory_id FROM memory_relations "
            "WHERE memory_id NOT IN "
            f"({_ALL_MEMORIES}) LIMIT 50",
        )
    ]
    problems += [
        f"derived relation {r[0]} is supported by no memory"
        for r in query_all(
            conn,
            "SELECT id FROM relations AS r WHERE direct = 0 AND NOT EXISTS "
            "(SELECT 1 FROM memory_relations AS m WHERE m.relation_id = r.id) LIMIT 50",
        )
    ]
    problems += [
        f"derived entity {r[0]} is supported by no memory or relation"
        for r in query_all(
            conn,
            "SELECT id FROM entities AS e WHERE direct = 0 AND NOT EXISTS "
            "(SELECT 1 FROM memory_entities AS m WHERE m.entity_id = e.id) AND NOT EXISTS "
            "(SELECT 1 FROM relations AS r WHERE r.subject_id = e.id OR r.object_id = e.id) "
            "LIMIT 50",
        )
    ]
    problems += [
        f"entity {r[0]} has no alias"
        for r in query_all(
            conn,
            "SELECT id FROM entities AS e WHERE NOT EXISTS "
            "(SELECT 1 FROM entity_aliases AS a WHERE a.entity_id = e.id) LIMIT 50",
        )
    ]
    problems += [
        f"alias {r[0]!r} points at missing entity {r[1]}"
        for r in query_all(
            conn,
            "SELECT alias, entity_id FROM entity_aliases WHERE entity_id NOT IN "
            "(SELECT id FROM entities) LIMIT 50",
        )
    ]
    index_rows = int(query_value(conn, "SELECT count(*) FROM entity_fts"))
    alias_rows = int(query_value(conn, "SELECT count(*) FROM entity_aliases"))
    if index_rows != alias_rows:
        problems.append(f"entity name index has {index_rows} rows for {alias_rows} aliases")
    dirty = int(query_value(conn, "SELECT count(*) FROM graph_dirty"))
    if dirty:
        problems.append(f"{dirty} deleted memories still wait for graph collection")
    return problems


def collection_behind(conn: apsw.Connection) -> bool:
    """True if deleted memories wait for graph collection (committed without the store)."""
    return query_one(conn, "SELECT 1 FROM graph_dirty LIMIT 1") is not None

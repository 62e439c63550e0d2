"""SQL for the knowledge-graph family: entities, aliases, relations, provenance, the
extraction queue and garbage collection (schema version 10, :mod:`migrations.v010_knowledge_graph`).

SQLite's :class:`~persistence.stores.graph_engine.GraphSql` (the shared
:mod:`persistence.stores.graph` runs it), with what only a file needs: the garbage
collection before each commit (:func:`collect_garbage`) and the integrity checks. Functions
take an open connection and run inside the caller's transaction; lists are passed as one
JSON array parameter (``json_each``), never spliced into the text.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import apsw
import orjson

from persistence.graph_records import Entity, Relation
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
from persistence.sqlite.sql import meta_sql
from persistence.sqlite.sql.memory_sql import scoped_ids
from persistence.stores.scope import Scope


def has_graph(conn: apsw.Connection) -> bool:
    """True if the file has the graph tables (schema 10 on)."""
    return query_one(conn, "SELECT 1 FROM sqlite_schema WHERE name = 'graph_dirty'") is not None


def any_alias(conn: apsw.Connection) -> bool:
    """True: a file answers recall's lookups in-process, so asking first saves nothing."""
    return True


def _ids(values: Iterable[str]) -> str:
    return orjson.dumps(sorted(set(values))).decode()


# --- entities ------------------------------------------------------------------------

_ENTITY = "SELECT id, name, type, description, direct, created_at, updated_at FROM entities"


_ENTITY_NAMES = ("id", "name", "type", "description", "direct", "created_at", "updated_at")
_ENTITY_KINDS = (TEXT, TEXT, TEXT, NULL_TEXT, INT, INT, INT)


def entity(row: Sequence[Any], aliases: tuple[str, ...] = ()) -> Entity:
    """The entity a row holds (damage if a column's type is not its own)."""
    check_row("entities", _ENTITY_NAMES, _ENTITY_KINDS, row)
    return Entity(
        id=row[0], name=row[1], type=row[2], description=row[3], aliases=aliases,
        direct=bool(row[4]), created_at=row[5], updated_at=row[6],
    )  # fmt: skip


def alias_rows(conn: apsw.Connection, ids: Sequence[str]) -> list[tuple[str, str]]:
    """``(entity id, alias)`` of these entities, in a stable order."""
    rows = query_all(
        conn,
        "SELECT entity_id, alias FROM entity_aliases WHERE entity_id IN "
        "(SELECT value FROM json_each(?)) ORDER BY entity_id, rowid",
        (_ids(ids),),
    )
    texts("entity_aliases", "alias", (alias for _, alias in rows))
    return [(eid, alias) for eid, alias in rows]


_ENTITIES_WITH_ALIASES = (
    "SELECT e.id, e.name, e.type, e.description, e.direct, e.created_at, e.updated_at, a.alias "
    "FROM entities AS e LEFT JOIN entity_aliases AS a ON a.entity_id = e.id "
    "WHERE e.id IN (SELECT value FROM json_each(?)) ORDER BY e.id, a.rowid"
)


def entities_with_aliases(conn: apsw.Connection, ids: Sequence[str]) -> list[tuple[Any, ...]]:
    """Entity rows of these ids, one per alias (the alias last), each checked."""
    rows = query_all(conn, _ENTITIES_WITH_ALIASES, (_ids(ids),))
    for r in rows:
        check_row("entities", _ENTITY_NAMES, _ENTITY_KINDS, r)
    return rows


def entity_exists(conn: apsw.Connection, eid: str) -> bool:
    """True if an entity has this id."""
    return query_one(conn, "SELECT 1 FROM entities WHERE id = ?", (eid,)) is not None


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


def touch_entity(
    conn: apsw.Connection, eid: str, direct: bool, description: str | None, now: int
) -> None:
    """Mark the entity direct (if ``direct``), set a new description, move ``updated_at``."""
    conn.execute(
        "UPDATE entities SET direct = max(direct, ?), "
        "description = coalesce(?, description), updated_at = ? WHERE id = ?",
        (int(direct), description, now, eid),
    )


def insert_entity(
    conn: apsw.Connection, eid: str, name: str, type_: str, description: str | None,
    direct: bool, now: int,
) -> None:  # fmt: skip
    """A new entity row."""
    conn.execute(
        "INSERT INTO entities (id, name, type, description, direct, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (eid, name, type_, description, int(direct), now, now),
    )


def insert_alias(conn: apsw.Connection, norm: str, type_: str, alias: str, eid: str) -> None:
    """A name that resolves to ``eid`` (its trigger keeps ``entity_fts`` in step)."""
    conn.execute(
        "INSERT INTO entity_aliases (norm, type, alias, entity_id) VALUES (?, ?, ?, ?)",
        (norm, type_, alias, eid),
    )


def entity_rows(
    conn: apsw.Connection, type_: str | None, limit: int, after: str
) -> list[tuple[Any, ...]]:
    """Entity rows (of one type, or all) in id order after ``after``."""
    if type_ is None:
        return query_all(conn, f"{_ENTITY} WHERE id > ? ORDER BY id LIMIT ?", (after, limit))
    return query_all(
        conn, f"{_ENTITY} WHERE type = ? AND id > ? ORDER BY id LIMIT ?", (type_, after, limit)
    )


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


def relation(row: Sequence[Any]) -> Relation:
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
    return {r[0]: relation(r) for r in rows}


def relations_of(conn: apsw.Connection, eid: str) -> list[Relation]:
    """Every relation (also invalidated ones) with ``eid`` at one end."""
    rows = query_all(
        conn,
        f"{_RELATION} WHERE subject_id = ? UNION {_RELATION} WHERE object_id = ? ORDER BY 1",
        (eid, eid),
    )
    return [relation(r) for r in rows]


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
        relation(r) for r in relations
    ]


def current_relation(
    conn: apsw.Connection, subject: str, predicate: str, obj: str, other_than: str = ""
) -> str | None:
    """The id of the relation ``subject -predicate-> obj`` valid now (not
    ``other_than``), or ``None``."""
    row = query_one(
        conn,
        "SELECT id FROM relations WHERE subject_id = ? AND predicate = ? AND object_id = ? "
        "AND valid_to IS NULL AND id != ?",
        (subject, predicate, obj, other_than),
    )
    return None if row is None else str(row[0])


def strengthen_relation(
    conn: apsw.Connection, rid: str, confidence: float, direct: bool, valid_from: int | None
) -> None:
    """Asserted again: the larger confidence, ``direct`` sticks, the earlier start."""
    conn.execute(
        "UPDATE relations SET confidence = max(confidence, ?), direct = max(direct, ?), "
        "valid_from = CASE WHEN valid_from IS NULL OR ? IS NULL THEN NULL "
        "ELSE min(valid_from, ?) END WHERE id = ?",
        (confidence, int(direct), valid_from, valid_from, rid),
    )


def insert_relation(
    conn: apsw.Connection, rid: str, subject: str, predicate: str, obj: str, confidence: float,
    valid_from: int | None, valid_to: int | None, direct: bool, now: int,
) -> None:  # fmt: skip
    """A new relation row (weight 0 until provenance re-weighs it)."""
    conn.execute(
        "INSERT INTO relations (id, subject_id, predicate, object_id, confidence, weight, "
        "valid_from, valid_to, direct, created_at) VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?)",
        (rid, subject, predicate, obj, confidence, valid_from, valid_to, int(direct), now),
    )


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


def delete_entity(conn: apsw.Connection, eid: str) -> bool:
    """Delete an entity row (its aliases and provenance go with it); False if missing."""
    return query_one(conn, "DELETE FROM entities WHERE id = ? RETURNING id", (eid,)) is not None


def delete_relations(conn: apsw.Connection, ids: Sequence[str]) -> None:
    """Delete these relations (their provenance goes with them)."""
    conn.execute("DELETE FROM relations WHERE id IN (SELECT value FROM json_each(?))", (_ids(ids),))


def remove_relation(conn: apsw.Connection, rid: str) -> tuple[str, str] | None:
    """Delete a relation (and its provenance); its endpoints, or ``None`` if missing."""
    row = query_one(
        conn, "DELETE FROM relations WHERE id = ? RETURNING subject_id, object_id", (rid,)
    )
    return None if row is None else (str(row[0]), str(row[1]))


def merge_entity(conn: apsw.Connection, keep: str, drop: str, now: int) -> None:
    """``drop``'s aliases and provenance move to ``keep``, which takes its directness and
    (if it has none) its description."""
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


def move_relation(conn: apsw.Connection, rid: str, subject: str, obj: str) -> None:
    """Give a relation new endpoints."""
    conn.execute(
        "UPDATE relations SET subject_id = ?, object_id = ? WHERE id = ?", (subject, obj, rid)
    )


def join_relation(conn: apsw.Connection, into: str, rel: Relation) -> None:
    """``rel`` joins relation ``into``: provenance, confidence and directness move over."""
    conn.execute(
        "INSERT OR IGNORE INTO memory_relations (memory_id, relation_id, origin) "
        "SELECT memory_id, ?, origin FROM memory_relations WHERE relation_id = ?",
        (into, rel.id),
    )
    conn.execute(
        "UPDATE relations SET confidence = max(confidence, ?), direct = max(direct, ?) "
        "WHERE id = ?",
        (rel.confidence, int(rel.direct), into),
    )
    conn.execute("DELETE FROM relations WHERE id = ?", (rel.id,))


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


def hops(
    conn: apsw.Connection, nodes: Sequence[str], at: int, fanout: int,
    predicates: Sequence[str] | None,
) -> Iterator[list[tuple[Any, ...]]]:  # fmt: skip
    """For each of ``nodes`` in turn, the relation rows it follows (:func:`hop_sql`):
    one query per entity, run only when the walk asks for the entity's rows."""
    sql = hop_sql(predicates is not None)
    params: dict[str, Any] = {"at": at, "fanout": fanout}
    if predicates is not None:
        params["predicates"] = orjson.dumps(list(predicates)).decode()
    for node in nodes:
        params["node"] = node
        rows: list[tuple[Any, ...]] = list(conn.execute(sql, params))
        for row in rows:
            _checked_relation(row)
        yield rows


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


# --- an agent's part of the graph (a scoped handle: each statement carries the scope) ----


def _scoped_rows(scope: Scope) -> tuple[str, str, tuple[str, ...]]:
    """Subqueries of the relation ids and the entity ids the scope's memories assert
    (relations with their provenance; entities they name or those relations join), and
    the parameters of each."""
    mine, agent = scoped_ids(scope)
    relations = f"SELECT relation_id FROM memory_relations WHERE memory_id IN ({mine})"
    entities = (
        f"SELECT entity_id FROM memory_entities WHERE memory_id IN ({mine}) "
        f"UNION SELECT subject_id FROM relations WHERE id IN ({relations}) "
        f"UNION SELECT object_id FROM relations WHERE id IN ({relations})"
    )
    return relations, entities, agent


def scope_view(conn: apsw.Connection, scope: Scope) -> tuple[set[str], set[str]]:
    """``(entity ids, relation ids)`` the scope's memories assert."""
    relations, entities, agent = _scoped_rows(scope)
    return (
        {r[0] for r in query_all(conn, entities, agent * 3)},
        {r[0] for r in query_all(conn, relations, agent)},
    )


def owned_memories(conn: apsw.Connection, scope: Scope, ids: Sequence[str]) -> list[str]:
    """Those of ``ids`` that are the scope's live memories, in the order given."""
    mine, agent = scoped_ids(scope)
    found = query_all(
        conn, f"SELECT value FROM json_each(?) WHERE value IN ({mine})", (_ids(ids), *agent)
    )
    owned = {r[0] for r in found}
    return [i for i in ids if i in owned]


def scoped_counts(conn: apsw.Connection, scope: Scope) -> dict[str, int]:
    """:func:`counts` of the scope's part of the graph (failed extractions: the file's)."""
    if not has_graph(conn):
        return dict.fromkeys(STAT_QUERIES, 0)
    mine, agent = scoped_ids(scope)
    relations, entities, _ = _scoped_rows(scope)
    queries = {
        "entities": (f"SELECT count(*) FROM entities WHERE id IN ({entities})", 3),
        "aliases": (f"SELECT count(*) FROM entity_aliases WHERE entity_id IN ({entities})", 3),
        "relations": (f"SELECT count(DISTINCT relation_id) FROM ({relations})", 1),
        "current_relations": (
            f"SELECT count(*) FROM relations WHERE valid_to IS NULL AND id IN ({relations})", 1
        ),
        "provenance": (
            f"SELECT (SELECT count(*) FROM memory_entities WHERE memory_id IN ({mine})) + "
            f"(SELECT count(*) FROM memory_relations WHERE memory_id IN ({mine}))", 2,
        ),
        "extraction_pending": (
            f"SELECT count(*) FROM graph_queue WHERE memory_id IN ({mine})", 1
        ),
    }  # fmt: skip
    found = {
        name: int(query_value(conn, sql, agent * times)) for name, (sql, times) in queries.items()
    }
    found["extraction_failed"] = int(query_value(conn, STAT_QUERIES["extraction_failed"]))
    return found


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


# --- facts kept with the data (``store_meta``): the shared store reads them here ----------

read_meta = meta_sql.read
write_meta = meta_sql.write
add_to_counter = meta_sql.add

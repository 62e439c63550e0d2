"""SQL for the knowledge-graph family: entities, aliases, relations, provenance, the
extraction queue and garbage collection (schema version 10, :mod:`migrations.v010_knowledge_graph`).

SQLite's :class:`~persistence.stores.graph_engine.GraphSql` (the shared
:mod:`persistence.stores.graph` runs it), with what only a file needs: the statements of
the collection before each commit and of the integrity checks (run by
:mod:`persistence.sqlite.graph_steps`). Functions build statements and decode rows; none
runs one. Lists are passed as one JSON array parameter (``json_each``), never spliced
into the text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import orjson

from persistence.graph_records import Entity, Relation
from persistence.sqlite.row_checks import (
    INT,
    NULL_INT,
    NULL_TEXT,
    REAL,
    TEXT,
    check_row,
    damaged_row,
)
from persistence.sqlite.row_checks import texts as texts
from persistence.sqlite.sql import meta_sql
from persistence.sqlite.sql.memory_sql import scoped_ids
from persistence.statements import Statement
from persistence.stores.scope import Scope

Row = tuple[Any, ...]

HAS_GRAPH = Statement("SELECT 1 FROM sqlite_schema WHERE name = 'graph_dirty'")


def has_graph() -> Statement:
    """A row if the file has the graph tables (schema 10 on)."""
    return HAS_GRAPH


def any_alias() -> None:
    """None: a file answers recall's lookups in-process, so asking first saves nothing."""
    return None


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


def alias_rows(ids: Sequence[str]) -> Statement:
    """``(entity id, alias)`` of these entities, in a stable order."""
    return Statement(
        "SELECT entity_id, alias FROM entity_aliases WHERE entity_id IN "
        "(SELECT value FROM json_each(?)) ORDER BY entity_id, rowid",
        (_ids(ids),),
    )


_ENTITIES_WITH_ALIASES = (
    "SELECT e.id, e.name, e.type, e.description, e.direct, e.created_at, e.updated_at, a.alias "
    "FROM entities AS e LEFT JOIN entity_aliases AS a ON a.entity_id = e.id "
    "WHERE e.id IN (SELECT value FROM json_each(?)) ORDER BY e.id, a.rowid"
)


def entities_with_aliases(ids: Sequence[str]) -> Statement:
    """Entity rows of these ids, one per alias (the alias last; :func:`entity` checks
    each)."""
    return Statement(_ENTITIES_WITH_ALIASES, (_ids(ids),))


def entity_exists(eid: str, *, own: bool = False) -> Statement:
    """A row if an entity has this id (``own`` changes nothing: a file has one graph)."""
    return Statement("SELECT 1 FROM entities WHERE id = ?", (eid,))


def resolve(norm: str, type_: str | None, *, own: bool = False) -> Statement:
    """The entity a normalised name (of a type, or of any) resolves to (``own`` changes
    nothing: a file has one graph).

    Of several entities of different types sharing the name, the best supported (then
    the directly added, then the smallest id) wins.
    """
    if type_ is not None:
        return Statement(
            "SELECT entity_id FROM entity_aliases WHERE norm = ? AND type = ?", (norm, type_)
        )
    return Statement(
        "SELECT a.entity_id FROM entity_aliases AS a JOIN entities AS e ON e.id = a.entity_id "
        "WHERE a.norm = ? ORDER BY (SELECT count(*) FROM memory_entities AS m "
        "WHERE m.entity_id = a.entity_id) DESC, e.direct DESC, a.entity_id LIMIT 1",
        (norm,),
    )


def touch_entity(eid: str, direct: bool, description: str | None, now: int) -> Statement:
    """Mark the entity direct (if ``direct``), set a new description, move ``updated_at``."""
    return Statement(
        "UPDATE entities SET direct = max(direct, ?), "
        "description = coalesce(?, description), updated_at = ? WHERE id = ?",
        (int(direct), description, now, eid),
    )


def insert_entity(
    eid: str, name: str, type_: str, description: str | None, direct: bool, now: int
) -> Statement:
    """A new entity row (``direct`` kept as 0 or 1)."""
    return Statement(
        "INSERT INTO entities (id, name, type, description, direct, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (eid, name, type_, description, int(direct), now, now),
    )


def insert_alias(norm: str, type_: str, alias: str, eid: str) -> Statement:
    """A name that resolves to ``eid`` (its trigger keeps ``entity_fts`` in step)."""
    return Statement(
        "INSERT INTO entity_aliases (norm, type, alias, entity_id) VALUES (?, ?, ?, ?)",
        (norm, type_, alias, eid),
    )


def entity_rows(type_: str | None, limit: int, after: str) -> Statement:
    """Entity rows (of one type, or all) in id order after ``after``."""
    if type_ is None:
        return Statement(f"{_ENTITY} WHERE id > ? ORDER BY id LIMIT ?", (after, limit))
    return Statement(
        f"{_ENTITY} WHERE type = ? AND id > ? ORDER BY id LIMIT ?", (type_, after, limit)
    )


def memory_ids_about(eid: str, limit: int) -> Statement:
    """Memories that name the entity (by id)."""
    return Statement(
        "SELECT DISTINCT memory_id FROM memory_entities WHERE entity_id = ? "
        "ORDER BY memory_id LIMIT ?",
        (eid, limit),
    )


def capped_memory_count(eid: str, cap: int) -> Statement:
    """How many memories name the entity, counting no further than ``cap``."""
    return Statement(
        "SELECT count(*) FROM (SELECT 1 FROM memory_entities WHERE entity_id = ? LIMIT ?)",
        (eid, cap),
    )


_NAMING_EACH = (
    "WITH counted AS MATERIALIZED (SELECT DISTINCT j.value AS entity_id, (SELECT count(*) "
    "FROM (SELECT 1 FROM memory_entities WHERE entity_id = j.value LIMIT ?2)) AS n "
    "FROM json_each(?1) AS j) "
    "SELECT DISTINCT c.entity_id, c.n, m.memory_id FROM counted AS c JOIN memory_entities AS m "
    "ON m.entity_id = c.entity_id WHERE c.n < ?2 ORDER BY c.entity_id, m.memory_id"
)


def memories_naming_each(eids: Sequence[str], most: int) -> Statement:
    """``(entity id, how many rows name it, memory id)`` of the memories naming each of
    ``eids`` that at most ``most`` rows name (counted as :func:`capped_memory_count`
    counts, no further than ``most + 1``), in memory id order per entity: the rows of an
    entity with more are never read."""
    return Statement(_NAMING_EACH, (_ids(eids), most + 1))


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


def fetch_relations(ids: Sequence[str]) -> Statement:
    """The relations with these ids (missing ones left out)."""
    return Statement(f"{_RELATION} WHERE id IN (SELECT value FROM json_each(?))", (_ids(ids),))


def relations_of(eid: str) -> Statement:
    """Every relation (also invalidated ones) with ``eid`` at one end."""
    return Statement(
        f"{_RELATION} WHERE subject_id = ? UNION {_RELATION} WHERE object_id = ? ORDER BY 1",
        (eid, eid),
    )


def asserting_memories(relation_ids: Sequence[str]) -> Statement:
    """``(relation id, memory id)`` of the memories that assert each relation."""
    return Statement(
        "SELECT DISTINCT relation_id, memory_id FROM memory_relations "
        "WHERE relation_id IN (SELECT value FROM json_each(?)) ORDER BY 1, 2",
        (_ids(relation_ids),),
    )


def asserted(rows: Sequence[Row]) -> dict[str, list[str]]:
    """Rows of :func:`asserting_memories` as relation id -> memory ids (damage if an id
    is not a text)."""
    found: dict[str, list[str]] = {}
    for rid, mid in rows:
        if type(rid) is not str or type(mid) is not str:
            raise damaged_row("memory_relations", ("relation_id", "memory_id"), (TEXT, TEXT),
                              (rid, mid))  # fmt: skip
        found.setdefault(rid, []).append(mid)
    return found


def facts_of(memory_id: str) -> tuple[Statement, Statement]:
    """The entity ids, then the relation rows (by id), that one memory asserts."""
    return (
        Statement(
            "SELECT DISTINCT entity_id FROM memory_entities WHERE memory_id = ? ORDER BY 1",
            (memory_id,),
        ),
        Statement(
            f"{_RELATION} WHERE id IN (SELECT relation_id FROM memory_relations "
            "WHERE memory_id = ?) ORDER BY 1",
            (memory_id,),
        ),
    )


def current_relation(subject: str, predicate: str, obj: str, other_than: str = "") -> Statement:
    """The id of the relation ``subject -predicate-> obj`` valid now (not
    ``other_than``)."""
    return Statement(
        "SELECT id FROM relations WHERE subject_id = ? AND predicate = ? AND object_id = ? "
        "AND valid_to IS NULL AND id != ?",
        (subject, predicate, obj, other_than),
    )


def strengthen_relation(
    rid: str, confidence: float, direct: bool, valid_from: int | None
) -> Statement:
    """Asserted again (``max``/``min`` of the row's and the new): the larger confidence,
    ``direct`` (0 or 1) sticks, the earlier start."""
    return Statement(
        "UPDATE relations SET confidence = max(confidence, ?), direct = max(direct, ?), "
        "valid_from = CASE WHEN valid_from IS NULL OR ? IS NULL THEN NULL "
        "ELSE min(valid_from, ?) END WHERE id = ?",
        (confidence, int(direct), valid_from, valid_from, rid),
    )


def insert_relation(
    rid: str,
    subject: str,
    predicate: str,
    obj: str,
    confidence: float,
    valid_from: int | None,
    valid_to: int | None,
    direct: bool,
    now: int,
) -> Statement:
    """A new relation row (weight 0 until provenance re-weighs it)."""
    return Statement(
        "INSERT INTO relations (id, subject_id, predicate, object_id, confidence, weight, "
        "valid_from, valid_to, direct, created_at) VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?)",
        (rid, subject, predicate, obj, confidence, valid_from, valid_to, int(direct), now),
    )


def invalidate(rid: str, at: int) -> Statement:
    """Set ``valid_to``; a row comes back if the relation is there."""
    return Statement("UPDATE relations SET valid_to = ? WHERE id = ? RETURNING id", (at, rid))


def current_relations(subject: str, predicate: str, at: int | None = None) -> Statement:
    """The relation rows ``subject -predicate-> *`` valid now (``at``: valid then), by id."""
    if at is None:
        return Statement(
            f"{_RELATION} WHERE subject_id = ? AND predicate = ? AND valid_to IS NULL ORDER BY 1",
            (subject, predicate),
        )
    return Statement(
        f"{_RELATION} WHERE subject_id = ? AND predicate = ? "
        "AND (valid_from IS NULL OR valid_from <= ?) AND (valid_to IS NULL OR valid_to > ?) "
        "ORDER BY 1",
        (subject, predicate, at, at),
    )


def set_validity(rid: str, valid_from: int | None, valid_to: int | None) -> Statement:
    """Set both bounds of when a relation holds."""
    return Statement(
        "UPDATE relations SET valid_from = ?, valid_to = ? WHERE id = ?",
        (valid_from, valid_to, rid),
    )


# --- provenance ----------------------------------------------------------------------


def move_provenance(drop: str, keep: str) -> list[Statement]:
    """Every entity and relation memory ``drop`` supports, memory ``keep`` supports too."""
    return [
        Statement(
            f"INSERT OR IGNORE INTO {table} (memory_id, {column}, origin) "
            f"SELECT ?, {column}, origin FROM {table} WHERE memory_id = ?",
            (keep, drop),
        )
        for table, column in (("memory_entities", "entity_id"), ("memory_relations", "relation_id"))
    ]


def add_entity_provenance(memory_id: str, entity_ids: Sequence[str], origin: str) -> Statement:
    """``memory_id`` asserted these entities (``INSERT OR IGNORE``: rows there stay)."""
    return Statement(
        "INSERT OR IGNORE INTO memory_entities (memory_id, entity_id, origin) "
        "SELECT ?, value, ? FROM json_each(?)",
        (memory_id, origin, _ids(entity_ids)),
    )


def add_relation_provenance(memory_id: str, relation_ids: Sequence[str], origin: str) -> Statement:
    """``memory_id`` asserted these relations (``INSERT OR IGNORE``: rows there stay)."""
    return Statement(
        "INSERT OR IGNORE INTO memory_relations (memory_id, relation_id, origin) "
        "SELECT ?, value, ? FROM json_each(?)",
        (memory_id, origin, _ids(relation_ids)),
    )


def reweigh(relation_ids: Sequence[str]) -> Statement:
    """``weight`` = how many memories support each relation."""
    return Statement(
        "UPDATE relations SET weight = (SELECT count(DISTINCT memory_id) FROM memory_relations "
        "AS m WHERE m.relation_id = relations.id) WHERE id IN (SELECT value FROM json_each(?))",
        (_ids(relation_ids),),
    )


def drop_provenance(
    memory_ids: Sequence[str], origin: str | None = None
) -> tuple[Statement, Statement]:
    """Remove these memories' provenance (of one origin, or all), returning the entity
    ids, then the relation ids, it named."""
    ids = _ids(memory_ids)
    where = "memory_id IN (SELECT value FROM json_each(?))" + (
        "" if origin is None else " AND origin = ?"
    )
    params: tuple[Any, ...] = (ids,) if origin is None else (ids, origin)
    return (
        Statement(f"DELETE FROM memory_entities WHERE {where} RETURNING entity_id", params),
        Statement(f"DELETE FROM memory_relations WHERE {where} RETURNING relation_id", params),
    )


# --- collecting what nothing supports (run by persistence.sqlite.graph_steps) ----------


def collect_relations(relation_ids: Sequence[str]) -> Statement:
    """Delete the derived relations among these that no memory supports, returning
    their endpoints."""
    return Statement(
        "DELETE FROM relations WHERE id IN (SELECT value FROM json_each(?)) AND direct = 0 "
        "AND NOT EXISTS (SELECT 1 FROM memory_relations AS m "
        "WHERE m.relation_id = relations.id) RETURNING subject_id, object_id",
        (_ids(relation_ids),),
    )


def collect_entities(entity_ids: Iterable[str]) -> Statement:
    """Delete the derived entities among these that no memory and no relation uses."""
    return Statement(
        "DELETE FROM entities WHERE id IN (SELECT value FROM json_each(?)) AND direct = 0 "
        "AND NOT EXISTS (SELECT 1 FROM memory_entities AS m WHERE m.entity_id = entities.id) "
        "AND NOT EXISTS (SELECT 1 FROM relations AS r WHERE r.subject_id = entities.id) "
        "AND NOT EXISTS (SELECT 1 FROM relations AS r WHERE r.object_id = entities.id)",
        (_ids(entity_ids),),
    )


COLLECTION_BEHIND = Statement("SELECT 1 FROM graph_dirty LIMIT 1")
"""A row if deleted memories wait for graph collection."""
KEEP_RESTORED = Statement(
    "DELETE FROM graph_dirty WHERE "
    "EXISTS (SELECT 1 FROM scratchpad WHERE id = graph_dirty.memory_id) OR "
    "EXISTS (SELECT 1 FROM episodic WHERE id = graph_dirty.memory_id) OR "
    "EXISTS (SELECT 1 FROM semantic WHERE id = graph_dirty.memory_id)"
)
"""Memories marked deleted that are there again (restored in the same transaction)."""
TAKE_DIRTY = Statement("DELETE FROM graph_dirty RETURNING memory_id")
"""The memories deleted since the last collection, their marks removed."""
HAS_VERSIONS = Statement("SELECT 1 FROM sqlite_schema WHERE name = 'memory_versions'")


def collection_behind() -> Statement:
    """A row if deleted memories wait for graph collection (committed without the store)."""
    return COLLECTION_BEHIND


def forget_rows(gone: Sequence[str], versions: bool) -> list[Statement]:
    """Delete the queue, duplicate-key (and, with ``versions``, version) rows of deleted
    memories."""
    tables = ("graph_queue", "content_keys") + (("memory_versions",) if versions else ())
    return [
        Statement(
            f"DELETE FROM {table} WHERE memory_id IN (SELECT value FROM json_each(?))",
            (_ids(gone),),
        )
        for table in tables
    ]


# --- removing and merging ------------------------------------------------------------


def delete_entity(eid: str) -> Statement:
    """Delete an entity row (its aliases and provenance go with it), returning a row if
    it was there."""
    return Statement("DELETE FROM entities WHERE id = ? RETURNING id", (eid,))


def delete_relations(ids: Sequence[str]) -> Statement:
    """Delete these relations (their provenance goes with them)."""
    return Statement(
        "DELETE FROM relations WHERE id IN (SELECT value FROM json_each(?))", (_ids(ids),)
    )


def remove_relation(rid: str) -> Statement:
    """Delete a relation (and its provenance), returning its endpoints if it was there."""
    return Statement("DELETE FROM relations WHERE id = ? RETURNING subject_id, object_id", (rid,))


def move_aliases(keep: str, drop: str) -> Statement:
    return Statement("UPDATE entity_aliases SET entity_id = ? WHERE entity_id = ?", (keep, drop))


def merge_entity_provenance(keep: str, drop: str) -> Statement:
    return Statement(
        "INSERT OR IGNORE INTO memory_entities (memory_id, entity_id, origin) "
        "SELECT memory_id, ?, origin FROM memory_entities WHERE entity_id = ?",
        (keep, drop),
    )


def merge_entity(keep: str, drop: str, now: int) -> Statement:
    """``keep`` takes ``drop``'s directness and (having none) description (``max``)."""
    return Statement(
        "UPDATE entities SET direct = max(direct, (SELECT direct FROM entities WHERE id = ?)), "
        "description = coalesce(description, "
        "(SELECT description FROM entities WHERE id = ?)), updated_at = ? WHERE id = ?",
        (drop, drop, now, keep),
    )


def move_relation(rid: str, subject: str, obj: str) -> Statement:
    """Give a relation new endpoints."""
    return Statement(
        "UPDATE relations SET subject_id = ?, object_id = ? WHERE id = ?", (subject, obj, rid)
    )


def merge_relation_provenance(into: str, rid: str) -> Statement:
    return Statement(
        "INSERT OR IGNORE INTO memory_relations (memory_id, relation_id, origin) "
        "SELECT memory_id, ?, origin FROM memory_relations WHERE relation_id = ?",
        (into, rid),
    )


def join_relation(into: str, confidence: float, direct: bool) -> Statement:
    """``into`` takes the larger confidence; ``direct`` sticks (``max``)."""
    return Statement(
        "UPDATE relations SET confidence = max(confidence, ?), direct = max(direct, ?) "
        "WHERE id = ?",
        (confidence, int(direct), into),
    )


# --- traversal -------------------------------------------------------------------------

_VALID = "(r.valid_from IS NULL OR r.valid_from <= ?2) AND (r.valid_to IS NULL OR r.valid_to > ?2)"
_HOP_COLUMNS = (
    "r.id, r.subject_id, r.predicate, r.object_id, r.confidence, r.weight, r.valid_from, "
    "r.valid_to, r.direct, r.created_at"
)


def hop_sql(predicates: bool) -> str:
    """The relations one entity (``?1``) follows: its ``?3`` (fanout) best supported
    ones valid at ``?2`` (weight, then confidence, then id; of the JSON array ``?4`` of
    predicates) with it as subject, then as object.
    Each arm reads ``idx_relations_subject`` / ``idx_relations_object`` in that order and
    stops after ``fanout`` rows, so a hub costs no more than a leaf; from schema 11 the
    indexes cover the row (:mod:`migrations.v011_relation_walk_index`), so no table page
    is read."""
    only = " AND r.predicate IN (SELECT value FROM json_each(?4))" if predicates else ""
    arm = (
        f"SELECT * FROM (SELECT {_HOP_COLUMNS} FROM relations AS r WHERE r.{{end}} = ?1 "
        f"AND {_VALID}{only} ORDER BY r.weight DESC, r.confidence DESC, r.id LIMIT ?3)"
    )
    return arm.format(end="subject_id") + " UNION ALL " + arm.format(end="object_id")


def hops(
    nodes: Sequence[str], at: int, fanout: int, predicates: Sequence[str] | None
) -> list[Statement]:
    """One statement per node (:func:`hop_sql`), so the walk asks only for the entities
    it expands."""
    sql = hop_sql(predicates is not None)
    only = () if predicates is None else (orjson.dumps(list(predicates)).decode(),)
    return [Statement(sql, (node, at, fanout, *only)) for node in nodes]


def hop_rows(nodes: Sequence[str], results: Iterable[list[Row]]) -> Iterator[list[Row]]:
    """Each node's rows (one statement each), checked, as the caller reads them."""
    for rows in results:
        for row in rows:
            _checked_relation(row)
        yield rows


# --- recall: entities named in a text --------------------------------------------------


def entities_named_in(words: Sequence[str], limit: int) -> Statement:
    """``(entity id, alias)`` of aliases that contain any of ``words`` (FTS5 index);
    the caller checks that the whole alias occurs in the text."""
    match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
    return Statement(
        "SELECT entity_id, alias FROM entity_fts WHERE entity_fts MATCH ? LIMIT ?",
        (f"alias : ({match})", limit),
    )


# --- the extraction queue --------------------------------------------------------------


def pending(now: int, limit: int) -> Statement:
    """``(memory id, content, attempts)`` of memories waiting for extraction now."""
    return Statement(
        "SELECT q.memory_id, coalesce(s.content, e.content, p.content), q.attempts "
        "FROM graph_queue AS q LEFT JOIN semantic AS s ON s.id = q.memory_id "
        "LEFT JOIN episodic AS e ON e.id = q.memory_id "
        "LEFT JOIN scratchpad AS p ON p.id = q.memory_id "
        "WHERE q.not_before <= ? ORDER BY q.not_before, q.memory_id LIMIT ?",
        (now, limit),
    )


def queued(rows: Sequence[Row]) -> list[tuple[str, str, int]]:
    """Rows of :func:`pending`, checked."""
    names, kinds = ("memory_id", "content", "attempts"), (TEXT, NULL_TEXT, INT)
    for r in rows:
        check_row("graph_queue", names, kinds, r)
    return [(r[0], r[1], r[2]) for r in rows]


def dequeue(memory_id: str) -> Statement:
    """The memory's extraction is done."""
    return Statement("DELETE FROM graph_queue WHERE memory_id = ?", (memory_id,))


def enqueue(memory_ids: Sequence[str]) -> list[Statement]:
    """Queue memories for (re-)extraction."""
    if not memory_ids:
        return []
    return [
        Statement(
            "INSERT OR REPLACE INTO graph_queue (memory_id) SELECT value FROM json_each(?)",
            (_ids(memory_ids),),
        )
    ]


def postpone(memory_id: str, until: int, error: str) -> Statement:
    """An extraction failed: retry at ``until``."""
    return Statement(
        "UPDATE graph_queue SET attempts = attempts + 1, not_before = ?, error = ? "
        "WHERE memory_id = ?",
        (until, error[:1000], memory_id),
    )


def content_of(memory_id: str) -> Statement:
    """A memory's content in any tier."""
    return Statement(
        "SELECT content FROM semantic WHERE id = ?1 UNION ALL SELECT content FROM episodic "
        "WHERE id = ?1 UNION ALL SELECT content FROM scratchpad WHERE id = ?1",
        (memory_id,),
    )


# --- statistics ------------------------------------------------------------------------

_COUNTS = (
    "SELECT count(*) FROM entities",
    "SELECT count(*) FROM entity_aliases",
    "SELECT count(*) FROM relations",
    "SELECT count(*) FROM relations WHERE valid_to IS NULL",
    "SELECT (SELECT count(*) FROM memory_entities) + (SELECT count(*) FROM memory_relations)",
    "SELECT count(*) FROM graph_queue",
    "SELECT count(*) FROM graph_queue WHERE attempts > 0",
)
"""One statement per count, in :data:`~persistence.stores.graph_engine.COUNT_NAMES`' order."""


def counts() -> list[Statement]:
    """The graph's row counts, one statement each."""
    return [Statement(sql) for sql in _COUNTS]


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


def scope_view(scope: Scope) -> tuple[Statement, Statement]:
    """The entity ids, then the relation ids, the scope's memories assert."""
    relations, entities, agent = _scoped_rows(scope)
    return Statement(entities, agent * 3), Statement(relations, agent)


def owned_memories(scope: Scope, ids: Sequence[str]) -> Statement:
    """Those of ``ids`` that are the scope's live memories."""
    mine, agent = scoped_ids(scope)
    return Statement(f"SELECT value FROM json_each(?) WHERE value IN ({mine})", (_ids(ids), *agent))


def scoped_counts(scope: Scope) -> list[Statement]:
    """:func:`counts` of the scope's part of the graph (failed extractions: the file's)."""
    mine, agent = scoped_ids(scope)
    relations, entities, _ = _scoped_rows(scope)
    return [
        Statement(f"SELECT count(*) FROM entities WHERE id IN ({entities})", agent * 3),
        Statement(
            f"SELECT count(*) FROM entity_aliases WHERE entity_id IN ({entities})", agent * 3
        ),
        Statement(f"SELECT count(DISTINCT relation_id) FROM ({relations})", agent),
        Statement(
            f"SELECT count(*) FROM relations WHERE valid_to IS NULL AND id IN ({relations})", agent
        ),
        Statement(
            f"SELECT (SELECT count(*) FROM memory_entities WHERE memory_id IN ({mine})) + "
            f"(SELECT count(*) FROM memory_relations WHERE memory_id IN ({mine}))", agent * 2,
        ),
        Statement(f"SELECT count(*) FROM graph_queue WHERE memory_id IN ({mine})", agent),
        Statement(_COUNTS[-1]),
    ]  # fmt: skip


# --- the integrity checks (run by persistence.sqlite.graph_steps.check) -----------------

_ALL_MEMORIES = (
    "SELECT id FROM scratchpad UNION ALL SELECT id FROM episodic UNION ALL SELECT id FROM semantic"
)

CHECKS: tuple[tuple[Statement, Callable[[Row], str]], ...] = (
    (
        Statement(
            "SELECT id, 'subject', subject_id FROM relations WHERE subject_id NOT IN "
            "(SELECT id FROM entities) UNION ALL SELECT id, 'object', object_id FROM relations "
            "WHERE object_id NOT IN (SELECT id FROM entities) LIMIT 50"
        ),
        lambda r: f"relation {r[0]} has a missing {r[1]} entity {r[2]}",
    ),
    (
        Statement(
            "SELECT 'entity', memory_id FROM memory_entities WHERE memory_id NOT IN "
            f"({_ALL_MEMORIES}) UNION ALL SELECT 'relation', memory_id FROM memory_relations "
            f"WHERE memory_id NOT IN ({_ALL_MEMORIES}) LIMIT 50"
        ),
        lambda r: f"{r[0]} provenance points at missing memory {r[1]}",
    ),
    (
        Statement(
            "SELECT id FROM relations AS r WHERE direct = 0 AND NOT EXISTS "
            "(SELECT 1 FROM memory_relations AS m WHERE m.relation_id = r.id) LIMIT 50"
        ),
        lambda r: f"derived relation {r[0]} is supported by no memory",
    ),
    (
        Statement(
            "SELECT id FROM entities AS e WHERE direct = 0 AND NOT EXISTS "
            "(SELECT 1 FROM memory_entities AS m WHERE m.entity_id = e.id) AND NOT EXISTS "
            "(SELECT 1 FROM relations AS r WHERE r.subject_id = e.id OR r.object_id = e.id) "
            "LIMIT 50"
        ),
        lambda r: f"derived entity {r[0]} is supported by no memory or relation",
    ),
    (
        Statement(
            "SELECT id FROM entities AS e WHERE NOT EXISTS "
            "(SELECT 1 FROM entity_aliases AS a WHERE a.entity_id = e.id) LIMIT 50"
        ),
        lambda r: f"entity {r[0]} has no alias",
    ),
    (
        Statement(
            "SELECT alias, entity_id FROM entity_aliases WHERE entity_id NOT IN "
            "(SELECT id FROM entities) LIMIT 50"
        ),
        lambda r: f"alias {r[0]!r} points at missing entity {r[1]}",
    ),
)
"""Each invariant's statement (of the rows that break it) and its problem's words."""
INDEX_ROWS = Statement("SELECT count(*) FROM entity_fts")
ALIAS_ROWS = Statement("SELECT count(*) FROM entity_aliases")
DIRTY_ROWS = Statement("SELECT count(*) FROM graph_dirty")


# --- facts kept with the data (``store_meta``): the shared store reads them here ----------

read_meta = meta_sql.read
write_meta = meta_sql.write
add_to_counter = meta_sql.add

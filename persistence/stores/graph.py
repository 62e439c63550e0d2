"""GraphStore: the knowledge graph's records (:class:`~persistence.storage.GraphStorage`),
written once over the engine interface (:class:`~persistence.engine.Engine`) and an
engine's graph SQL (:class:`~persistence.stores.graph_engine.GraphSql`).

It shares the engine's database with the memory store, so a graph write and a memory
write in one :meth:`~persistence.engine.Engine.transaction` commit together. Writes run
in ``db.transaction()``; reads of several statements that must agree in
``db.snapshot()``; reads of one statement in ``db.reading()``. Arguments arrive checked
(see :mod:`tiered_memory.graph`); ids and names are resolved here. Deleting memories
needs nothing from it: each engine collects their provenance at commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from persistence import graph_records
from persistence.engine import Connection, Engine
from persistence.errors import MemoryNotFoundError
from persistence.graph_errors import EntityNotFoundError, RelationNotFoundError
from persistence.graph_records import (
    Entity,
    EntityFact,
    GraphPath,
    GraphStatistics,
    Neighbor,
    Reach,
    Relation,
    RelationFact,
)
from persistence.meta_keys import DEDUPLICATED_KEY, NEAR_DUPLICATES_KEY
from persistence.stores import graph_rows as rows
from persistence.stores.graph_engine import GraphSql
from persistence.stores.graph_walk import walk

EXTRACTION_ERRORS_KEY = "graph_extraction_errors"
LAST_EXTRACTION_ERROR_KEY = "graph_last_extraction_error"
PATH_FANOUT = 200
WALK_CAP = 100_000

Extraction = tuple[str, str | None, Sequence[EntityFact], Sequence[RelationFact]]


class EmptyCache(Protocol):
    """Remembers that a read came back empty while nothing changed (PostgreSQL's
    :class:`~persistence.postgres.empty_cache.EmptyAtVersion`), so recall's "any alias?"
    costs no round trip on a store without a graph."""

    def known_empty(self) -> bool: ...

    def version(self) -> int | None: ...

    def found(self, empty: bool, version: int | None) -> None: ...


class NothingCached:
    """An :class:`EmptyCache` that never knows (an engine whose reads cost nothing)."""

    def known_empty(self) -> bool:
        return False

    def version(self) -> int | None:
        return None

    def found(self, empty: bool, version: int | None) -> None:
        """Nothing to keep."""


class GraphStore:
    """Entities, relations and provenance in ``db``, through the engine's ``sql``."""

    def __init__(self, db: Engine, sql: GraphSql, no_aliases: EmptyCache | None = None) -> None:
        self.db = db
        self.sql = sql
        self._no_aliases = no_aliases or NothingCached()  # recall asks at every call

    def snapshot(self) -> AbstractContextManager[Connection]:
        """Reads inside the block see one snapshot (nested blocks share it; inside this
        thread's transaction, the transaction's view)."""
        return self.db.snapshot()

    # --- resolving --------------------------------------------------------------------------

    def _resolve(self, conn: Connection, ref: str, type_: str | None = None) -> str | None:
        """The id an entity id or a name (of a type, or of any) stands for, or ``None``."""
        if graph_records.is_entity_id(ref):
            return ref if self.sql.entity_exists(conn, ref) else None
        return self.sql.resolve(conn, graph_records.normalise(ref), type_)

    def _require(self, conn: Connection, ref: str, type_: str | None = None) -> str:
        """Like :meth:`_resolve`, raising :class:`EntityNotFoundError`."""
        found = self._resolve(conn, ref, type_)
        if found is None:
            raise EntityNotFoundError(
                f"no entity {ref!r}" + (f" of type {type_!r}" if type_ else "")
            )
        return found

    def _endpoint(self, conn: Connection, ref: str, type_: str, now: int, direct: bool) -> str:
        """An entity id stands for itself (and must exist); a name is found or created."""
        if graph_records.is_entity_id(ref):
            return self._require(conn, ref)
        return rows.ensure_entity(self.sql, conn, ref, type_, now, direct=direct)[0]

    def _require_memory(self, conn: Connection, memory_id: str) -> None:
        if self.sql.content_of(conn, memory_id) is None:
            raise MemoryNotFoundError(f"no memory {memory_id} to record as the source")

    def _entity(self, conn: Connection, eid: str) -> Entity:
        entity = rows.fetch_entity(self.sql, conn, eid)
        assert entity is not None
        return entity

    # --- writing ----------------------------------------------------------------------------

    def add_entity(
        self, name: str, type_: str, description: str | None, now: int, *,
        source: str | None = None,
    ) -> Entity:  # fmt: skip
        """Add (or find) an entity; without ``source`` it is kept until removed directly."""
        with self.db.transaction() as conn:
            if source is not None:
                self._require_memory(conn, source)
            eid, _ = rows.ensure_entity(
                self.sql, conn, name, type_, now, direct=source is None, description=description
            )
            if source is not None:
                self.sql.add_provenance(conn, source, [eid], [], graph_records.CALLER)
            return self._entity(conn, eid)

    def relate(
        self,
        subject: str,
        predicate: str,
        obj: str,
        now: int,
        *,
        subject_type: str = graph_records.DEFAULT_TYPE,
        object_type: str = graph_records.DEFAULT_TYPE,
        confidence: float = 1.0,
        valid_from: int | None = None,
        valid_to: int | None = None,
        source: str | None = None,
    ) -> Relation:
        """Assert a relation (creating named entities); with ``source`` it is derived from
        that memory, else kept until removed directly."""
        direct = source is None
        with self.db.transaction() as conn:
            if source is not None:
                self._require_memory(conn, source)
            s = self._endpoint(conn, subject, subject_type, now, direct)
            o = self._endpoint(conn, obj, object_type, now, direct)
            rid = rows.ensure_relation(
                self.sql, conn, s, predicate, o, now, confidence=confidence,
                valid_from=valid_from, valid_to=valid_to, direct=direct,
            )  # fmt: skip
            if source is not None:
                self.sql.add_provenance(conn, source, [s, o], [rid], graph_records.CALLER)
            return self.sql.fetch_relations(conn, [rid])[rid]

    def assert_facts(
        self,
        memory_id: str,
        entities: Sequence[EntityFact],
        relations: Sequence[RelationFact],
        origin: str,
        now: int,
    ) -> None:
        """The memory asserts these facts (in the caller's transaction, if any)."""
        with self.db.transaction(join=True) as conn:
            rows.assert_facts(self.sql, conn, memory_id, entities, relations, origin, now)

    def apply_extractions(
        self, results: Sequence[Extraction], failures: Sequence[tuple[str, int, str]], now: int
    ) -> int:
        """Write a batch of extractions in one transaction: each replaces what the
        extractor found before in that memory, unless the memory changed or went since
        its text was read (then it stays queued, or its row goes with it). ``failures``
        are postponed to their retry time and counted. Returns the memories extracted."""
        done = 0
        sql = self.sql
        with self.db.transaction() as conn:
            for memory_id, content, entities, relations in results:
                current = sql.content_of(conn, memory_id)
                if current is None:
                    sql.dequeue(conn, memory_id)
                    continue
                if current != content:
                    continue  # edited meanwhile: queued again by its trigger
                old_entities, old_relations = sql.drop_provenance(
                    conn, [memory_id], graph_records.EXTRACTOR
                )
                rows.assert_facts(
                    sql, conn, memory_id, entities, relations, graph_records.EXTRACTOR, now
                )
                sql.collect(conn, old_entities, old_relations)
                sql.dequeue(conn, memory_id)
                done += 1
            for memory_id, until, error in failures:
                sql.postpone(conn, memory_id, until, error)
            if failures:
                sql.add_to_counter(conn, EXTRACTION_ERRORS_KEY, len(failures))
                sql.write_meta(conn, LAST_EXTRACTION_ERROR_KEY, failures[-1][2][:1000])
        return done

    def drop_extracted(self, memory_id: str) -> None:
        """The memory's text changed, so what the extractor found in it goes (and what
        nothing else supports); it is re-extracted. In the caller's transaction, if any."""
        with self.db.transaction(join=True) as conn:
            if self.sql.has_graph(conn):
                entities, relations = self.sql.drop_provenance(
                    conn, [memory_id], graph_records.EXTRACTOR
                )
                self.sql.collect(conn, entities, relations)

    def move_provenance(self, drop: str, keep: str) -> None:
        """What memory ``drop`` asserted, memory ``keep`` asserts too (before ``drop``
        is forgotten as a duplicate of ``keep``). In the caller's transaction, if any."""
        with self.db.transaction(join=True) as conn:
            self.sql.move_provenance(conn, drop, keep)

    def merge(self, keep: str, drop: str, now: int) -> Entity:
        """Fold entity ``drop`` into ``keep`` (both must exist)."""
        with self.db.transaction() as conn:
            k = self._require(conn, keep)
            d = self._require(conn, drop)
            if k != d:
                rows.merge(self.sql, conn, k, d, now)
            return self._entity(conn, k)

    def invalidate(self, rid: str, at: int) -> Relation:
        """Mark a relation as no longer true from ``at`` on (its row stays)."""
        with self.db.transaction() as conn:
            if not self.sql.invalidate(conn, rid, at):
                raise RelationNotFoundError(f"no relation {rid!r}")
            return self.sql.fetch_relations(conn, [rid])[rid]

    def remove_entity(self, ref: str) -> bool:
        """Delete an entity, its relations and provenance; False if missing."""
        with self.db.transaction() as conn:
            eid = self._resolve(conn, ref)
            return eid is not None and rows.remove_entity(self.sql, conn, eid)

    def remove_relation(self, rid: str) -> bool:
        """Delete a relation; endpoints nothing else supports go too. False if missing."""
        with self.db.transaction() as conn:
            ends = self.sql.remove_relation(conn, rid)
            if ends is None:
                return False
            self.sql.collect(conn, list(ends), [])
            return True

    def enqueue(self, memory_ids: Sequence[str]) -> None:
        """Queue memories for extraction again."""
        with self.db.transaction() as conn:
            self.sql.enqueue(conn, memory_ids)

    # --- reading ----------------------------------------------------------------------------

    def entity(self, ref: str, type_: str | None = None) -> Entity | None:
        """An entity by id or name, or ``None``."""
        with self.db.snapshot() as conn:
            eid = self._resolve(conn, ref, type_)
            return None if eid is None else rows.fetch_entity(self.sql, conn, eid)

    def relations(self, ref: str) -> list[Relation]:
        """Every relation of an entity, invalidated ones too."""
        with self.db.snapshot() as conn:
            return self.sql.relations_of(conn, self._require(conn, ref))

    def neighbors(
        self,
        ref: str,
        depth: int,
        predicates: Sequence[str] | None,
        limit: int,
        fanout: int,
        at: int,
    ) -> list[Neighbor]:
        """Entities within ``depth`` hops (shallowest path to each), nearest and most
        supported first."""
        with self.db.snapshot() as conn:
            start = self._require(conn, ref)
            # Deeper entities rank after nearer ones, so the walk ends on the level that
            # reaches ``limit``; ``cap`` bounds the last level's work on a hub-heavy graph.
            cap = max(4 * limit, 200)
            steps = walk(self.sql, conn, start, depth, at, fanout, cap, predicates, limit=limit)
            entities = rows.fetch_entities(self.sql, conn, [s.entity_id for s in steps])
            return [Neighbor(entities[s.entity_id], s.depth, s.via) for s in steps]

    def path(self, a: str, b: str, max_depth: int, at: int) -> GraphPath | None:
        """The shortest path from ``a`` to ``b`` (at most ``max_depth`` hops; of several,
        the best supported), or ``None``."""
        with self.db.snapshot() as conn:
            start, end = self._require(conn, a), self._require(conn, b)
            if start == end:
                return GraphPath((self._entity(conn, start),), ())
            steps = walk(self.sql, conn, start, max_depth, at, PATH_FANOUT, WALK_CAP, target=end)
            hit = next((s for s in steps if s.entity_id == end), None)
            if hit is None:
                return None
            chain = [start]
            for r in hit.via:
                chain.append(r.object_id if r.subject_id == chain[-1] else r.subject_id)
            entities = rows.fetch_entities(self.sql, conn, chain)
            return GraphPath(tuple(entities[e] for e in chain), hit.via)

    def memory_ids_about(self, ref: str, limit: int) -> list[str]:
        """Ids of memories that name the entity."""
        with self.db.snapshot() as conn:
            return self.sql.memory_ids_about(conn, self._require(conn, ref), limit)

    def list_entities(self, type_: str | None, limit: int) -> list[Entity]:
        """Entities (of one type, or all), in id order."""
        with self.db.snapshot() as conn:
            return rows.list_entities(self.sql, conn, type_, limit)

    def pending(self, now: int, limit: int) -> list[tuple[str, str, int]]:
        """Memories waiting for extraction now: ``(id, content, attempts)``."""
        with self.db.reading() as conn:
            return self.sql.pending(conn, now, limit) if self.sql.has_graph(conn) else []

    def statistics(self) -> GraphStatistics:
        """The graph's counts."""
        with self.db.snapshot() as conn:
            meta = self.sql.read_meta
            return GraphStatistics(
                **self.sql.counts(conn),
                extraction_errors=int(meta(conn, EXTRACTION_ERRORS_KEY) or 0),
                last_extraction_error=meta(conn, LAST_EXTRACTION_ERROR_KEY),
                deduplicated=int(meta(conn, DEDUPLICATED_KEY) or 0),
                near_duplicates_merged=int(meta(conn, NEAR_DUPLICATES_KEY) or 0),
            )

    # --- the graph signal of recall (ids in, ids out: no name resolving) --------------------

    def has_graph(self) -> bool:
        """True if the store has the graph's tables (an old file read-only may not)."""
        with self.db.reading() as conn:
            return self.sql.has_graph(conn)

    def may_name_entities(self) -> bool:
        """False when no entity can be named: this handle sees no alias. Kept while the
        store is unchanged where the engine can tell (``no_aliases``), so recall's graph
        signal costs no round trip on a memory without a graph."""
        if self._no_aliases.known_empty():
            return False
        version = self._no_aliases.version()
        with self.db.reading() as conn:
            some = self.sql.any_alias(conn)
        self._no_aliases.found(not some, version)
        return some

    def entities_named_in(self, words: Sequence[str], limit: int) -> list[tuple[str, str]]:
        """``(entity id, alias)`` of aliases holding any of ``words`` (normalised)."""
        with self.db.reading() as conn:
            return self.sql.entities_named_in(conn, words, limit)

    def memory_count(self, entity_id: str, cap: int) -> int:
        """How many memories name the entity, counting no further than ``cap``."""
        with self.db.reading() as conn:
            return self.sql.capped_memory_count(conn, entity_id, cap)

    def memories_naming(self, entity_id: str, limit: int) -> list[str]:
        """Ids of memories that name the entity, most recently asserted first."""
        with self.db.reading() as conn:
            return self.sql.memory_ids_about(conn, entity_id, limit)

    def walk(self, entity_id: str, depth: int, at: int, fanout: int, cap: int) -> list[Reach]:
        """Entities within ``depth`` hops, each with its best-supported shallowest path
        (see :func:`persistence.stores.graph_walk.walk`)."""
        with self.db.snapshot() as conn:
            return walk(self.sql, conn, entity_id, depth, at, fanout, cap)

    def asserting_memories(self, relation_ids: Sequence[str]) -> dict[str, list[str]]:
        """Ids of the memories that assert each relation (unasserted ones left out)."""
        with self.db.reading() as conn:
            return self.sql.asserting_memories(conn, relation_ids)

    def facts_of(self, memory_id: str) -> tuple[list[Entity], list[Relation]]:
        """The entities and relations one memory asserts (its graph provenance)."""
        with self.db.snapshot() as conn:
            entity_ids, relations = self.sql.facts_of(conn, memory_id)
            found = rows.fetch_entities(self.sql, conn, entity_ids)
        return [found[e] for e in entity_ids if e in found], relations

    def entities(self, entity_ids: Sequence[str]) -> dict[str, Entity]:
        """The entities with these ids (missing ones left out)."""
        with self.db.reading() as conn:
            return rows.fetch_entities(self.sql, conn, entity_ids)

"""GraphStore: the knowledge graph's record API over a :class:`SQLiteStore`.

It shares the store's connections and transactions, so a graph write and a memory
write commit together. Arguments arrive checked (see :mod:`tiered_memory.graph`); ids
and names are resolved here. Deleting memories needs nothing from it: the store
collects their provenance just before each commit (:func:`graph_sql.collect_garbage`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager

import apsw

from persistence import graph_records
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
from persistence.sqlite.connection import query_one
from persistence.sqlite.sql import graph_sql
from persistence.sqlite.sql.meta_sql import (
    DEDUPLICATED_KEY,
    NEAR_DUPLICATES_KEY,
    read_meta,
    write_meta,
)
from persistence.sqlite.store import SQLiteStore

EXTRACTION_ERRORS_KEY = "graph_extraction_errors"
LAST_EXTRACTION_ERROR_KEY = "graph_last_extraction_error"
PATH_FANOUT = 200
WALK_CAP = 100_000


class GraphStore:
    """Entities, relations and provenance in ``store``'s file."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    def snapshot(self) -> AbstractContextManager[object]:
        """Reads inside the block see one snapshot of the file (nested blocks share it)."""
        return self.reading()

    @contextmanager
    def reading(self) -> Iterator[apsw.Connection]:
        """A connection in one read snapshot (the writer's inside a transaction; the
        enclosing snapshot's inside :meth:`snapshot`)."""
        with self.store.read_connection() as conn:
            if conn.in_transaction:
                yield conn
                return
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    # --- resolving ---------------------------------------------------------------------

    def _resolve(self, conn: apsw.Connection, ref: str, type_: str | None = None) -> str | None:
        """The id an entity id or a name (of a type, or of any) stands for, or ``None``."""
        if graph_records.is_entity_id(ref):
            found = query_one(conn, "SELECT 1 FROM entities WHERE id = ?", (ref,))
            return ref if found is not None else None
        return graph_sql.resolve(conn, graph_records.normalise(ref), type_)

    def _require(self, conn: apsw.Connection, ref: str, type_: str | None = None) -> str:
        """Like :meth:`_resolve`, raising :class:`EntityNotFoundError`."""
        found = self._resolve(conn, ref, type_)
        if found is None:
            raise EntityNotFoundError(
                f"no entity {ref!r}" + (f" of type {type_!r}" if type_ else "")
            )
        return found

    def _endpoint(self, conn: apsw.Connection, ref: str, type_: str, now: int, direct: bool) -> str:
        """An entity id stands for itself (and must exist); a name is found or created."""
        if graph_records.is_entity_id(ref):
            return self._require(conn, ref)
        return graph_sql.ensure_entity(conn, ref, type_, now, direct=direct)[0]

    # --- writing ------------------------------------------------------------------------

    def add_entity(
        self, name: str, type_: str, description: str | None, now: int, *,
        source: str | None = None,
    ) -> Entity:  # fmt: skip
        """Add (or find) an entity; without ``source`` it is kept until removed directly."""
        with self.store.transaction() as conn:
            if source is not None:
                self._require_memory(conn, source)
            eid, _ = graph_sql.ensure_entity(
                conn, name, type_, now, direct=source is None, description=description
            )
            if source is not None:
                graph_sql.add_provenance(conn, source, [eid], [], graph_records.CALLER)
            entity = graph_sql.fetch_entity(conn, eid)
        assert entity is not None
        return entity

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
        with self.store.transaction() as conn:
            if source is not None:
                self._require_memory(conn, source)
            s = self._endpoint(conn, subject, subject_type, now, direct)
            o = self._endpoint(conn, obj, object_type, now, direct)
            rid = graph_sql.ensure_relation(
                conn, s, predicate, o, now, confidence=confidence, valid_from=valid_from,
                valid_to=valid_to, direct=direct,
            )  # fmt: skip
            if source is not None:
                graph_sql.add_provenance(conn, source, [s, o], [rid], graph_records.CALLER)
            relation = graph_sql.fetch_relations(conn, [rid])[rid]
        return relation

    def _require_memory(self, conn: apsw.Connection, memory_id: str) -> None:
        if graph_sql.content_of(conn, memory_id) is None:
            raise MemoryNotFoundError(f"no memory {memory_id} to record as the source")

    def assert_facts(
        self,
        memory_id: str,
        entities: Sequence[EntityFact],
        relations: Sequence[RelationFact],
        origin: str,
        now: int,
    ) -> None:
        """The memory asserts these facts (in the caller's transaction, if any)."""
        with self.store.transaction(join=True) as conn:
            self._assert_facts(conn, memory_id, entities, relations, origin, now)

    def _assert_facts(
        self,
        conn: apsw.Connection,
        memory_id: str,
        entities: Sequence[EntityFact],
        relations: Sequence[RelationFact],
        origin: str,
        now: int,
    ) -> None:
        entity_ids = [
            graph_sql.ensure_entity(conn, e.name, e.type, now, direct=False)[0] for e in entities
        ]
        relation_ids = []
        for r in relations:
            s = graph_sql.ensure_entity(conn, r.subject, r.subject_type, now, direct=False)[0]
            o = graph_sql.ensure_entity(conn, r.object, r.object_type, now, direct=False)[0]
            if s == o:
                continue
            entity_ids += [s, o]
            relation_ids.append(
                graph_sql.ensure_relation(
                    conn,
                    s,
                    r.predicate,
                    o,
                    now,
                    confidence=r.confidence,
                    valid_from=None,
                    valid_to=None,
                    direct=False,
                )  # fmt: skip
            )
        graph_sql.add_provenance(conn, memory_id, entity_ids, relation_ids, origin)

    def apply_extractions(
        self,
        results: Sequence[tuple[str, str | None, Sequence[EntityFact], Sequence[RelationFact]]],
        failures: Sequence[tuple[str, int, str]],
        now: int,
    ) -> int:
        """Write a batch of extractions in one transaction: each replaces what the
        extractor found before in that memory, unless the memory changed or went since
        its text was read (then it stays queued, or its row goes with it). ``failures``
        are postponed to their retry time and counted. Returns the memories extracted."""
        done = 0
        with self.store.transaction() as conn:
            for memory_id, content, entities, relations in results:
                current = graph_sql.content_of(conn, memory_id)
                if current is None:
                    graph_sql.dequeue(conn, memory_id)
                    continue
                if current != content:
                    continue  # edited meanwhile: queued again by its trigger
                old_entities, old_relations = graph_sql.drop_provenance(
                    conn, [memory_id], graph_records.EXTRACTOR
                )
                self._assert_facts(
                    conn, memory_id, entities, relations, graph_records.EXTRACTOR, now
                )
                graph_sql.collect(conn, old_entities, old_relations)
                graph_sql.dequeue(conn, memory_id)
                done += 1
            for memory_id, until, error in failures:
                graph_sql.postpone(conn, memory_id, until, error)
            if failures:
                count = int(read_meta(conn, EXTRACTION_ERRORS_KEY) or 0) + len(failures)
                write_meta(conn, EXTRACTION_ERRORS_KEY, str(count))
                write_meta(conn, LAST_EXTRACTION_ERROR_KEY, failures[-1][2][:1000])
        return done

    def drop_extracted(self, memory_id: str) -> None:
        """The memory's text changed, so what the extractor found in it goes (and what
        nothing else supports); it is re-extracted. In the caller's transaction, if any."""
        with self.store.transaction(join=True) as conn:
            if graph_sql.has_graph(conn):
                entities, relations = graph_sql.drop_provenance(
                    conn, [memory_id], graph_records.EXTRACTOR
                )
                graph_sql.collect(conn, entities, relations)

    def move_provenance(self, drop: str, keep: str) -> None:
        """What memory ``drop`` asserted, memory ``keep`` asserts too (before ``drop``
        is forgotten as a duplicate of ``keep``). In the caller's transaction, if any."""
        with self.store.transaction(join=True) as conn:
            graph_sql.move_provenance(conn, drop, keep)

    def merge(self, keep: str, drop: str, now: int) -> Entity:
        """Fold entity ``drop`` into ``keep`` (both must exist)."""
        with self.store.transaction() as conn:
            k = self._require(conn, keep)
            d = self._require(conn, drop)
            if k != d:
                graph_sql.merge(conn, k, d, now)
            entity = graph_sql.fetch_entity(conn, k)
        assert entity is not None
        return entity

    def invalidate(self, rid: str, at: int) -> Relation:
        """Mark a relation as no longer true from ``at`` on (its row stays)."""
        with self.store.transaction() as conn:
            if not graph_sql.invalidate(conn, rid, at):
                raise RelationNotFoundError(f"no relation {rid!r}")
            return graph_sql.fetch_relations(conn, [rid])[rid]

    def remove_entity(self, ref: str) -> bool:
        """Delete an entity, its relations and provenance; False if missing."""
        with self.store.transaction() as conn:
            eid = self._resolve(conn, ref)
            return eid is not None and graph_sql.remove_entity(conn, eid)

    def remove_relation(self, rid: str) -> bool:
        """Delete a relation; endpoints nothing else supports go too. False if missing."""
        with self.store.transaction() as conn:
            ends = graph_sql.remove_relation(conn, rid)
            if ends is None:
                return False
            graph_sql.collect(conn, list(ends), [])
            return True

    def enqueue(self, memory_ids: Sequence[str]) -> None:
        """Queue memories for extraction again."""
        with self.store.transaction() as conn:
            graph_sql.enqueue(conn, memory_ids)

    # --- reading ------------------------------------------------------------------------

    def entity(self, ref: str, type_: str | None = None) -> Entity | None:
        """An entity by id or name, or ``None``."""
        with self.reading() as conn:
            eid = self._resolve(conn, ref, type_)
            return None if eid is None else graph_sql.fetch_entity(conn, eid)

    def relations(self, ref: str) -> list[Relation]:
        """Every relation of an entity, invalidated ones too."""
        with self.reading() as conn:
            return graph_sql.relations_of(conn, self._require(conn, ref))

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
        with self.reading() as conn:
            start = self._require(conn, ref)
            # Deeper entities rank after nearer ones, so the walk ends on the level that
            # reaches ``limit``; ``cap`` bounds the last level's work on a hub-heavy graph.
            cap = max(4 * limit, 200)
            steps = graph_sql.walk(conn, start, depth, at, fanout, cap, predicates, limit=limit)
            entities = graph_sql.fetch_entities(conn, [s.entity_id for s in steps])
            return [Neighbor(entities[s.entity_id], s.depth, s.via) for s in steps]

    def path(self, a: str, b: str, max_depth: int, at: int) -> GraphPath | None:
        """The shortest path from ``a`` to ``b`` (at most ``max_depth`` hops; of several,
        the best supported), or ``None``."""
        with self.reading() as conn:
            start, end = self._require(conn, a), self._require(conn, b)
            if start == end:
                entity = graph_sql.fetch_entity(conn, start)
                assert entity is not None
                return GraphPath((entity,), ())
            steps = graph_sql.walk(conn, start, max_depth, at, PATH_FANOUT, WALK_CAP, target=end)
            hit = next((s for s in steps if s.entity_id == end), None)
            if hit is None:
                return None
            chain = [start]
            for r in hit.via:
                chain.append(r.object_id if r.subject_id == chain[-1] else r.subject_id)
            entities = graph_sql.fetch_entities(conn, chain)
            return GraphPath(tuple(entities[e] for e in chain), hit.via)

    def memory_ids_about(self, ref: str, limit: int) -> list[str]:
        """Ids of memories that name the entity."""
        with self.reading() as conn:
            return graph_sql.memory_ids_about(conn, self._require(conn, ref), limit)

    def list_entities(self, type_: str | None, limit: int) -> list[Entity]:
        """Entities (of one type, or all), in id order."""
        with self.reading() as conn:
            return graph_sql.list_entities(conn, type_, limit)

    def pending(self, now: int, limit: int) -> list[tuple[str, str, int]]:
        """Memories waiting for extraction now: ``(id, content, attempts)``."""
        with self.reading() as conn:
            if not graph_sql.has_graph(conn):
                return []
            return graph_sql.pending(conn, now, limit)

    # --- the graph signal of recall (ids in, ids out: no name resolving) ---------------

    def has_graph(self) -> bool:
        """True if the store has the graph's tables (an old file read-only may not)."""
        with self.reading() as conn:
            return graph_sql.has_graph(conn)

    def may_name_entities(self) -> bool:
        """Always True: on a file the graph signal's alias look-up costs microseconds,
        so it is not worth a check of its own."""
        return True

    def entities_named_in(self, words: Sequence[str], limit: int) -> list[tuple[str, str]]:
        """``(entity id, alias)`` of aliases holding any of ``words`` (normalised)."""
        with self.reading() as conn:
            return graph_sql.entities_named_in(conn, words, limit)

    def memory_count(self, entity_id: str, cap: int) -> int:
        """How many memories name the entity, counting no further than ``cap``."""
        with self.reading() as conn:
            return graph_sql.capped_memory_count(conn, entity_id, cap)

    def memories_naming(self, entity_id: str, limit: int) -> list[str]:
        """Ids of memories that name the entity, most recently asserted first."""
        with self.reading() as conn:
            return graph_sql.memory_ids_about(conn, entity_id, limit)

    def walk(self, entity_id: str, depth: int, at: int, fanout: int, cap: int) -> list[Reach]:
        """Entities within ``depth`` hops, each with its best-supported shallowest path
        (see :func:`persistence.sqlite.sql.graph_sql.walk`)."""
        with self.reading() as conn:
            return graph_sql.walk(conn, entity_id, depth, at, fanout, cap)

    def asserting_memories(self, relation_ids: Sequence[str]) -> dict[str, list[str]]:
        """Ids of the memories that assert each relation (unasserted ones left out)."""
        with self.reading() as conn:
            return graph_sql.asserting_memories(conn, relation_ids)

    def facts_of(self, memory_id: str) -> tuple[list[Entity], list[Relation]]:
        """The entities and relations one memory asserts (its graph provenance)."""
        with self.reading() as conn:
            entity_ids, relations = graph_sql.facts_of(conn, memory_id)
            found = graph_sql.fetch_entities(conn, entity_ids)
        return [found[e] for e in entity_ids if e in found], relations

    def entities(self, entity_ids: Sequence[str]) -> dict[str, Entity]:
        """The entities with these ids (missing ones left out)."""
        with self.reading() as conn:
            return graph_sql.fetch_entities(conn, entity_ids)

    def statistics(self) -> GraphStatistics:
        """The graph's counts."""
        with self.reading() as conn:
            counts = graph_sql.counts(conn)
            return GraphStatistics(
                **counts,
                extraction_errors=int(read_meta(conn, EXTRACTION_ERRORS_KEY) or 0),
                last_extraction_error=read_meta(conn, LAST_EXTRACTION_ERROR_KEY),
                deduplicated=int(read_meta(conn, DEDUPLICATED_KEY) or 0),
                near_duplicates_merged=int(read_meta(conn, NEAR_DUPLICATES_KEY) or 0),
            )

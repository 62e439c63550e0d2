"""PgGraphStore: the knowledge graph's records on PostgreSQL (the twin of
:class:`persistence.sqlite.graph_store.GraphStore`, same behaviour and errors).

It shares the store's engine (``store.db``): graph writes go through its
``transaction()``, so they commit with the memory writes of the caller's transaction.
Reads of several statements run in one ``REPEATABLE READ READ ONLY`` snapshot (or the
open transaction's view). Deleting memories needs nothing from here: a deferred trigger
collects their provenance at COMMIT (:mod:`migrations.postgres.v003_graph`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager

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
from persistence.meta_keys import DEDUPLICATED_KEY, NEAR_DUPLICATES_KEY
from persistence.postgres.database import Connection
from persistence.postgres.empty_cache import EmptyAtVersion
from persistence.postgres.graph_walk import walk
from persistence.postgres.sql import graph_sql, meta_sql
from persistence.postgres.store import PostgresStore
from persistence.postgres.translate import storage_errors

EXTRACTION_ERRORS_KEY = "graph_extraction_errors"
LAST_EXTRACTION_ERROR_KEY = "graph_last_extraction_error"
PATH_FANOUT = 200
WALK_CAP = 100_000


class PgGraphStore:
    """Entities, relations and provenance in ``store``'s database."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self.db = store.db
        self._local = threading.local()
        self._no_aliases = EmptyAtVersion(self.db)  # recall asks at every call

    # --- connections ----------------------------------------------------------------------

    @contextmanager
    def snapshot(self) -> Iterator[Connection]:
        """Reads inside the block see one snapshot (nested blocks share it; inside this
        thread's transaction, the transaction's view)."""
        held: Connection | None = getattr(self._local, "conn", None)
        if held is not None or self.db.in_transaction:
            with self._reading() as conn:
                yield conn
            return
        with self.store.snapshot() as conn:
            self._local.conn = conn
            try:
                yield conn
            finally:
                self._local.conn = None

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        """A connection for one statement: the transaction's, the snapshot's, or any."""
        held: Connection | None = getattr(self._local, "conn", None)
        if held is not None and not self.db.in_transaction:
            yield held
            return
        with self.db.reading() as conn:
            yield conn

    def _consistent(self) -> AbstractContextManager[Connection]:
        """A connection for several statements that must agree (a snapshot)."""
        return self.snapshot()

    @contextmanager
    def _writing(self, *, join: bool = False) -> Iterator[Connection]:
        """The transaction's connection; psycopg errors leave as the library's."""
        with self.db.transaction(join=join) as conn, storage_errors(self.db._url):
            yield conn

    # --- resolving ------------------------------------------------------------------------

    def _resolve(self, conn: Connection, ref: str, type_: str | None = None) -> str | None:
        """The id an entity id or a name (of a type, or of any) stands for, or ``None``."""
        if graph_records.is_entity_id(ref):
            return ref if graph_sql.entity_exists(conn, ref) else None
        return graph_sql.resolve(conn, graph_records.normalise(ref), type_)

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
        return graph_sql.ensure_entity(conn, ref, type_, now, direct=direct)[0]

    def _require_memory(self, conn: Connection, memory_id: str) -> None:
        if graph_sql.content_of(conn, memory_id) is None:
            raise MemoryNotFoundError(f"no memory {memory_id} to record as the source")

    # --- writing --------------------------------------------------------------------------

    def add_entity(
        self, name: str, type_: str, description: str | None, now: int, *,
        source: str | None = None,
    ) -> Entity:  # fmt: skip
        """Add (or find) an entity; without ``source`` it is kept until removed directly."""
        with self._writing() as conn:
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
        with self._writing() as conn:
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
            return graph_sql.fetch_relations(conn, [rid])[rid]

    def assert_facts(
        self,
        memory_id: str,
        entities: Sequence[EntityFact],
        relations: Sequence[RelationFact],
        origin: str,
        now: int,
    ) -> None:
        """The memory asserts these facts (in the caller's transaction, if any)."""
        with self._writing(join=True) as conn:
            self._assert_facts(conn, memory_id, entities, relations, origin, now)

    def _assert_facts(
        self,
        conn: Connection,
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
        its text was read (then it stays queued, or its row goes). ``failures`` are
        postponed to their retry time and counted. Returns the memories extracted."""
        done = 0
        with self._writing() as conn:
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
                meta_sql.add(conn, EXTRACTION_ERRORS_KEY, len(failures))
                meta_sql.write(conn, LAST_EXTRACTION_ERROR_KEY, failures[-1][2][:1000])
        return done

    def drop_extracted(self, memory_id: str) -> None:
        """The memory's text changed, so what the extractor found in it goes (and what
        nothing else supports); it is re-extracted. In the caller's transaction, if any."""
        with self._writing(join=True) as conn:
            entities, relations = graph_sql.drop_provenance(
                conn, [memory_id], graph_records.EXTRACTOR
            )
            graph_sql.collect(conn, entities, relations)

    def move_provenance(self, drop: str, keep: str) -> None:
        """What memory ``drop`` asserted, memory ``keep`` asserts too (before ``drop``
        is forgotten as a duplicate of ``keep``). In the caller's transaction, if any."""
        with self._writing(join=True) as conn:
            graph_sql.move_provenance(conn, drop, keep)

    def merge(self, keep: str, drop: str, now: int) -> Entity:
        """Fold entity ``drop`` into ``keep`` (both must exist)."""
        with self._writing() as conn:
            k = self._require(conn, keep)
            d = self._require(conn, drop)
            if k != d:
                graph_sql.merge(conn, k, d, now)
            entity = graph_sql.fetch_entity(conn, k)
        assert entity is not None
        return entity

    def invalidate(self, rid: str, at: int) -> Relation:
        """Mark a relation as no longer true from ``at`` on (its row stays)."""
        with self._writing() as conn:
            if not graph_sql.invalidate(conn, rid, at):
                raise RelationNotFoundError(f"no relation {rid!r}")
            return graph_sql.fetch_relations(conn, [rid])[rid]

    def remove_entity(self, ref: str) -> bool:
        """Delete an entity, its relations and provenance; False if missing."""
        with self._writing() as conn:
            eid = self._resolve(conn, ref)
            return eid is not None and graph_sql.remove_entity(conn, eid)

    def remove_relation(self, rid: str) -> bool:
        """Delete a relation; endpoints nothing else supports go too. False if missing."""
        with self._writing() as conn:
            ends = graph_sql.remove_relation(conn, rid)
            if ends is None:
                return False
            graph_sql.collect(conn, list(ends), [])
            return True

    def enqueue(self, memory_ids: Sequence[str]) -> None:
        """Queue memories for extraction again."""
        with self._writing() as conn:
            graph_sql.enqueue(conn, memory_ids)

    # --- reading --------------------------------------------------------------------------

    def entity(self, ref: str, type_: str | None = None) -> Entity | None:
        """An entity by id or name, or ``None``."""
        with self._consistent() as conn:
            eid = self._resolve(conn, ref, type_)
            return None if eid is None else graph_sql.fetch_entity(conn, eid)

    def relations(self, ref: str) -> list[Relation]:
        """Every relation of an entity, invalidated ones too."""
        with self._consistent() as conn:
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
        with self._consistent() as conn:
            start = self._require(conn, ref)
            # Deeper entities rank after nearer ones, so the walk ends on the level that
            # reaches ``limit``; ``cap`` bounds the last level's work on a hub-heavy graph.
            cap = max(4 * limit, 200)
            steps = walk(conn, start, depth, at, fanout, cap, predicates, limit=limit)
            entities = graph_sql.fetch_entities(conn, [s.entity_id for s in steps])
            return [Neighbor(entities[s.entity_id], s.depth, s.via) for s in steps]

    def path(self, a: str, b: str, max_depth: int, at: int) -> GraphPath | None:
        """The shortest path from ``a`` to ``b`` (at most ``max_depth`` hops; of several,
        the best supported), or ``None``."""
        with self._consistent() as conn:
            start, end = self._require(conn, a), self._require(conn, b)
            if start == end:
                entity = graph_sql.fetch_entity(conn, start)
                assert entity is not None
                return GraphPath((entity,), ())
            steps = walk(conn, start, max_depth, at, PATH_FANOUT, WALK_CAP, target=end)
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
        with self._consistent() as conn:
            return graph_sql.memory_ids_about(conn, self._require(conn, ref), limit)

    def list_entities(self, type_: str | None, limit: int) -> list[Entity]:
        """Entities (of one type, or all), in id order."""
        with self._consistent() as conn:
            return graph_sql.list_entities(conn, type_, limit)

    def pending(self, now: int, limit: int) -> list[tuple[str, str, int]]:
        """Memories waiting for extraction now: ``(id, content, attempts)``."""
        with self._reading() as conn:
            return graph_sql.pending(conn, now, limit)

    def statistics(self) -> GraphStatistics:
        """The graph's counts."""
        with self._consistent() as conn:
            counts = graph_sql.counts(conn)
            return GraphStatistics(
                **counts,
                extraction_errors=int(meta_sql.read(conn, EXTRACTION_ERRORS_KEY) or 0),
                last_extraction_error=meta_sql.read(conn, LAST_EXTRACTION_ERROR_KEY),
                deduplicated=int(meta_sql.read(conn, DEDUPLICATED_KEY) or 0),
                near_duplicates_merged=int(meta_sql.read(conn, NEAR_DUPLICATES_KEY) or 0),
            )

    # --- the graph signal of recall (ids in, ids out: no name resolving) -----------------

    def has_graph(self) -> bool:
        """Always True: every PostgreSQL schema has the graph."""
        return True

    def may_name_entities(self) -> bool:
        """False when no entity can be named: this handle sees no alias. Read once per
        version of the store (see :mod:`~persistence.postgres.empty_cache`), so recall's
        graph signal costs no round trip on a memory without a graph."""
        if self._no_aliases.known_empty():
            return False
        version = self._no_aliases.version()
        with self._reading() as conn:
            some = graph_sql.any_alias(conn)
        self._no_aliases.found(not some, version)
        return some

    def entities_named_in(self, words: Sequence[str], limit: int) -> list[tuple[str, str]]:
        """``(entity id, alias)`` of aliases holding any of ``words`` (normalised)."""
        with self._reading() as conn:
            return graph_sql.entities_named_in(conn, words, limit)

    def memory_count(self, entity_id: str, cap: int) -> int:
        """How many memories name the entity, counting no further than ``cap``."""
        with self._reading() as conn:
            return graph_sql.capped_memory_count(conn, entity_id, cap)

    def memories_naming(self, entity_id: str, limit: int) -> list[str]:
        """Ids of memories that name the entity, most recently asserted first."""
        with self._reading() as conn:
            return graph_sql.memory_ids_about(conn, entity_id, limit)

    def walk(self, entity_id: str, depth: int, at: int, fanout: int, cap: int) -> list[Reach]:
        """Entities within ``depth`` hops, each with its best-supported shallowest path
        (see :func:`persistence.postgres.graph_walk.walk`)."""
        with self._consistent() as conn:
            return walk(conn, entity_id, depth, at, fanout, cap)

    def asserting_memories(self, relation_ids: Sequence[str]) -> dict[str, list[str]]:
        """Ids of the memories that assert each relation (unasserted ones left out)."""
        with self._consistent() as conn:
            return graph_sql.asserting_memories(conn, relation_ids)

    def facts_of(self, memory_id: str) -> tuple[list[Entity], list[Relation]]:
        """The entities and relations one memory asserts (its graph provenance)."""
        with self._consistent() as conn:
            entity_ids, relations = graph_sql.facts_of(conn, memory_id)
            found = graph_sql.fetch_entities(conn, entity_ids)
        return [found[e] for e in entity_ids if e in found], relations

    def entities(self, entity_ids: Sequence[str]) -> dict[str, Entity]:
        """The entities with these ids (missing ones left out)."""
        with self._reading() as conn:
            return graph_sql.fetch_entities(conn, entity_ids)

"""GraphStore: the knowledge graph's records (:class:`~persistence.storage.GraphStorage`),
written once over the engine interface (:class:`~persistence.engine.Engine`) and an
engine's graph SQL (:class:`~persistence.stores.graph_engine.GraphSql`), whose
statements it runs (:mod:`persistence.statements`).

It shares the engine's database with the memory store, so a graph write and a memory
write in one :meth:`~persistence.engine.Engine.transaction` commit together. Writes run
in ``engine.transaction()``; reads of several statements that must agree in
``engine.snapshot()``; reads of one statement in ``engine.reading()``. Arguments arrive checked
(see :mod:`tiered_memory.graph`); ids and names are resolved here. Deleting memories
needs nothing from it: each engine collects their provenance at commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager

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
from persistence.statements import row, rows, run, run_all, value
from persistence.stores import graph_reads as reads
from persistence.stores import graph_rows
from persistence.stores.empty_cache import EmptyCache, NothingCached
from persistence.stores.graph_engine import Collect, GraphSql
from persistence.stores.graph_scope import GraphScope, GraphView
from persistence.stores.graph_walk import walk
from persistence.stores.stamped import StampedCache

EXTRACTION_ERRORS_KEY = "graph_extraction_errors"
LAST_EXTRACTION_ERROR_KEY = "graph_last_extraction_error"
PATH_FANOUT = 200
WALK_CAP = 100_000

Extraction = tuple[str, str | None, Sequence[EntityFact], Sequence[RelationFact]]


class GraphStore:
    """Entities, relations and provenance in ``engine``, through the engine's ``sql`` and
    its ``collect``; a filtering ``scope`` shows an agent its part
    (:mod:`persistence.stores.graph_scope`)."""

    def __init__(
        self, engine: Engine, sql: GraphSql, collect: Collect,
        no_aliases: EmptyCache | None = None, scope: GraphScope | None = None,
    ) -> None:  # fmt: skip
        self.engine = engine
        self.sql = sql
        self._collect = collect
        self._no_aliases = no_aliases or NothingCached()  # recall asks at every call
        self._scope = scope or GraphScope()
        # Recall's graph signal asks these at every call: kept until something commits.
        self._naming: StampedCache[tuple[str, int], tuple[int, list[str]]] = StampedCache(engine)
        self._entities: StampedCache[str, Entity] = StampedCache(engine)

    # --- resolving --------------------------------------------------------------------------

    def _resolve(self, conn: Connection, ref: str, type_: str | None = None) -> str | None:
        """The id an entity id or a name (of a type, or of any) stands for, or ``None``."""
        if graph_records.is_entity_id(ref):
            return ref if reads.entity_exists(self.sql, conn, ref) else None
        return reads.resolve(self.sql, conn, graph_records.normalise(ref), type_)

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
        return graph_rows.ensure_entity(self.sql, conn, ref, type_, now, direct=direct)[0]

    def _require_memory(self, conn: Connection, memory_id: str) -> None:
        missing = reads.content_of(self.sql, conn, memory_id) is None
        if missing or not self._scope.owned(conn, [memory_id]):
            raise MemoryNotFoundError(f"no memory {memory_id} to record as the source")

    def _entity(self, conn: Connection, eid: str) -> Entity:
        entity = graph_rows.fetch_entity(self.sql, conn, eid)
        assert entity is not None
        return entity

    # --- writing ----------------------------------------------------------------------------

    def add_entity(
        self, name: str, type_: str, description: str | None, now: int, *,
        source: str | None = None,
    ) -> Entity:  # fmt: skip
        """Add (or find) an entity; without ``source`` it is kept until removed directly."""
        if source is None:
            self._scope.refuse("add an entity without a source memory")
        with self.engine.transaction() as conn:
            if source is not None:
                self._require_memory(conn, source)
            eid, _ = graph_rows.ensure_entity(
                self.sql, conn, name, type_, now, direct=source is None, description=description
            )
            if source is not None:
                graph_rows.add_provenance(self.sql, conn, source, [eid], [], graph_records.CALLER)
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
        if direct:
            self._scope.refuse("relate without a source memory")
        with self.engine.transaction() as conn:
            if source is not None:
                self._require_memory(conn, source)
            s = self._endpoint(conn, subject, subject_type, now, direct)
            o = self._endpoint(conn, obj, object_type, now, direct)
            rid = graph_rows.ensure_relation(
                self.sql, conn, s, predicate, o, now, confidence=confidence,
                valid_from=valid_from, valid_to=valid_to, direct=direct,
            )  # fmt: skip
            if source is not None:
                graph_rows.add_provenance(
                    self.sql, conn, source, [s, o], [rid], graph_records.CALLER
                )
            return reads.fetch_relations(self.sql, conn, [rid])[rid]

    def assert_facts(
        self,
        memory_id: str,
        entities: Sequence[EntityFact],
        relations: Sequence[RelationFact],
        origin: str,
        now: int,
    ) -> None:
        """The memory asserts these facts (in the caller's transaction, if any)."""
        with self.engine.transaction(join=True) as conn:
            graph_rows.assert_facts(self.sql, conn, memory_id, entities, relations, origin, now)

    def apply_extractions(
        self, results: Sequence[Extraction], failures: Sequence[tuple[str, int, str]], now: int
    ) -> int:
        """Write a batch of extractions in one transaction: each replaces what the
        extractor found before in that memory, unless the memory changed or went since
        its text was read (then it stays queued, or its row goes with it). ``failures``
        are postponed to their retry time and counted. Returns the memories extracted."""
        done = 0
        sql = self.sql
        with self.engine.transaction() as conn:
            for memory_id, content, entities, relations in results:
                current = reads.content_of(sql, conn, memory_id)
                if current is None:
                    run(conn, sql.dequeue(memory_id))
                    continue
                if current != content:
                    continue  # edited meanwhile: queued again by its trigger
                old_entities, old_relations = reads.drop_provenance(
                    sql, conn, [memory_id], graph_records.EXTRACTOR
                )
                graph_rows.assert_facts(
                    sql, conn, memory_id, entities, relations, graph_records.EXTRACTOR, now
                )
                self._collect(conn, old_entities, old_relations)
                run(conn, sql.dequeue(memory_id))
                done += 1
            for memory_id, until, error in failures:
                run(conn, sql.postpone(memory_id, until, error))
            if failures:
                run(conn, sql.add_to_counter(EXTRACTION_ERRORS_KEY, len(failures)))
                run(conn, sql.write_meta(LAST_EXTRACTION_ERROR_KEY, failures[-1][2][:1000]))
        return done

    def drop_extracted(self, memory_id: str) -> None:
        """The memory's text changed, so what the extractor found in it goes (and what
        nothing else supports); it is re-extracted. In the caller's transaction, if any."""
        with self.engine.transaction(join=True) as conn:
            if reads.has_graph(self.sql, conn):
                entities, relations = reads.drop_provenance(
                    self.sql, conn, [memory_id], graph_records.EXTRACTOR
                )
                self._collect(conn, entities, relations)

    def move_provenance(self, drop: str, keep: str) -> None:
        """What memory ``drop`` asserted, memory ``keep`` asserts too (before ``drop``
        is forgotten as a duplicate of ``keep``). In the caller's transaction, if any."""
        with self.engine.transaction(join=True) as conn:
            run_all(conn, self.sql.move_provenance(drop, keep))

    def merge(self, keep: str, drop: str, now: int) -> Entity:
        """Fold entity ``drop`` into ``keep`` (both must exist)."""
        self._scope.refuse("merge entities")
        with self.engine.transaction() as conn:
            k = self._require(conn, keep)
            d = self._require(conn, drop)
            if k != d:
                graph_rows.merge(self.sql, conn, k, d, now)
            return self._entity(conn, k)

    def invalidate(self, rid: str, at: int) -> Relation:
        """Mark a relation as no longer true from ``at`` on (its row stays)."""
        self._scope.refuse("invalidate a relation")
        with self.engine.transaction() as conn:
            if row(conn, self.sql.invalidate(rid, at)) is None:
                raise RelationNotFoundError(f"no relation {rid!r}")
            return reads.fetch_relations(self.sql, conn, [rid])[rid]

    def current_relations(
        self, subject_id: str, predicate: str, at: int | None = None
    ) -> list[tuple[Relation, list[str]]]:
        """The relations ``subject_id -predicate-> *`` valid now (``at``: valid at that
        time, ended since or not), each with the ids of
        EVERY memory asserting it, whatever the scope (the single-valued facts' check
        leaves alone a relation some other agent's memory asserts). In the caller's
        transaction, if any: the check reads what it writes."""
        with self.engine.transaction(join=True) as conn:
            found = [self.sql.relation(r) for r in rows(conn, self.sql.current_relations(
                subject_id, predicate, at))]  # fmt: skip
            asserted = reads.asserting_memories(self.sql, conn, [r.id for r in found])
        return [(r, asserted.get(r.id, [])) for r in found]

    def held_relations(
        self, subject_id: str, predicate: str, at: int | None = None
    ) -> list[tuple[Relation, list[str]]]:
        """A read of :meth:`current_relations` for recall: the relations ``subject_id
        -predicate-> *`` valid now (``at``: then), each with the ids of the memories in
        this handle's scope asserting it (relations none of them asserts left out)."""
        with self._reads() as conn:
            found = [self.sql.relation(r) for r in rows(conn, self.sql.current_relations(
                subject_id, predicate, at))]  # fmt: skip
            asserted = reads.asserting_memories(self.sql, conn, [r.id for r in found])
            kept = [(r, self._scope.owned(conn, asserted.get(r.id, []))) for r in found]
        return [(r, ids) for r, ids in kept if ids]

    def set_validity(self, rid: str, valid_from: int | None, valid_to: int | None) -> None:
        """Bound when a relation holds, as a memory's single-valued fact asks (in the
        caller's transaction; allowed on a scoped handle: the caller checked that the
        agent's own memories alone assert it)."""
        with self.engine.transaction(join=True) as conn:
            run(conn, self.sql.set_validity(rid, valid_from, valid_to))

    def remove_entity(self, ref: str) -> bool:
        """Delete an entity, its relations and provenance; False if missing."""
        self._scope.refuse("remove an entity")
        with self.engine.transaction() as conn:
            eid = self._resolve(conn, ref)
            return eid is not None and graph_rows.remove_entity(self.sql, conn, eid)

    def remove_relation(self, rid: str) -> bool:
        """Delete a relation; endpoints nothing else supports go too. False if missing."""
        self._scope.refuse("remove a relation")
        with self.engine.transaction() as conn:
            ends = row(conn, self.sql.remove_relation(rid))
            if ends is None:
                return False
            self._collect(conn, [str(ends[0]), str(ends[1])], [])
            return True

    def enqueue(self, memory_ids: Sequence[str]) -> None:
        """Queue memories for extraction again."""
        with self.engine.transaction() as conn:
            run_all(conn, self.sql.enqueue(memory_ids))

    # --- reading (a filtering scope cuts each answer to its view) ---------------------------

    def _seen(self, conn: Connection, ref: str, view: GraphView | None) -> str:
        """Like :meth:`_require`, and the entity must be in ``view`` (if any)."""
        if view is None:
            return self._require(conn, ref)
        eid = self._resolve(conn, ref)
        if eid is None or eid not in view.entities:
            raise EntityNotFoundError(f"no entity {ref!r}")
        return eid

    def _reads(self) -> AbstractContextManager[Connection]:
        """One snapshot for a filtered read (its view agrees); one statement's read else."""
        return self.engine.snapshot() if self._scope.filtering else self.engine.reading()

    def _view(self, conn: Connection) -> GraphView | None:
        return self._scope.view(conn) if self._scope.filtering else None

    def entity(self, ref: str, type_: str | None = None) -> Entity | None:
        """An entity by id or name, or ``None``."""
        with self.engine.snapshot() as conn:
            eid = self._resolve(conn, ref, type_)
            view = self._view(conn)
            if eid is None or (view is not None and eid not in view.entities):
                return None
            return graph_rows.fetch_entity(self.sql, conn, eid)

    def relations(self, ref: str) -> list[Relation]:
        """Every relation of an entity, invalidated ones too."""
        with self.engine.snapshot() as conn:
            view = self._view(conn)
            found = reads.relations_of(self.sql, conn, self._seen(conn, ref, view))
            return found if view is None else [r for r in found if r.id in view.relations]

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
        with self.engine.snapshot() as conn:
            view = self._view(conn)
            start = self._seen(conn, ref, view)
            # Deeper entities rank after nearer ones, so the walk ends on the level that
            # reaches ``limit``; ``cap`` bounds the last level's work on a hub-heavy graph.
            ask = self._scope.ask(limit)
            cap = max(4 * ask, 200)
            steps = walk(self.sql, conn, start, depth, at, fanout, cap, predicates, limit=ask)
            if view is not None:
                steps = [
                    s for s in steps
                    if s.entity_id in view.entities and view.relations_inside(s.via)
                ][:limit]  # fmt: skip
            entities = graph_rows.fetch_entities(self.sql, conn, [s.entity_id for s in steps])
            return [Neighbor(entities[s.entity_id], s.depth, s.via) for s in steps]

    def path(self, a: str, b: str, max_depth: int, at: int) -> GraphPath | None:
        """The shortest path from ``a`` to ``b`` (at most ``max_depth`` hops; of several,
        the best supported), or ``None``."""
        with self.engine.snapshot() as conn:
            view = self._view(conn)
            start, end = self._seen(conn, a, view), self._seen(conn, b, view)
            if start == end:
                return GraphPath((self._entity(conn, start),), ())
            steps = walk(self.sql, conn, start, max_depth, at, PATH_FANOUT, WALK_CAP, target=end)
            hit = next((s for s in steps if s.entity_id == end), None)
            if hit is None:
                return None
            chain = [start]
            for r in hit.via:
                chain.append(r.object_id if r.subject_id == chain[-1] else r.subject_id)
            entities = graph_rows.fetch_entities(self.sql, conn, chain)
            found = GraphPath(tuple(entities[e] for e in chain), hit.via)
            return found if view is None or view.holds_path(found) else None

    def memory_ids_about(self, ref: str, limit: int) -> list[str]:
        """Ids of memories that name the entity."""
        with self.engine.snapshot() as conn:
            eid = self._seen(conn, ref, self._view(conn))
            found = reads.memory_ids_about(self.sql, conn, eid, self._scope.ask(limit))
            return self._scope.owned(conn, found)[:limit]

    def list_entities(self, type_: str | None, limit: int) -> list[Entity]:
        """Entities (of one type, or all), in id order."""
        with self.engine.snapshot() as conn:
            found = graph_rows.list_entities(self.sql, conn, type_, self._scope.ask(limit))
            view = self._view(conn)
            return found if view is None else [e for e in found if e.id in view.entities][:limit]

    def pending(self, now: int, limit: int) -> list[tuple[str, str, int]]:
        """Memories waiting for extraction now: ``(id, content, attempts)``."""
        with self._reads() as conn:
            if not reads.has_graph(self.sql, conn):
                return []
            waiting = self.sql.queued(rows(conn, self.sql.pending(now, self._scope.ask(limit))))
            mine = set(self._scope.owned(conn, [w[0] for w in waiting]))
            return [w for w in waiting if w[0] in mine][:limit]

    def statistics(self) -> GraphStatistics:
        """The graph's counts (of the scope's part, on a filtering scope)."""
        with self.engine.snapshot() as conn:
            meta = self.sql.read_meta
            counts = self._scope.counts() if self._scope.filtering else self.sql.counts()
            return GraphStatistics(
                **reads.counts(self.sql, conn, counts),
                extraction_errors=int(value(conn, meta(EXTRACTION_ERRORS_KEY)) or 0),
                last_extraction_error=value(conn, meta(LAST_EXTRACTION_ERROR_KEY)),
                deduplicated=int(value(conn, meta(DEDUPLICATED_KEY)) or 0),
                near_duplicates_merged=int(value(conn, meta(NEAR_DUPLICATES_KEY)) or 0),
            )

    # --- the graph signal of recall (ids in, ids out: no name resolving) --------------------

    def has_graph(self) -> bool:
        """True if the store has the graph's tables (an old file read-only may not)."""
        with self.engine.reading() as conn:
            return reads.has_graph(self.sql, conn)

    def may_name_entities(self) -> bool:
        """False when no entity can be named: this handle sees no alias. Kept while the
        store is unchanged where the engine can tell (``no_aliases``), so recall's graph
        signal costs no round trip on a memory without a graph."""
        if self._no_aliases.known_empty():
            return False
        version = self._no_aliases.version()
        statement = self.sql.any_alias()
        with self.engine.reading() as conn:
            some = statement is None or bool(value(conn, statement))
        self._no_aliases.found(not some, version)
        return some

    def entities_named_in(self, words: Sequence[str], limit: int) -> list[tuple[str, str]]:
        """``(entity id, alias)`` of aliases holding any of ``words`` (normalised)."""
        with self._reads() as conn:
            ask = self._scope.ask(limit)
            named = rows(conn, self.sql.entities_named_in(words, ask)) if words else []
            found = [(str(eid), str(alias)) for eid, alias in named]
            view = self._view(conn)
            return found if view is None else [p for p in found if p[0] in view.entities][:limit]

    def memory_count(self, entity_id: str, cap: int) -> int:
        """How many memories name the entity, counting no further than ``cap``."""
        if self._scope.filtering:
            return len(self.memories_naming(entity_id, cap))
        with self.engine.reading() as conn:
            return int(value(conn, self.sql.capped_memory_count(entity_id, cap)) or 0)

    def memories_naming(self, entity_id: str, limit: int) -> list[str]:
        """Ids of memories that name the entity, most recently asserted first."""
        with self._reads() as conn:
            found = reads.memory_ids_about(self.sql, conn, entity_id, self._scope.ask(limit))
            return self._scope.owned(conn, found)[:limit]

    def memories_naming_each(
        self, entity_ids: Sequence[str], most: int, limit: int
    ) -> dict[str, tuple[int, list[str]]]:
        """For each of ``entity_ids`` that 1 to ``most`` memories name: how many (as
        :meth:`memory_count` counts them) and the first ``limit`` of them (as
        :meth:`memories_naming` lists them); entities that more name (hubs) or none are
        left out. One statement for them all (recall's graph signal asks once per hop),
        but one per entity on a filtering scope (its filter counts)."""
        ids = list(dict.fromkeys(entity_ids))
        if not ids:
            return {}
        if self._scope.filtering:
            each = {eid: self.memories_naming(eid, most + 1) for eid in ids}
            return {
                eid: (len(named), named[:limit])
                for eid, named in each.items()
                if 0 < len(named) <= most
            }
        kept = self._naming.get_many([(eid, most) for eid in ids], self._read_naming)
        return {eid: (n, named[:limit]) for (eid, _), (n, named) in kept.items()}

    def _read_naming(
        self, keys: list[tuple[str, int]]
    ) -> dict[tuple[str, int], tuple[int, list[str]]]:
        """:meth:`memories_naming_each`'s statement for ``(entity id, most)`` keys of one
        ``most`` (all of them: ``limit`` is applied on the way out)."""
        most = keys[0][1]
        with self.engine.reading() as conn:
            found_rows = rows(conn, self.sql.memories_naming_each([e for e, _ in keys], most))
        texts = self.sql.texts
        found: dict[str, tuple[int, list[str]]] = {}
        for eid, n, memory_id in found_rows:
            found.setdefault(eid, (int(n), []))[1].append(memory_id)
        texts("memory_entities", "entity_id", found)
        return {
            (eid, most): (n, texts("memory_entities", "memory_id", named))
            for eid, (n, named) in found.items()
        }

    def walk(self, entity_id: str, depth: int, at: int, fanout: int, cap: int) -> list[Reach]:
        """Entities within ``depth`` hops, each with its best-supported shallowest path
        (see :func:`persistence.stores.graph_walk.walk`)."""
        with self.engine.snapshot() as conn:
            view = self._view(conn)
            if view is None:
                return walk(self.sql, conn, entity_id, depth, at, fanout, cap)
            if entity_id not in view.entities:
                return []
            found = walk(self.sql, conn, entity_id, depth, at, fanout, cap)
            return [
                r for r in found if r.entity_id in view.entities and view.relations_inside(r.via)
            ]  # fmt: skip

    def asserting_memories(self, relation_ids: Sequence[str]) -> dict[str, list[str]]:
        """Ids of the memories that assert each relation (unasserted ones left out)."""
        with self._reads() as conn:
            found = reads.asserting_memories(self.sql, conn, relation_ids)
            if not self._scope.filtering:
                return found
            kept = {rid: self._scope.owned(conn, ids) for rid, ids in found.items()}
            return {rid: ids for rid, ids in kept.items() if ids}

    def facts_of(self, memory_id: str) -> tuple[list[Entity], list[Relation]]:
        """The entities and relations one memory asserts (its graph provenance); nothing
        for a memory outside the scope."""
        with self.engine.snapshot() as conn:
            if not self._scope.owned(conn, [memory_id]):
                return [], []
            entity_ids, relations = reads.facts_of(self.sql, conn, memory_id)
            found = graph_rows.fetch_entities(self.sql, conn, entity_ids)
        return [found[e] for e in entity_ids if e in found], relations

    def entities(self, entity_ids: Sequence[str]) -> dict[str, Entity]:
        """The entities with these ids (missing ones left out)."""
        if not self._scope.filtering:  # recall's graph signal asks at every call
            return self._entities.get_many(list(entity_ids), self._read_entities)
        with self._reads() as conn:
            found = graph_rows.fetch_entities(self.sql, conn, entity_ids)
            view = self._view(conn)
            return found if view is None else {k: e for k, e in found.items() if k in view.entities}

    def _read_entities(self, entity_ids: list[str]) -> dict[str, Entity]:
        with self.engine.reading() as conn:
            return graph_rows.fetch_entities(self.sql, conn, entity_ids)

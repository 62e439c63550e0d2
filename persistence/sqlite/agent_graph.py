"""The knowledge graph of a file as an agent-scoped handle sees it.

A file's entities and relations have no owner: an entity named by two agents' memories
is one row. :class:`AgentFilteredGraph` shows agent ``agent_id`` the part of the graph
its own memories assert (see :func:`persistence.sqlite.sql.agent_sql.graph_view`):
entities and relations outside it read as missing, walks, neighbours and paths keep only
what lies inside it, and the memories an entity leads to are the agent's. Writes that
would create or change graph facts no memory of the agent asserts (``add_entity`` and
``relate`` without ``source``, merging, invalidating, removing) raise
:class:`~persistence.UnsupportedOperationError`: a file could not tell whose they are.
A walk is filtered after it runs, so a route through another agent's relations is not
replaced by a longer one of the agent's own. On PostgreSQL row-level security scopes the
graph instead and nothing here is used.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from persistence.errors import MemoryNotFoundError, UnsupportedOperationError
from persistence.graph_errors import EntityNotFoundError
from persistence.graph_records import (
    Entity,
    GraphPath,
    GraphStatistics,
    Neighbor,
    Reach,
    Relation,
)
from persistence.sqlite.sql import agent_sql

_DIRECT = (
    "an agent-scoped handle on a file cannot {what}: the file records no owner of graph "
    "facts no memory asserts; remember() a memory with the facts (or pass source=), or "
    "open the file without agent_id"
)
_ALL = 1_000_000_000
"""The limit a filtered read asks the file for (the filter then cuts to the caller's)."""


class AgentFilteredGraph:
    """``inner`` (a file's :class:`~persistence.GraphStorage`) as agent ``agent_id``
    sees it; ``store`` is the file's store (its reads and memories)."""

    def __init__(self, inner: Any, store: Any, agent_id: str) -> None:
        self._inner = inner
        self._store = store
        self.agent_id = agent_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _view(self) -> tuple[set[str], set[str]]:
        with self._store.read_connection() as conn:
            return agent_sql.graph_view(conn, self.agent_id)

    def _owned(self, memory_ids: Iterable[str]) -> list[str]:
        ids = list(memory_ids)
        found = self._store.memories.get_memories(ids)
        return [i for i in ids if getattr(found.get(i), "agent_id", None) == self.agent_id]

    def _refuse(self, what: str) -> UnsupportedOperationError:
        return UnsupportedOperationError(_DIRECT.format(what=what))

    def _require_source(self, source: str | None, what: str) -> None:
        if source is None:
            raise self._refuse(what)
        if not self._owned([source]):
            raise MemoryNotFoundError(f"no memory {source} to record as the source")

    def _visible(self, ref: str, type_: str | None = None) -> Entity:
        found = self.entity(ref, type_)
        if found is None:
            raise EntityNotFoundError(f"no entity {ref!r}")
        return found

    # --- writing ----------------------------------------------------------------------------

    def add_entity(
        self, name: str, type_: str, description: str | None, now: int, *,
        source: str | None = None,
    ) -> Entity:  # fmt: skip
        """Add an entity one of this agent's memories (``source``) names."""
        self._require_source(source, "add an entity without a source memory")
        found: Entity = self._inner.add_entity(name, type_, description, now, source=source)
        return found

    def relate(self, subject: str, predicate: str, obj: str, now: int, **kw: Any) -> Relation:
        """Assert a relation one of this agent's memories (``source``) asserts."""
        self._require_source(kw.get("source"), "relate without a source memory")
        found: Relation = self._inner.relate(subject, predicate, obj, now, **kw)
        return found

    def merge(self, keep: str, drop: str, now: int) -> Entity:
        raise self._refuse("merge entities")

    def invalidate(self, rid: str, at: int) -> Relation:
        raise self._refuse("invalidate a relation")

    def remove_entity(self, ref: str) -> bool:
        raise self._refuse("remove an entity")

    def remove_relation(self, rid: str) -> bool:
        raise self._refuse("remove a relation")

    def pending(self, now: int, limit: int) -> list[tuple[str, str, int]]:
        """This agent's memories waiting for extraction."""
        waiting = self._inner.pending(now, _ALL)
        mine = set(self._owned(w[0] for w in waiting))
        return [w for w in waiting if w[0] in mine][:limit]

    # --- reading ----------------------------------------------------------------------------

    def entity(self, ref: str, type_: str | None = None) -> Entity | None:
        """The entity if this agent's memories name it."""
        found: Entity | None = self._inner.entity(ref, type_)
        return found if found is not None and found.id in self._view()[0] else None

    def relations(self, ref: str) -> list[Relation]:
        """The entity's relations this agent's memories assert."""
        self._visible(ref)
        relations = self._view()[1]
        return [r for r in self._inner.relations(ref) if r.id in relations]

    def neighbors(self, ref: str, depth: int, predicates: Sequence[str] | None, limit: int,
                  fanout: int, at: int) -> list[Neighbor]:  # fmt: skip
        """The neighbours reached along this agent's relations only."""
        self._visible(ref)
        entities, relations = self._view()
        found = self._inner.neighbors(ref, depth, predicates, _ALL, fanout, at)
        kept = [
            n for n in found
            if n.entity.id in entities and all(r.id in relations for r in n.via)
        ]  # fmt: skip
        return kept[:limit]

    def path(self, a: str, b: str, max_depth: int, at: int) -> GraphPath | None:
        """The path if every entity and relation on it is this agent's."""
        self._visible(a)
        self._visible(b)
        found: GraphPath | None = self._inner.path(a, b, max_depth, at)
        if found is None:
            return None
        entities, relations = self._view()
        inside = all(e.id in entities for e in found.entities) and all(
            r.id in relations for r in found.relations
        )
        return found if inside else None

    def memory_ids_about(self, ref: str, limit: int) -> list[str]:
        """This agent's memories that name the entity."""
        self._visible(ref)
        return self._owned(self._inner.memory_ids_about(ref, _ALL))[:limit]

    def asserting_memories(self, relation_ids: Sequence[str]) -> dict[str, list[str]]:
        """This agent's memories asserting each relation."""
        found: dict[str, list[str]] = self._inner.asserting_memories(relation_ids)
        kept = {rid: self._owned(ids) for rid, ids in found.items()}
        return {rid: ids for rid, ids in kept.items() if ids}

    def facts_of(self, memory_id: str) -> tuple[list[Entity], list[Relation]]:
        """What the memory asserts, if it is this agent's (else nothing)."""
        if not self._owned([memory_id]):
            return [], []
        facts: tuple[list[Entity], list[Relation]] = self._inner.facts_of(memory_id)
        return facts

    def list_entities(self, type_: str | None, limit: int) -> list[Entity]:
        """The entities this agent's memories name."""
        entities = self._view()[0]
        return [e for e in self._inner.list_entities(type_, _ALL) if e.id in entities][:limit]

    def statistics(self) -> GraphStatistics:
        """The counts of this agent's part of the graph."""
        entities, relations = self._view()
        whole: GraphStatistics = self._inner.statistics()
        found = self._inner.entities(sorted(entities))
        with self._store.read_connection() as conn:
            provenance = agent_sql.provenance_count(conn, self.agent_id)
        current = 0
        for e in entities:  # relations are counted from each subject's list
            current += sum(
                1
                for r in self._inner.relations(e)
                if r.id in relations and r.subject_id == e and r.valid_to is None
            )
        return replace(
            whole,
            entities=len(found),
            aliases=sum(len(e.aliases) for e in found.values()),
            relations=len(relations),
            current_relations=current,
            provenance=provenance,
            extraction_pending=len(self.pending(2**62, _ALL)),
        )

    # --- the graph signal of recall ----------------------------------------------------------

    def entities_named_in(self, words: Sequence[str], limit: int) -> list[tuple[str, str]]:
        """Aliases of this agent's entities that hold any of ``words``."""
        entities = self._view()[0]
        found = self._inner.entities_named_in(words, _ALL)
        return [pair for pair in found if pair[0] in entities][:limit]

    def memory_count(self, entity_id: str, cap: int) -> int:
        """How many of this agent's memories name the entity (at most ``cap``)."""
        return len(self.memories_naming(entity_id, cap))

    def memories_naming(self, entity_id: str, limit: int) -> list[str]:
        """This agent's memories that name the entity, most recently asserted first."""
        return self._owned(self._inner.memories_naming(entity_id, _ALL))[:limit]

    def walk(self, entity_id: str, depth: int, at: int, fanout: int, cap: int) -> list[Reach]:
        """The reaches along this agent's relations only."""
        entities, relations = self._view()
        if entity_id not in entities:
            return []
        found = self._inner.walk(entity_id, depth, at, fanout, cap)
        return [
            r for r in found
            if r.entity_id in entities and all(v.id in relations for v in r.via)
        ]  # fmt: skip

    def entities(self, entity_ids: Sequence[str]) -> dict[str, Entity]:
        """This agent's entities among ``entity_ids``."""
        visible = self._view()[0]
        found: dict[str, Entity] = self._inner.entities(entity_ids)
        return {k: e for k, e in found.items() if k in visible}

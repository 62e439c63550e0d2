"""GraphScope: the part of the knowledge graph an agent-scoped handle sees, for the shared
:class:`~persistence.stores.graph.GraphStore`.

Entities and relations have no owner column: an entity two agents' memories name is one
row. A scoped graph therefore shows agent ``a`` the part its own memories assert (the
engine's :meth:`GraphScopeSql.scope_view`): entities and relations outside it read as
missing, walks, neighbours and paths keep only what lies inside it (a walk is cut after
it runs, so a route through another agent's relations is not replaced by a longer one),
and the memories an entity leads to are the agent's. Writes of facts no memory of the
agent asserts (``add_entity``/``relate`` without ``source``, merging, invalidating,
removing) are refused: nothing could tell whose they are.

Which engine filters here is the builder's choice, not a question asked at run time:
a SQLite file passes its scope and ``sourceless_facts=False``; PostgreSQL passes none,
its graph rows carry the scope and row-level security filters them (so sourceless facts
are allowed there).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from persistence.engine import Connection
from persistence.errors import UnsupportedOperationError
from persistence.graph_records import GraphPath, Relation
from persistence.statements import Statement, column
from persistence.stores.scope import WHOLE, Scope

ALL = 1_000_000_000
"""The limit a filtered read asks for (the filter then cuts to the caller's)."""

_DIRECT = (
    "an agent-scoped handle on a file cannot {what}: the file records no owner of graph "
    "facts no memory asserts; remember() a memory with the facts (or pass source=), or "
    "open the file without agent_id"
)


class GraphScopeSql(Protocol):
    """The engine statements a filtering :class:`GraphScope` runs (each carries the
    scope's predicate)."""

    def scope_view(self, scope: Scope) -> tuple[Statement, Statement]:
        """The entity ids, then the relation ids, the scope's memories assert."""
        ...

    def owned_memories(self, scope: Scope, ids: Sequence[str]) -> Statement:
        """Those of ``ids`` that are the scope's live memories."""
        ...

    def scoped_counts(self, scope: Scope) -> list[Statement]:
        """The graph's row counts, of the scope's part (as
        :meth:`~persistence.stores.graph_engine.GraphSql.counts`)."""
        ...


@dataclass(frozen=True, slots=True)
class GraphView:
    """The entity and relation ids a scoped handle sees."""

    entities: frozenset[str]
    relations: frozenset[str]

    def relations_inside(self, relations: Iterable[Relation]) -> bool:
        return all(r.id in self.relations for r in relations)

    def holds_path(self, path: GraphPath) -> bool:
        """True if every entity and relation on ``path`` is inside."""
        inside = all(e.id in self.entities for e in path.entities)
        return inside and self.relations_inside(path.relations)


class GraphScope:
    """How a graph store is scoped: ``filtering`` when ``sql`` and a scoped ``scope`` are
    given (else every method lets everything through)."""

    def __init__(
        self, scope: Scope = WHOLE, sql: GraphScopeSql | None = None, *,
        sourceless_facts: bool = True,
    ) -> None:  # fmt: skip
        self.scope = scope
        self._sql = sql
        self.filtering = sql is not None and scope.scoped
        self.sourceless_facts = sourceless_facts or not self.filtering

    def ask(self, limit: int) -> int:
        """The limit to ask the engine for: all when the answer is filtered afterwards."""
        return ALL if self.filtering else limit

    def view(self, conn: Connection) -> GraphView:
        """What the scope sees (only asked while :attr:`filtering`)."""
        assert self._sql is not None
        entities, relations = self._sql.scope_view(self.scope)
        return GraphView(frozenset(column(conn, entities)), frozenset(column(conn, relations)))

    def owned(self, conn: Connection, ids: Sequence[str]) -> list[str]:
        """Those of ``ids`` the scope holds (all of them unfiltered)."""
        if self._sql is None or not self.filtering:
            return list(ids)
        owned = set(column(conn, self._sql.owned_memories(self.scope, ids)))
        return [i for i in ids if i in owned]

    def counts(self) -> list[Statement]:
        """The statements of the row counts of the scope's part of the graph."""
        assert self._sql is not None
        return self._sql.scoped_counts(self.scope)

    def refuse(self, what: str) -> None:
        """Refuse a write of facts no memory of the agent asserts (on a filtering scope)."""
        if not self.sourceless_facts:
            raise UnsupportedOperationError(_DIRECT.format(what=what))

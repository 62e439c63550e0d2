"""GraphSql: what the shared graph store (:mod:`persistence.stores.graph`) needs of an
engine's graph SQL.

Each engine provides a module of these functions (:mod:`persistence.sqlite.sql.graph_sql`,
:mod:`persistence.postgres.sql.graph_sql`): the same names and arguments, each *building*
the engine's statement (or the few that belong together) as a
:class:`~persistence.statements.Statement`, or *decoding* rows. The shared store runs
them (:mod:`persistence.statements`) in its transaction or snapshot, and the logic over
them (finding or creating an entity, joining relations, merging, the walk) is written
once in :mod:`persistence.stores.graph_rows`, :mod:`persistence.stores.graph_reads` and
:mod:`persistence.stores.graph_walk`. Rows are the engine's own tuples; the decoders
(:meth:`GraphSql.entity`, :meth:`GraphSql.relation`, :meth:`GraphSql.texts`, ...) turn
them into values (an engine checks or converts the column types there).

Collecting what nothing supports any more is the one step the engines take differently
(SQLite deletes relations, re-weighs and deletes entities in turn; PostgreSQL calls one
function): each passes its own :data:`Collect`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from persistence.engine import Connection
from persistence.graph_records import Entity, Relation
from persistence.statements import Statement

Row = tuple[Any, ...]
"""An engine's row: entities as ``(id, name, type, description, direct, created_at,
updated_at[, alias])``, relations as ``(id, subject_id, predicate, object_id,
confidence, weight, valid_from, valid_to, direct, created_at)``."""

COUNT_NAMES = (
    "entities", "aliases", "relations", "current_relations", "provenance",
    "extraction_pending", "extraction_failed",
)  # fmt: skip
"""The graph's counts, in the order the values of :meth:`GraphSql.counts`' rows come."""

Collect = Callable[[Connection, Sequence[str], Sequence[str]], None]
"""Delete the derived relations, then entities, among these that nothing supports any
more (an entity also stays while a relation uses it); re-weigh the rest."""


class GraphSql(Protocol):
    """An engine's graph SQL (see the module docstring)."""

    # --- capabilities: no statement where the engine always has them ------------------------

    def has_graph(self) -> Statement | None:
        """A row if the store has the graph's tables (an old SQLite file may not);
        ``None`` when it always has them (no round trip)."""
        ...

    def any_alias(self) -> Statement | None:
        """A true value unless no entity alias is visible; ``None`` when the engine cannot
        tell cheaply (recall then looks)."""
        ...

    # --- decoders ---------------------------------------------------------------------------

    def entity(self, row: Sequence[Any], aliases: tuple[str, ...] = ()) -> Entity:
        """The entity an entity row holds."""
        ...

    def relation(self, row: Sequence[Any]) -> Relation:
        """The relation a relation row holds."""
        ...

    def texts(self, table: str, column: str, values: Iterable[Any]) -> list[str]:
        """``values`` read from ``table.column`` (ids, names) as texts."""
        ...

    def asserted(self, rows: Sequence[Row]) -> dict[str, list[str]]:
        """Rows of :meth:`asserting_memories` as relation id -> memory ids."""
        ...

    def queued(self, rows: Sequence[Row]) -> list[tuple[str, str, int]]:
        """Rows of :meth:`pending` as ``(memory id, content, attempts)``."""
        ...

    def hop_rows(self, nodes: Sequence[str], results: Iterable[list[Row]]) -> Iterable[list[Row]]:
        """For each of ``nodes`` in turn, its relation rows, from the rows of each of
        :meth:`hops`' statements (read as the caller iterates, where they are one per node)."""
        ...

    # --- entities ---------------------------------------------------------------------------

    def entity_exists(self, eid: str, *, own: bool = False) -> Statement:
        """A row if an entity has this id (``own``: in the writer's own scope, where an
        engine keeps one graph per scope; a write links only to its own scope's entities)."""
        ...

    def resolve(self, norm: str, type_: str | None, *, own: bool = False) -> Statement:
        """The entity id a normalised name (of a type, or of any) resolves to (``own``:
        as :meth:`entity_exists`)."""
        ...

    def touch_entity(self, eid: str, direct: bool, description: str | None, now: int) -> Statement:
        """Mark it direct (if ``direct``), set a new description, move ``updated_at``
        (of the writer's own scope's entity)."""
        ...

    def insert_entity(
        self, eid: str, name: str, type_: str, description: str | None, direct: bool, now: int,
    ) -> Statement: ...  # fmt: skip

    def insert_alias(self, norm: str, type_: str, alias: str, eid: str) -> Statement: ...

    def entities_with_aliases(self, ids: Sequence[str]) -> Statement:
        """Entity rows of these ids with one alias each (``None`` for none), by id."""
        ...

    def alias_rows(self, ids: Sequence[str]) -> Statement:
        """``(entity id, alias)`` of these entities, in the order added."""
        ...

    def entity_rows(self, type_: str | None, limit: int, after: str) -> Statement:
        """Entity rows (of a type, or all) in id order after ``after``."""
        ...

    def memory_ids_about(self, eid: str, limit: int) -> Statement: ...

    def capped_memory_count(self, eid: str, cap: int) -> Statement: ...

    def memories_naming_each(self, eids: Sequence[str], most: int) -> Statement:
        """``(entity id, how many rows name it, memory id)`` rows, in memory id order per
        entity, of those of ``eids`` that at most ``most`` rows name (counted as
        :meth:`capped_memory_count` counts)."""
        ...

    # --- relations --------------------------------------------------------------------------

    def fetch_relations(self, ids: Sequence[str]) -> Statement: ...

    def relations_of(self, eid: str) -> Statement: ...

    def asserting_memories(self, relation_ids: Sequence[str]) -> Statement: ...

    def facts_of(self, memory_id: str) -> tuple[Statement, Statement]:
        """The entity ids, then the relation rows, one memory asserts."""
        ...

    def current_relation(
        self, subject: str, predicate: str, obj: str, other_than: str = ""
    ) -> Statement:
        """The id of the relation ``subject -predicate-> obj`` valid now (not
        ``other_than``)."""
        ...

    def strengthen_relation(
        self, rid: str, confidence: float, direct: bool, valid_from: int | None
    ) -> Statement: ...

    def insert_relation(
        self, rid: str, subject: str, predicate: str, obj: str, confidence: float,
        valid_from: int | None, valid_to: int | None, direct: bool, now: int,
    ) -> Statement: ...  # fmt: skip

    def invalidate(self, rid: str, at: int) -> Statement:
        """Set ``valid_to``, returning a row if the relation is there."""
        ...

    def current_relations(self, subject: str, predicate: str, at: int | None = None) -> Statement:
        """The relation rows ``subject -predicate-> *`` valid now (``at``: then), by id."""
        ...

    def set_validity(self, rid: str, valid_from: int | None, valid_to: int | None) -> Statement:
        """Set both bounds of when a relation holds."""
        ...

    def hops(
        self, nodes: Sequence[str], at: int, fanout: int, predicates: Sequence[str] | None
    ) -> list[Statement]:
        """The statements of the relation rows ``nodes`` follow (:meth:`hop_rows` splits
        their rows by node): each node's ``fanout`` best supported ones valid at ``at``
        (of ``predicates``) as subject, then as object."""
        ...

    # --- provenance -------------------------------------------------------------------------

    def move_provenance(self, drop: str, keep: str) -> list[Statement]: ...

    def add_entity_provenance(
        self, memory_id: str, entity_ids: Sequence[str], origin: str
    ) -> Statement:
        """``memory_id`` asserted these entities (rows already there stay as they are)."""
        ...

    def add_relation_provenance(
        self, memory_id: str, relation_ids: Sequence[str], origin: str
    ) -> Statement:
        """``memory_id`` asserted these relations (rows already there stay as they are)."""
        ...

    def reweigh(self, relation_ids: Sequence[str]) -> Statement:
        """``weight`` = how many memories support each relation."""
        ...

    def drop_provenance(
        self, memory_ids: Sequence[str], origin: str | None = None
    ) -> tuple[Statement, Statement]:
        """Delete the provenance rows, returning the entity ids, then the relation ids."""
        ...

    # --- removing and merging ---------------------------------------------------------------

    def delete_entity(self, eid: str) -> Statement:
        """Delete it, returning a row if it was there."""
        ...

    def delete_relations(self, ids: Sequence[str]) -> Statement: ...

    def remove_relation(self, rid: str) -> Statement:
        """Delete it, returning its endpoints if it was there."""
        ...

    def move_aliases(self, keep: str, drop: str) -> Statement:
        """``drop``'s aliases become ``keep``'s."""
        ...

    def merge_entity_provenance(self, keep: str, drop: str) -> Statement:
        """The memories that name ``drop`` name ``keep`` too."""
        ...

    def merge_entity(self, keep: str, drop: str, now: int) -> Statement:
        """``keep`` takes ``drop``'s directness and (if it has none) its description."""
        ...

    def move_relation(self, rid: str, subject: str, obj: str) -> Statement: ...

    def merge_relation_provenance(self, into: str, rid: str) -> Statement:
        """The memories that assert relation ``rid`` assert ``into`` too."""
        ...

    def join_relation(self, into: str, confidence: float, direct: bool) -> Statement:
        """``into`` takes the larger confidence; ``direct`` sticks."""
        ...

    # --- recall, the extraction queue, counts -----------------------------------------------

    def entities_named_in(self, words: Sequence[str], limit: int) -> Statement: ...

    def pending(self, now: int, limit: int) -> Statement: ...

    def dequeue(self, memory_id: str) -> Statement: ...

    def enqueue(self, memory_ids: Sequence[str]) -> list[Statement]: ...

    def postpone(self, memory_id: str, until: int, error: str) -> Statement: ...

    def content_of(self, memory_id: str) -> Statement: ...

    def counts(self) -> list[Statement]:
        """The statements whose rows' values, in turn, are :data:`COUNT_NAMES`."""
        ...

    # --- facts kept with the data (the meta family's running functions) ---------------------

    def read_meta(self, key: str) -> Statement: ...

    def write_meta(self, key: str, value: str | None) -> Statement: ...

    def add_to_counter(self, key: str, by: int) -> Statement: ...

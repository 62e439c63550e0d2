"""GraphSql: what the shared graph store (:mod:`persistence.stores.graph`) needs of an
engine's graph SQL.

Each engine provides a module of these functions (:mod:`persistence.sqlite.sql.graph_sql`,
:mod:`persistence.postgres.sql.graph_sql`): the same names and arguments, each taking
the engine's connection first and running one statement (or a few that belong
together) in the caller's transaction or snapshot. The logic over them (finding or
creating an entity, joining relations, merging, the walk) is written once in
:mod:`persistence.stores.graph_rows` and :mod:`persistence.stores.graph_walk`. Rows are
the engine's own tuples; :meth:`GraphSql.entity` and :meth:`GraphSql.relation` turn
them into records (an engine checks or converts the column types there).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from persistence.engine import Connection
from persistence.graph_records import Entity, Relation
from persistence.statements import Statement

Row = tuple[Any, ...]
"""An engine's row: entities as ``(id, name, type, description, direct, created_at,
updated_at[, alias])``, relations as ``(id, subject_id, predicate, object_id,
confidence, weight, valid_from, valid_to, direct, created_at)``."""


class GraphSql(Protocol):
    """An engine's graph SQL (see the module docstring)."""

    # --- capabilities: trivial where the engine always has them -----------------------------

    def has_graph(self, conn: Connection) -> bool:
        """True if the store has the graph's tables (an old SQLite file may not)."""
        ...

    def any_alias(self, conn: Connection) -> bool:
        """False only when no entity alias is visible (True when the engine cannot tell
        cheaply: recall then looks)."""
        ...

    # --- entities ---------------------------------------------------------------------------

    def entity(self, row: Sequence[Any], aliases: tuple[str, ...] = ()) -> Entity:
        """The entity an entity row holds."""
        ...

    def entity_exists(self, conn: Connection, eid: str) -> bool: ...

    def resolve(self, conn: Connection, norm: str, type_: str | None) -> str | None:
        """The entity a normalised name (of a type, or of any) resolves to."""
        ...

    def touch_entity(
        self, conn: Connection, eid: str, direct: bool, description: str | None, now: int
    ) -> None:
        """Mark it direct (if ``direct``), set a new description, move ``updated_at``."""
        ...

    def insert_entity(
        self, conn: Connection, eid: str, name: str, type_: str, description: str | None,
        direct: bool, now: int,
    ) -> None: ...  # fmt: skip

    def insert_alias(
        self, conn: Connection, norm: str, type_: str, alias: str, eid: str
    ) -> None: ...

    def entities_with_aliases(self, conn: Connection, ids: Sequence[str]) -> list[Row]:
        """Entity rows of these ids with one alias each (``None`` for none), by id."""
        ...

    def alias_rows(self, conn: Connection, ids: Sequence[str]) -> list[tuple[str, str]]:
        """``(entity id, alias)`` of these entities, in the order added."""
        ...

    def entity_rows(self, conn: Connection, type_: str | None, limit: int, after: str) -> list[Row]:
        """Entity rows (of a type, or all) in id order after ``after``."""
        ...

    def memory_ids_about(self, conn: Connection, eid: str, limit: int) -> list[str]: ...

    def capped_memory_count(self, conn: Connection, eid: str, cap: int) -> int: ...

    # --- relations --------------------------------------------------------------------------

    def relation(self, row: Sequence[Any]) -> Relation:
        """The relation a relation row holds."""
        ...

    def fetch_relations(self, conn: Connection, ids: Sequence[str]) -> dict[str, Relation]: ...

    def relations_of(self, conn: Connection, eid: str) -> list[Relation]: ...

    def asserting_memories(
        self, conn: Connection, relation_ids: Sequence[str]
    ) -> dict[str, list[str]]: ...

    def facts_of(self, conn: Connection, memory_id: str) -> tuple[list[str], list[Relation]]: ...

    def current_relation(
        self, conn: Connection, subject: str, predicate: str, obj: str, other_than: str = ""
    ) -> str | None:
        """The id of the relation ``subject -predicate-> obj`` valid now (not
        ``other_than``), or ``None``."""
        ...

    def strengthen_relation(
        self, conn: Connection, rid: str, confidence: float, direct: bool, valid_from: int | None
    ) -> None: ...

    def insert_relation(
        self, conn: Connection, rid: str, subject: str, predicate: str, obj: str,
        confidence: float, valid_from: int | None, valid_to: int | None, direct: bool, now: int,
    ) -> None: ...  # fmt: skip

    def invalidate(self, conn: Connection, rid: str, at: int) -> bool: ...

    def hops(
        self,
        conn: Connection,
        nodes: Sequence[str],
        at: int,
        fanout: int,
        predicates: Sequence[str] | None,
    ) -> Iterable[list[Row]]:
        """For each of ``nodes`` in turn, the relation rows it follows: its ``fanout`` best
        supported ones valid at ``at`` (of ``predicates``) as subject, then as object."""
        ...  # fmt: skip

    # --- provenance -------------------------------------------------------------------------

    def move_provenance(self, conn: Connection, drop: str, keep: str) -> None: ...

    def add_provenance(
        self, conn: Connection, memory_id: str, entity_ids: Iterable[str],
        relation_ids: Iterable[str], origin: str,
    ) -> None: ...  # fmt: skip

    def reweigh(self, conn: Connection, relation_ids: Sequence[str]) -> None: ...

    def drop_provenance(
        self, conn: Connection, memory_ids: Sequence[str], origin: str | None = None
    ) -> tuple[list[str], list[str]]: ...

    def collect(
        self, conn: Connection, entity_ids: Sequence[str], relation_ids: Sequence[str]
    ) -> None: ...

    # --- removing and merging ---------------------------------------------------------------

    def delete_entity(self, conn: Connection, eid: str) -> bool: ...

    def delete_relations(self, conn: Connection, ids: Sequence[str]) -> None: ...

    def remove_relation(self, conn: Connection, rid: str) -> tuple[str, str] | None: ...

    def merge_entity(self, conn: Connection, keep: str, drop: str, now: int) -> None:
        """``drop``'s aliases and provenance move to ``keep``, which takes its directness
        and (if it has none) its description."""
        ...

    def move_relation(self, conn: Connection, rid: str, subject: str, obj: str) -> None: ...

    def join_relation(self, conn: Connection, into: str, rel: Relation) -> None:
        """Relation ``rel`` joins relation ``into``: its provenance, confidence and
        directness move over, and its row goes."""
        ...

    # --- recall, the extraction queue, counts -----------------------------------------------

    def entities_named_in(
        self, conn: Connection, words: Sequence[str], limit: int
    ) -> list[tuple[str, str]]: ...

    def pending(self, conn: Connection, now: int, limit: int) -> list[tuple[str, str, int]]: ...

    def dequeue(self, conn: Connection, memory_id: str) -> None: ...

    def enqueue(self, conn: Connection, memory_ids: Sequence[str]) -> None: ...

    def postpone(self, conn: Connection, memory_id: str, until: int, error: str) -> None: ...

    def content_of(self, conn: Connection, memory_id: str) -> str | None: ...

    def counts(self, conn: Connection) -> dict[str, int]: ...

    def read_meta(self, key: str) -> Statement: ...

    def write_meta(self, key: str, value: str | None) -> Statement: ...

    def add_to_counter(self, key: str, by: int) -> Statement: ...

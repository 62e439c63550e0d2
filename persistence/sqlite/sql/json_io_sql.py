"""The SQLite engine's SQL of the JSON export and import
(:class:`~persistence.transfer.store_io.TransferStatements`: the builders of the same
names as PostgreSQL's :mod:`~persistence.postgres.sql.transfer_sql`): the export's pages
(the record families' own, in the scope's terms) and their decoders, row counts, the
graph tables read and written whole, the import's id sets and log rows, the emptying of
tables for a replace, and the graph lookups of a merge. Each function builds a
:class:`~persistence.statements.Statement` or decodes rows and runs nothing;
:mod:`persistence.sqlite.transfer_steps` and the shared
:mod:`persistence.transfer.store_io` run them.

Table and column names come from the closed lists of :mod:`persistence.transfer`, never
from a document; values are always parameters.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from persistence.records import (
    ForgettingRecord,
    Memory,
    PromotionRecord,
    RepetitionSchedule,
    SessionState,
    TranscriptEntry,
)
from persistence.sqlite.sql import forgetting_sql, memory_sql, schedule_sql, session_sql
from persistence.statements import Row, Statement
from persistence.stores.scope import WHOLE, Scope
from persistence.transfer.graph_io import GRAPH_BOOLS, GRAPH_FIELDS, GRAPH_TABLES
from persistence.transfer.json_export import TABLES

# The import's log rows and id sets: the record families' own builders.
memory_ids = memory_sql.all_ids
has_promotion = memory_sql.has_promotion
insert_promotion = memory_sql.insert_promotion
has_forgetting = forgetting_sql.contains
insert_forgetting = forgetting_sql.insert
insert_transcript = session_sql.insert_transcript

_ORDER = {
    "entities": "id",
    "entity_aliases": "rowid",
    "relations": "id",
    "memory_entities": "memory_id, entity_id, origin",
    "memory_relations": "memory_id, relation_id, origin",
    "graph_queue": "memory_id",
}
"""Each graph table's stable export order."""
_CLEARED = (
    "memory_relations", "memory_entities", "relations", "entity_aliases", "entities",
    "graph_queue", "graph_dirty",
)  # fmt: skip
"""The graph's tables in an order that empties them without breaking a foreign key."""


INVARIANTS = (
    "foreign_key_check", "one_tier_per_memory", "schedules_point_at_memories",
    "tags_point_at_memories", "promotion_log_points_at_memories",
    "promotion_log_agrees_with_tiers", "embedding_sizes", "graph_invariants",
)  # fmt: skip
"""Checked inside the import's transaction; a failure rolls everything back."""

# A scoped export holds the agent's data: its memories (``agent_id``), the sessions it
# started and their transcripts, the schedules of its memories and the promotion log of
# its memories live or forgotten, its forgetting-log rows, its notes, and the graph its
# memories assert. A file's graph rows carry no agent: a fact no memory asserts is left
# out (on a server every row has its scope).


def scoped_ids(scope: Scope, audited: bool = False) -> tuple[str, tuple[str, ...]]:
    """A subquery of the scope's live memory ids (``audited``: and its forgotten ones)."""
    live, agent = memory_sql.scoped_ids(scope)
    if not audited:
        return live, agent
    forgotten, agent_too = scope.condition()
    return f"{live} UNION ALL SELECT memory_id FROM forgetting_log WHERE {forgotten}", (
        *agent, *agent_too,
    )  # fmt: skip


def table_count(table: str) -> Statement:
    """How many rows ``table`` (one of the export's tables) holds."""
    if table not in TABLES and table not in GRAPH_FIELDS:
        raise ValueError(table)
    return Statement(f"SELECT count(*) FROM {table}")


def row_counts(graph: bool) -> list[Statement]:
    """One count per table an export lists (the graph's where the file has it)."""
    return [table_count(t) for t in (*TABLES, *(GRAPH_TABLES if graph else ()))]


# --- export pages (keyset paging; the caller holds the snapshot) -----------------------

memory_page = memory_sql.page_in_order


def to_memory_page(rows: Sequence[Row]) -> list[tuple[int, Memory]]:
    """Rows of :func:`memory_page` as ``(rowid, memory)``."""
    return [(int(r[0]), memory_sql.to_memory(r[1:])) for r in rows]


def session_page(after_id: str, limit: int, scope: Scope = WHOLE) -> Statement:
    """The next ``limit`` sessions (of ``scope``) with id > ``after_id``."""
    return session_sql.page(after_id, limit, scope.agent_id)


def to_sessions(rows: Sequence[Row]) -> list[SessionState]:
    return [session_sql.to_session(r) for r in rows]


def transcript_page(after_rowid: int, limit: int, scope: Scope = WHOLE) -> Statement:
    """The next ``limit`` transcript lines (of ``scope``'s sessions), with rowids."""
    return session_sql.transcript_page(after_rowid, limit, scope.agent_id)


def to_transcripts(rows: Sequence[Row]) -> list[tuple[int, TranscriptEntry]]:
    return [session_sql.to_numbered_entry(r) for r in rows]


def schedule_page(after_id: str, limit: int, scope: Scope = WHOLE) -> Statement:
    """The next ``limit`` schedules (of ``scope``'s live memories) by memory id."""
    return schedule_sql.page(after_id, limit, scoped_ids(scope) if scope.scoped else None)


def to_schedules(rows: Sequence[Row]) -> list[RepetitionSchedule]:
    return [schedule_sql.to_schedule(r) for r in rows]


def promotion_page(after_id: int, limit: int, scope: Scope = WHOLE) -> Statement:
    """The next ``limit`` promotion-log rows (of ``scope``'s memories, live or forgotten)."""
    held = scoped_ids(scope, audited=True) if scope.scoped else None
    return memory_sql.promotion_page(after_id, limit, held)


def to_promotions(rows: Sequence[Row]) -> list[PromotionRecord]:
    return [memory_sql.to_promotion(r) for r in rows]


def forgetting_page(after_id: int, limit: int, scope: Scope = WHOLE) -> Statement:
    """The next ``limit`` forgetting-log rows (of ``scope``), with their ids."""
    return forgetting_sql.page(after_id, limit, scope.agent_id)


def to_forgotten(rows: Sequence[Row]) -> list[tuple[int, ForgettingRecord]]:
    return [forgetting_sql.to_numbered_record(r) for r in rows]


def graph_rows(table: str, scope: Scope = WHOLE) -> Statement:
    """Every row of one graph table (those ``scope``'s memories assert), values in the
    export's field order, in a stable order."""
    names = GRAPH_FIELDS[table]
    mine, params = _graph_scope(table, scope)
    return Statement(
        f"SELECT {', '.join(names)} FROM {table} WHERE {mine} ORDER BY {_ORDER[table]}", params
    )


def _graph_scope(table: str, scope: Scope) -> tuple[str, tuple[str, ...]]:
    """The condition keeping a graph table's rows that ``scope``'s memories assert: their
    provenance and queue rows, the relations with that provenance, the entities those
    name or that provenance names, and their aliases."""
    if not scope.scoped:
        return "1 = 1", ()
    live, agent = scoped_ids(scope)
    relations = f"SELECT relation_id FROM memory_relations WHERE memory_id IN ({live})"
    if table in ("memory_entities", "memory_relations", "graph_queue"):
        return f"memory_id IN ({live})", agent
    if table == "relations":
        return f"id IN ({relations})", agent
    entities = (
        f"SELECT entity_id FROM memory_entities WHERE memory_id IN ({live}) "
        f"UNION SELECT subject_id FROM relations WHERE id IN ({relations}) "
        f"UNION SELECT object_id FROM relations WHERE id IN ({relations})"
    )
    column = "id" if table == "entities" else "entity_id"
    return f"{column} IN ({entities})", agent * 3


def insert_graph_row(table: str, row: Mapping[str, Any]) -> Statement:
    """Insert one document row into a graph table (true/false stored as 1/0)."""
    names = GRAPH_FIELDS[table]
    marks = ", ".join("?" for _ in names)
    values = [int(row[n]) if (table, n) in GRAPH_BOOLS else row[n] for n in names]
    return Statement(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})", values)


def clear_graph() -> list[Statement]:
    """Empty every graph table (replace mode)."""
    return [Statement(f"DELETE FROM {table}") for table in _CLEARED]


def clear_schedules_and_forgetting_log() -> list[Statement]:
    """Empty ``repetition_schedules`` and ``forgetting_log`` (replace mode)."""
    return [Statement("DELETE FROM repetition_schedules"), Statement("DELETE FROM forgetting_log")]


def unqueue(memory_ids: Iterable[str]) -> Statement:
    """Take these memories off the extraction queue."""
    return Statement(
        "DELETE FROM graph_queue WHERE memory_id IN (SELECT value FROM json_each(?))",
        (orjson.dumps(sorted(set(memory_ids))).decode(),),
    )


def mark_direct(eid: str, direct: bool) -> Statement:
    """An entity becomes direct if the document says so (never the other way)."""
    return Statement("UPDATE entities SET direct = max(direct, ?) WHERE id = ?", (int(direct), eid))


def has_relation(rid: str) -> Statement:
    """A row if a relation with this id exists."""
    return Statement("SELECT 1 FROM relations WHERE id = ?", (rid,))


def current_twin(triple: Sequence[str]) -> Statement:
    """The id of the current relation ``subject -predicate-> object``, if there is one."""
    return Statement(
        "SELECT id FROM relations WHERE subject_id = ? AND predicate = ? "
        "AND object_id = ? AND valid_to IS NULL",
        tuple(triple),
    )


def session_ids() -> Statement:
    """The id of every session."""
    return session_sql.SESSION_IDS


def transcript_ids() -> Statement:
    """The id of every transcript line."""
    return session_sql.TRANSCRIPT_IDS


def forgotten_ids() -> Statement:
    """The memory ids the forgetting log names."""
    return forgetting_sql.FORGOTTEN_IDS


def logs_written() -> list[Statement]:
    """Nothing to run: the logs' ids are the rowids written."""
    return []

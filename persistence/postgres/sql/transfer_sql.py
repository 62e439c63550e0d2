"""The PostgreSQL engine's SQL of the JSON export and import
(:class:`~persistence.transfer.store_io.TransferStatements`: the builders of the same
names as SQLite's :mod:`~persistence.sqlite.sql.json_io_sql`), and what backup and copy
need: pages of every table in its export order with their decoders, row counts,
whole-table clears for a replace, log rows written with their ids, the graph tables row
by row, and the library's tables for maintenance. Each function builds a
:class:`~persistence.statements.Statement` (or decodes rows) and runs nothing;
:mod:`persistence.postgres.transfer_steps` and the shared
:mod:`persistence.transfer.store_io` run them.

Table and column names come from the closed lists below (and those of
:mod:`persistence.transfer`), never from a document; values are always parameters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from persistence.postgres.sql import memory_sql, session_sql
from persistence.records import (
    ForgettingRecord,
    Memory,
    PromotionRecord,
    RepetitionSchedule,
    SessionState,
    Tier,
    TranscriptEntry,
)
from persistence.statements import Row, Statement
from persistence.stores.scope import WHOLE, Scope
from persistence.transfer.graph_io import GRAPH_FIELDS

WORDS = re.compile(r"\w+")
"""An alias's words (its ``tokens``), split as :mod:`graph_sql` splits them."""

TABLE = {
    "scratchpad": "tm_memories WHERE tier = 'scratchpad'",
    "episodic": "tm_memories WHERE tier = 'episodic'",
    "semantic": "tm_memories WHERE tier = 'semantic'",
    "sessions": "tm_sessions",
    "session_transcripts": "tm_transcripts",
    "repetition_schedules": "tm_schedules",
    "promotion_log": "tm_promotion_log",
    "forgetting_log": "tm_forgetting_log",
    "entities": "tm_entities",
    "entity_aliases": "tm_entity_aliases",
    "relations": "tm_relations",
    "memory_entities": "tm_memory_entities",
    "memory_relations": "tm_memory_relations",
    "graph_queue": "tm_graph_queue",
}
"""An export table -> what it reads on PostgreSQL."""

_GRAPH_ORDER = {
    "entities": 'id COLLATE "C"',
    "entity_aliases": "seq",
    "relations": 'id COLLATE "C"',
    "memory_entities": 'memory_id COLLATE "C", entity_id COLLATE "C", origin COLLATE "C"',
    "memory_relations": 'memory_id COLLATE "C", relation_id COLLATE "C", origin COLLATE "C"',
    "graph_queue": 'memory_id COLLATE "C"',
}
"""Each graph table's stable export order (byte-wise, as SQLite orders; aliases in
insertion order, SQLite's rowid)."""

_COUNT_ALL = "SELECT " + ", ".join(f"(SELECT count(*) FROM {t})" for t in TABLE.values())

_CLEARED = (
    "tm_memory_relations", "tm_memory_entities", "tm_relations", "tm_entity_aliases",
    "tm_entities", "tm_graph_queue", "tm_graph_dirty", "tm_schedules", "tm_forgetting_log",
    "tm_promotion_log", "tm_content_keys", "tm_sessions",
)  # fmt: skip
"""What a replace empties besides the memories, in an order no foreign key minds."""


def row_counts(graph: bool) -> list[Statement]:
    """One row: how many rows each export table holds, in :data:`TABLE`'s order (the
    graph's included: every PostgreSQL schema has it)."""
    return [Statement(_COUNT_ALL)]


# --- export pages ---------------------------------------------------------------------

_MEMORY_PAGE = (
    "SELECT t.seq, "
    + memory_sql.SELECT.removeprefix("SELECT ")
    + " WHERE t.tier = %s AND t.seq > %s{scope} ORDER BY t.seq LIMIT %s"
)


def _mine(scope: Scope, column: str = "scope") -> tuple[str, tuple[str, ...]]:
    """The scope's condition on a row's scope column, to append after ``WHERE ...``
    (row-level security keeps the same rows: the second wall)."""
    return scope.and_(column, "%s")


def memory_page(tier: Tier, after_seq: int, limit: int, scope: Scope = WHOLE) -> Statement:
    """The next ``limit`` memories of ``tier`` (in ``scope``) in insertion order
    (seq > ``after_seq``), each with its seq (:func:`to_memory_page`)."""
    mine, agent = _mine(scope, "t.scope")
    return Statement(_MEMORY_PAGE.format(scope=mine), (tier.value, after_seq, *agent, limit))


def to_memory_page(rows: Sequence[Row]) -> list[tuple[int, Memory]]:
    """The rows of :func:`memory_page` as ``(seq, memory)``."""
    return [(int(r[0]), memory_sql.to_memory(r[1:])) for r in rows]


_SESSION_COLUMNS = (
    "session_id, started_at, last_active_at, turn_number, active_agents, scratchpad_state, "
    "metadata, is_active, pending_compaction, ended_at"
)


def session_page(after_id: str, limit: int, scope: Scope = WHOLE) -> Statement:
    """The next ``limit`` session rows (of ``scope``) by id (byte-wise) after ``after_id``
    (:func:`to_sessions`)."""
    mine, agent = _mine(scope)
    return Statement(
        f'SELECT {_SESSION_COLUMNS} FROM tm_sessions WHERE session_id COLLATE "C" > %s{mine} '
        'ORDER BY session_id COLLATE "C" LIMIT %s',
        (after_id, *agent, limit),
    )


def to_sessions(rows: Sequence[Row]) -> list[SessionState]:
    """The rows of :func:`session_page` as sessions."""
    return [session_sql.to_session(r) for r in rows]


def transcript_page(after_seq: int, limit: int, scope: Scope = WHOLE) -> Statement:
    """The next ``limit`` transcript lines (of ``scope``) in insertion order: ``(seq, id,
    session_id, turn_number, role, content, timestamp, speaker)`` (:func:`to_transcripts`)."""
    mine, agent = _mine(scope)
    return Statement(
        "SELECT seq, id, session_id, turn_number, role, content, timestamp, speaker "
        f"FROM tm_transcripts WHERE seq > %s{mine} ORDER BY seq LIMIT %s",
        (after_seq, *agent, limit),
    )


def to_transcripts(rows: Sequence[Row]) -> list[tuple[int, TranscriptEntry]]:
    """The rows of :func:`transcript_page` as ``(seq, entry)``."""
    return [(int(r[0]), TranscriptEntry(*r[1:])) for r in rows]


def schedule_page(after_id: str, limit: int, scope: Scope = WHOLE) -> Statement:
    """The next ``limit`` schedules (of ``scope``) by memory id (byte-wise) after
    ``after_id`` (:func:`to_schedules`)."""
    mine, agent = _mine(scope)
    return Statement(
        "SELECT memory_id, next_review_at, interval_ms, review_count, ease_factor, "
        'stability_days, last_reviewed_at FROM tm_schedules WHERE memory_id COLLATE "C" > %s'
        f'{mine} ORDER BY memory_id COLLATE "C" LIMIT %s',
        (after_id, *agent, limit),
    )


def to_schedules(rows: Sequence[Row]) -> list[RepetitionSchedule]:
    """The rows of :func:`schedule_page` as schedules."""
    return [RepetitionSchedule(*r) for r in rows]


def promotion_page(after_id: int, limit: int, scope: Scope = WHOLE) -> Statement:
    """The next ``limit`` promotion-log rows (of ``scope``) with id > ``after_id``
    (:func:`to_promotions`)."""
    mine, agent = _mine(scope)
    return Statement(
        "SELECT id, memory_id, from_tier, to_tier, promoted_at, reason FROM tm_promotion_log "
        f"WHERE id > %s{mine} ORDER BY id LIMIT %s",
        (after_id, *agent, limit),
    )


def to_promotions(rows: Sequence[Row]) -> list[PromotionRecord]:
    """The rows of :func:`promotion_page` as promotion records."""
    return [PromotionRecord(r[0], r[1], Tier(r[2]), Tier(r[3]), r[4], r[5]) for r in rows]


def forgetting_page(after_id: int, limit: int, scope: Scope = WHOLE) -> Statement:
    """The next ``limit`` forgetting-log rows (of ``scope``) with id > ``after_id``
    (:func:`to_forgotten`)."""
    mine, agent = _mine(scope)
    return Statement(
        "SELECT id, memory_id, tier, forgotten_at, retention, reason FROM tm_forgetting_log "
        f"WHERE id > %s{mine} ORDER BY id LIMIT %s",
        (after_id, *agent, limit),
    )


def to_forgotten(rows: Sequence[Row]) -> list[tuple[int, ForgettingRecord]]:
    """The rows of :func:`forgetting_page` as ``(id, record)``."""
    return [(int(r[0]), ForgettingRecord(r[1], Tier(r[2]), r[3], r[4], r[5])) for r in rows]


def graph_rows(table: str, scope: Scope = WHOLE) -> Statement:
    """Every row of one graph table (of ``scope``: on a server every graph row has one,
    a fact no memory asserts included), values in the export's field order, in a stable
    order."""
    names = ", ".join(GRAPH_FIELDS[table])
    mine, agent = scope.condition("scope", "%s")
    return Statement(
        f"SELECT {names} FROM {TABLE[table]} WHERE {mine} ORDER BY {_GRAPH_ORDER[table]}", agent
    )


# --- import writes --------------------------------------------------------------------


def clear_all() -> list[Statement]:
    """Empty every table an export lists (replace mode): memories with their vectors and
    keyword rows, sessions with their transcripts, schedules, logs, content keys, graph."""
    return [
        Statement("DELETE FROM tm_memories"),
        *(Statement(f"DELETE FROM {t}") for t in _CLEARED),
    ]


def clear_vectors() -> Statement:
    """Empty the vector table (a replace that changes the vector size: the memories go
    anyway)."""
    return Statement("DELETE FROM tm_vectors")


def memory_ids() -> Statement:
    """The id of every memory."""
    return Statement("SELECT id FROM tm_memories")


def session_ids() -> Statement:
    """The id of every session."""
    return Statement("SELECT session_id FROM tm_sessions")


def forgotten_ids() -> Statement:
    """The memory ids the forgetting log names."""
    return Statement("SELECT DISTINCT memory_id FROM tm_forgetting_log")


def transcript_ids() -> Statement:
    """The id of every transcript line."""
    return Statement("SELECT id FROM tm_transcripts")


def insert_transcript(e: TranscriptEntry) -> Statement:
    """Insert one transcript line as exported; its session is not touched."""
    return Statement(
        "INSERT INTO tm_transcripts (id, session_id, turn_number, role, content, timestamp, "
        "speaker) VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (e.id, e.session_id, e.turn_number, e.role, e.content, e.timestamp, e.speaker),
    )


def insert_promotion(record: PromotionRecord, keep_id: bool) -> Statement:
    """Insert a promotion-log row as exported (a fresh id unless ``keep_id``)."""
    values = (record.memory_id, record.from_tier.value, record.to_tier.value,
              record.promoted_at, record.reason)  # fmt: skip
    if keep_id:
        return Statement(
            "INSERT INTO tm_promotion_log (id, memory_id, from_tier, to_tier, promoted_at, "
            "reason) OVERRIDING SYSTEM VALUE VALUES (%s, %s, %s, %s, %s, %s)",
            (record.id, *values),
        )
    return Statement(
        "INSERT INTO tm_promotion_log (memory_id, from_tier, to_tier, promoted_at, reason) "
        "VALUES (%s, %s, %s, %s, %s)",
        values,
    )


def has_promotion(record: PromotionRecord) -> Statement:
    """A row if the log holds this promotion (same memory, tiers and time)."""
    return Statement(
        "SELECT 1 FROM tm_promotion_log WHERE memory_id = %s AND from_tier = %s "
        "AND to_tier = %s AND promoted_at = %s",
        (record.memory_id, record.from_tier.value, record.to_tier.value, record.promoted_at),
    )


def insert_forgetting(row_id: int | None, record: ForgettingRecord) -> Statement:
    """Insert a forgetting-log row as exported (``row_id=None``: a fresh id)."""
    values = (record.memory_id, record.tier.value, record.forgotten_at, record.retention,
              record.reason)  # fmt: skip
    if row_id is None:
        return Statement(
            "INSERT INTO tm_forgetting_log (memory_id, tier, forgotten_at, retention, reason) "
            "VALUES (%s, %s, %s, %s, %s)",
            values,
        )
    return Statement(
        "INSERT INTO tm_forgetting_log (id, memory_id, tier, forgotten_at, retention, "
        "reason) OVERRIDING SYSTEM VALUE VALUES (%s, %s, %s, %s, %s, %s)",
        (row_id, *values),
    )


def has_forgetting(record: ForgettingRecord) -> Statement:
    """A row if the log holds this row (same memory, tier, time and reason)."""
    return Statement(
        "SELECT 1 FROM tm_forgetting_log WHERE memory_id = %s AND tier = %s "
        "AND forgotten_at = %s AND reason = %s",
        (record.memory_id, record.tier.value, record.forgotten_at, record.reason),
    )


_ADVANCE = (
    "SELECT setval(s.seq, x.m) FROM (SELECT pg_get_serial_sequence({t}, 'id')::regclass "
    "AS seq) AS s, (SELECT max(id) AS m FROM {table}) AS x "
    "WHERE x.m > coalesce(pg_sequence_last_value(s.seq), 0)"
)


def logs_written() -> list[Statement]:
    """After an import wrote the logs: move the id sequences of both logs past the ids
    written with their values, so the next row gets a new one (a sequence never goes
    back)."""
    return [
        Statement(_ADVANCE.format(t=f"'{table}'", table=table))
        for table in ("tm_promotion_log", "tm_forgetting_log")
    ]


def unqueue(memory_ids: Iterable[str]) -> Statement:
    """Take these memories off the extraction queue."""
    return Statement("DELETE FROM tm_graph_queue WHERE memory_id = ANY(%s::text[])",
                     (sorted(set(memory_ids)),))  # fmt: skip


def clear_queue() -> Statement:
    """Empty the extraction queue (the insert triggers filled it during a replace)."""
    return Statement("DELETE FROM tm_graph_queue")


def insert_graph_row(table: str, row: Mapping[str, Any]) -> Statement:
    """Insert one document row into a graph table (an alias gets its words)."""
    names = list(GRAPH_FIELDS[table])
    values = [row[n] for n in names]
    if table == "entity_aliases":
        names.append("tokens")
        values.append(_words(row["norm"]))
    marks = ", ".join("%s" for _ in names)
    return Statement(f"INSERT INTO {TABLE[table]} ({', '.join(names)}) VALUES ({marks})", values)


def _words(norm: str) -> list[str]:
    return WORDS.findall(norm)


def has_relation(rid: str) -> Statement:
    """A row if a relation with this id exists."""
    return Statement("SELECT 1 FROM tm_relations WHERE id = %s", (rid,))


def mark_direct(eid: str, direct: bool) -> Statement:
    """An entity becomes direct if the document says so (never the other way)."""
    return Statement("UPDATE tm_entities SET direct = direct OR %s WHERE id = %s", (direct, eid))


def current_twin(triple: Sequence[str]) -> Statement:
    """The id of the current relation ``subject -predicate-> object``, if there is one."""
    return Statement(
        "SELECT id FROM tm_relations WHERE subject_id = %s AND predicate = %s "
        "AND object_id = %s AND valid_to IS NULL",
        tuple(triple),
    )


# --- maintenance ------------------------------------------------------------------------

_MAINTAINED = (
    "SELECT quote_ident(c.relname) FROM pg_class AS c JOIN pg_namespace AS n "
    "ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND c.relname LIKE 'tm\\_%%' "
    "AND n.nspname = current_schema() ORDER BY c.relname"
)


def maintained_tables() -> Statement:
    """The library's tables in the current schema, quoted for a ``VACUUM``."""
    return Statement(_MAINTAINED)


def vacuum_analyze(quoted_table: str) -> Statement:
    """``VACUUM (ANALYZE)`` one table, named as :func:`maintained_tables` quotes it."""
    return Statement(f"VACUUM (ANALYZE) {quoted_table}")

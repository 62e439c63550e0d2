"""The SQLite engine's SQL of the JSON export and import
(:class:`~persistence.transfer.store_io.TransferSql`: the functions of the same names as
PostgreSQL's :mod:`~persistence.postgres.sql.transfer_sql`): the pages an export reads,
the rows an import writes (the record families' own SQL where it has them), the graph
tables read and written whole, the emptying of the tables for a replace, and the checks
an import must pass before it commits.

Table and column names come from the closed lists of :mod:`persistence.transfer`, never
from a document; values are always parameters.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import apsw
import orjson

from migrations.sqlite import read_schema_version
from persistence.records import (
    ForgettingRecord,
    Memory,
    PromotionRecord,
    RepetitionSchedule,
    SessionState,
    Tier,
    TranscriptEntry,
)
from persistence.sqlite import graph_steps, memory_steps
from persistence.sqlite import integrity as integrity_sql
from persistence.sqlite.connection import query_one, query_value
from persistence.sqlite.sql import (
    forgetting_sql,
    graph_sql,
    memory_sql,
    meta_sql,
    notes_sql,
    schedule_sql,
    session_sql,
)
from persistence.sqlite.sql.meta_sql import (
    EMBEDDING_DIM_KEY,
    EMBEDDING_MODEL_KEY,
    REDACTIONS_KEY,
)
from persistence.statements import column, row, rows, run, run_all, value
from persistence.stores import graph_reads, notes
from persistence.stores.graph_rows import add_provenance as record_provenance
from persistence.stores.scope import WHOLE, Scope
from persistence.transfer.graph_io import GRAPH_BOOLS, GRAPH_FIELDS, GRAPH_TABLES
from persistence.transfer.json_export import TABLES, ExportHeader
from persistence.transfer.json_import import ImportDocument, Mode


# The functions of the shared names that the record families' SQL already has.
def has_forgetting(conn: apsw.Connection, record: ForgettingRecord) -> bool:
    """True if the log already holds this event (same memory, time and reason)."""
    return row(conn, forgetting_sql.contains(record)) is not None


def insert_forgetting(conn: apsw.Connection, row_id: int | None, record: ForgettingRecord) -> None:
    """Insert an audit row as it was exported (``row_id=None`` for a fresh id)."""
    run(conn, forgetting_sql.insert(row_id, record))


def forgotten_ids(conn: apsw.Connection) -> set[str]:
    """Ids of every memory the log says was forgotten."""
    return set(column(conn, forgetting_sql.FORGOTTEN_IDS))


def fetch_schedule(conn: apsw.Connection, memory_id: str) -> RepetitionSchedule | None:
    """The schedule of ``memory_id``, or ``None``."""
    found = row(conn, schedule_sql.fetch(memory_id))
    return None if found is None else schedule_sql.to_schedule(found)


def upsert_schedule(conn: apsw.Connection, schedule: RepetitionSchedule) -> None:
    """Insert or replace the schedule of one memory."""
    run(conn, schedule_sql.upsert(schedule))


def fetch_session(conn: apsw.Connection, session_id: str) -> SessionState | None:
    """The session, or ``None``."""
    found = row(conn, session_sql.fetch(session_id))
    return None if found is None else session_sql.to_session(found)


def insert_transcript(conn: apsw.Connection, entry: TranscriptEntry) -> None:
    """Insert one transcript line as it is (the session row is not touched)."""
    run(conn, session_sql.insert_transcript(entry))


def session_ids(conn: apsw.Connection) -> set[str]:
    """Ids of every session."""
    return set(column(conn, session_sql.SESSION_IDS))


def transcript_ids(conn: apsw.Connection) -> set[str]:
    """Ids of every transcript line."""
    return set(column(conn, session_sql.TRANSCRIPT_IDS))


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


_INVARIANTS = (
    "foreign_key_check", "one_tier_per_memory", "schedules_point_at_memories",
    "tags_point_at_memories", "promotion_log_points_at_memories",
    "promotion_log_agrees_with_tiers", "embedding_sizes", "graph_invariants",
)  # fmt: skip
"""Checked inside the import's transaction; a failure rolls everything back."""

# --- the graph family's reads and writes (run over graph_sql's statements) ---------------


def has_graph(conn: apsw.Connection) -> bool:
    return graph_reads.has_graph(graph_sql, conn)


def resolve(conn: apsw.Connection, norm: str, type_: str | None) -> str | None:
    return graph_reads.resolve(graph_sql, conn, norm, type_)


def drop_provenance(
    conn: apsw.Connection, memory_ids: Sequence[str], origin: str | None = None
) -> tuple[list[str], list[str]]:
    return graph_reads.drop_provenance(graph_sql, conn, memory_ids, origin)


def add_provenance(
    conn: apsw.Connection, memory_id: str, entity_ids: Iterable[str],
    relation_ids: Iterable[str], origin: str,
) -> None:  # fmt: skip
    record_provenance(graph_sql, conn, memory_id, entity_ids, relation_ids, origin)


# --- export -----------------------------------------------------------------------------


def header(conn: apsw.Connection) -> ExportHeader:
    """The file's schema version and embedding size and model."""
    dim = value(conn, meta_sql.read(EMBEDDING_DIM_KEY))
    return ExportHeader(
        schema_version=read_schema_version(conn),
        embedding_dim=None if dim is None else int(dim),
        embedding_model=value(conn, meta_sql.read(EMBEDDING_MODEL_KEY)),
    )


def row_count(conn: apsw.Connection) -> int:
    """Rows an export lists: every table's, the graph's and the notes' included."""
    rows = sum(table_count(conn, t) for t in TABLES) + notes.note_row_count(conn, notes_sql)
    if has_graph(conn):
        rows += sum(table_count(conn, t) for t in GRAPH_TABLES)
    return rows


# A scoped export holds the agent's data: its memories (``agent_id``), the sessions it
# started and their transcripts, the schedules of its memories and the promotion log of
# its memories live or forgotten, its forgetting-log rows, its notes, and the graph its
# memories assert. A file's graph rows carry no agent: a fact no memory asserts is left
# out (on a server every row has its scope).


def memory_ids(conn: apsw.Connection) -> set[str]:
    """Ids of every memory in every tier."""
    return set(column(conn, memory_sql.all_ids()))


def tier_of(conn: apsw.Connection, memory_id: str) -> Tier | None:
    """The tier that holds ``memory_id``, or ``None``."""
    name = value(conn, memory_sql.tier_of(memory_id))
    return None if name is None else Tier(name)


def has_promotion(conn: apsw.Connection, record: PromotionRecord) -> bool:
    """True if the log already holds this event (same memory, tiers and time)."""
    return row(conn, memory_sql.has_promotion(record)) is not None


def insert_promotion(conn: apsw.Connection, record: PromotionRecord, keep_id: bool) -> None:
    """Insert a promotion-log row as it was exported (a fresh id unless ``keep_id``)."""
    run(conn, memory_sql.insert_promotion(record, keep_id))


def _ids(scope: Scope, audited: bool = False) -> tuple[str, tuple[str, ...]]:
    """A subquery of the scope's live memory ids (``audited``: and its forgotten ones)."""
    live, agent = memory_sql.scoped_ids(scope)
    if not audited:
        return live, agent
    forgotten, agent_too = scope.condition()
    return f"{live} UNION ALL SELECT memory_id FROM forgetting_log WHERE {forgotten}", (
        *agent, *agent_too,
    )  # fmt: skip


def memory_page(
    conn: apsw.Connection, tier: Tier, after_rowid: int, limit: int, scope: Scope = WHOLE
) -> list[tuple[int, Memory]]:
    """The next ``limit`` memories of ``tier`` (in ``scope``) in insertion order, each
    with its rowid."""
    found = rows(conn, memory_sql.page_in_order(tier, after_rowid, limit, scope))
    return [(r[0], memory_sql.to_memory(r[1:])) for r in found]


def session_page(
    conn: apsw.Connection, after_id: str, limit: int, scope: Scope = WHOLE
) -> list[SessionState]:
    """The next ``limit`` sessions (of ``scope``) with id > ``after_id``."""
    found = rows(conn, session_sql.page(after_id, limit, scope.agent_id))
    return [session_sql.to_session(r) for r in found]


def transcript_page(
    conn: apsw.Connection, after_rowid: int, limit: int, scope: Scope = WHOLE
) -> list[tuple[int, TranscriptEntry]]:
    """The next ``limit`` transcript lines (of ``scope``'s sessions), with rowids."""
    found = rows(conn, session_sql.transcript_page(after_rowid, limit, scope.agent_id))
    return [session_sql.to_numbered_entry(r) for r in found]


def schedule_page(
    conn: apsw.Connection, after_id: str, limit: int, scope: Scope = WHOLE
) -> list[RepetitionSchedule]:
    """The next ``limit`` schedules (of ``scope``'s live memories) by memory id."""
    held = _ids(scope) if scope.scoped else None
    return [
        schedule_sql.to_schedule(r) for r in rows(conn, schedule_sql.page(after_id, limit, held))
    ]


def promotion_page(
    conn: apsw.Connection, after_id: int, limit: int, scope: Scope = WHOLE
) -> list[PromotionRecord]:
    """The next ``limit`` promotion-log rows (of ``scope``'s memories, live or forgotten)."""
    held = _ids(scope, audited=True) if scope.scoped else None
    found = rows(conn, memory_sql.promotion_page(after_id, limit, held))
    return [memory_sql.to_promotion(r) for r in found]


def forgetting_page(
    conn: apsw.Connection, after_id: int, limit: int, scope: Scope = WHOLE
) -> list[tuple[int, ForgettingRecord]]:
    """The next ``limit`` forgetting-log rows (of ``scope``), with their ids."""
    found = rows(conn, forgetting_sql.page(after_id, limit, scope.agent_id))
    return [forgetting_sql.to_numbered_record(r) for r in found]


def graph_pages(
    conn: apsw.Connection, table: str, size: int, scope: Scope = WHOLE
) -> Iterator[list[apsw.SQLiteValues]]:
    """One graph table's rows (those ``scope``'s memories assert) in pages of ``size``,
    in a stable order."""
    rows = graph_rows(conn, table, scope)
    while page := list(itertools.islice(rows, size)):
        yield page


def note_rows(conn: apsw.Connection, table: str, scope: Scope = WHOLE) -> list[tuple[Any, ...]]:
    """Every row of one note table (``scope``'s notes and its memories' content history)."""
    return notes.note_rows(conn, notes_sql, table, scope)


def table_count(conn: apsw.Connection, table: str) -> int:
    """How many rows ``table`` (one of the export's tables) holds."""
    if table not in TABLES and table not in GRAPH_FIELDS:
        raise ValueError(table)
    return int(query_value(conn, f"SELECT count(*) FROM {table}"))


def graph_rows(
    conn: apsw.Connection, table: str, scope: Scope = WHOLE
) -> Iterator[apsw.SQLiteValues]:
    """Every row of one graph table (those ``scope``'s memories assert), values in the
    export's field order, in a stable order."""
    names = GRAPH_FIELDS[table]
    mine, params = _graph_scope(table, scope)
    yield from conn.execute(
        f"SELECT {', '.join(names)} FROM {table} WHERE {mine} ORDER BY {_ORDER[table]}", params
    )


def _graph_scope(table: str, scope: Scope) -> tuple[str, tuple[str, ...]]:
    """The condition keeping a graph table's rows that ``scope``'s memories assert: their
    provenance and queue rows, the relations with that provenance, the entities those
    name or that provenance names, and their aliases."""
    if not scope.scoped:
        return "1 = 1", ()
    live, agent = _ids(scope)
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


def insert_graph_row(conn: apsw.Connection, table: str, row: Mapping[str, Any]) -> None:
    """Insert one document row into a graph table (true/false stored as 1/0)."""
    names = GRAPH_FIELDS[table]
    marks = ", ".join("?" for _ in names)
    values = [int(row[n]) if (table, n) in GRAPH_BOOLS else row[n] for n in names]
    conn.execute(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})", values)


def clear_graph(conn: apsw.Connection) -> None:
    """Empty every graph table (replace mode)."""
    for table in _CLEARED:
        conn.execute(f"DELETE FROM {table}")


def clear_schedules_and_forgetting_log(conn: apsw.Connection) -> None:
    """Empty ``repetition_schedules`` and ``forgetting_log`` (replace mode)."""
    conn.execute("DELETE FROM repetition_schedules")
    conn.execute("DELETE FROM forgetting_log")


def unqueue(conn: apsw.Connection, memory_ids: Iterable[str]) -> None:
    """Take these memories off the extraction queue."""
    conn.execute(
        "DELETE FROM graph_queue WHERE memory_id IN (SELECT value FROM json_each(?))",
        (orjson.dumps(sorted(set(memory_ids))).decode(),),
    )


def has_entity(conn: apsw.Connection, eid: str) -> bool:
    """True if an entity with this id exists."""
    return query_one(conn, "SELECT 1 FROM entities WHERE id = ?", (eid,)) is not None


def mark_direct(conn: apsw.Connection, eid: str, direct: bool) -> None:
    """An entity becomes direct if the document says so (never the other way)."""
    conn.execute("UPDATE entities SET direct = max(direct, ?) WHERE id = ?", (int(direct), eid))


def has_relation(conn: apsw.Connection, rid: str) -> bool:
    """True if a relation with this id exists."""
    return query_one(conn, "SELECT 1 FROM relations WHERE id = ?", (rid,)) is not None


def current_twin(conn: apsw.Connection, triple: Sequence[str]) -> str | None:
    """The id of the current relation ``subject -predicate-> object``, if there is one."""
    twin = query_one(
        conn,
        "SELECT id FROM relations WHERE subject_id = ? AND predicate = ? "
        "AND object_id = ? AND valid_to IS NULL",
        tuple(triple),
    )
    return None if twin is None else str(twin[0])


# --- import -----------------------------------------------------------------------------


def stored_embedding(conn: apsw.Connection) -> tuple[int | None, str | None]:
    """The file's embedding size and model (``None`` when not fixed yet)."""
    dim = value(conn, meta_sql.read(EMBEDDING_DIM_KEY))
    return (None if dim is None else int(dim)), value(conn, meta_sql.read(EMBEDDING_MODEL_KEY))


def prepare(conn: apsw.Connection, doc: ImportDocument, mode: Mode) -> None:
    """The embedding model and size become the document's (replace) or are fixed by it
    (where none is yet); replace empties the memories, sessions and logs."""
    stored_dim = value(conn, meta_sql.read(EMBEDDING_DIM_KEY))
    if mode == "replace" or value(conn, meta_sql.read(EMBEDDING_MODEL_KEY)) is None:
        run(conn, meta_sql.write(EMBEDDING_MODEL_KEY, doc.embedding_model))
    if mode == "replace":
        run_all(conn, memory_sql.delete_all())
        run_all(conn, session_sql.DELETE_ALL)
        clear_schedules_and_forgetting_log(conn)
        dim = doc.embedding_dim
        run(conn, meta_sql.write(EMBEDDING_DIM_KEY, None if dim is None else str(dim)))
    elif stored_dim is None and doc.embedding_dim is not None:
        run(conn, meta_sql.write(EMBEDDING_DIM_KEY, str(doc.embedding_dim)))


def add_redactions(conn: apsw.Connection, count: int) -> None:
    """Count ``count`` more secrets redacted before they reached the file (in the same
    transaction as the write they were removed from)."""
    if count:
        run(conn, meta_sql.add(REDACTIONS_KEY, count))


def upsert_session(conn: apsw.Connection, session: SessionState) -> None:
    run(conn, session_sql.upsert(session_sql.encode_row(session)))


def logs_written(conn: apsw.Connection) -> None:
    """Nothing to do: the logs' ids are the rowids written."""


def prepare_graph(
    conn: apsw.Connection, present: bool, mode: Mode, written: set[str], every: Sequence[str]
) -> bool:
    """Before the graph of an import: False if there is nothing more to write (a file
    without the graph; a document without one, whose new memories are queued for
    extraction). Replace empties the graph; the duplicate keys follow the memories."""
    if not has_graph(conn):
        return False
    memory_steps.rebuild_content_keys(conn)  # derived from the memories as imported
    if mode == "replace":
        clear_graph(conn)
    if not present:
        run_all(conn, graph_sql.enqueue(sorted(written if mode == "merge" else set(every))))
        graph_steps.collect_garbage(conn)
        return False
    return True


def collect(conn: apsw.Connection, entity_ids: Sequence[str], relation_ids: Sequence[str]) -> None:
    """Collect what a merge left unsupported."""
    graph_steps.collect(conn, entity_ids, relation_ids)
    graph_steps.collect_garbage(conn)


def has_notes(conn: apsw.Connection) -> bool:
    return notes.has_notes(conn, notes_sql)


def clear_notes(conn: apsw.Connection) -> None:
    notes.clear_notes(conn, notes_sql)


def insert_note_rows(conn: apsw.Connection, table: str, rows: Sequence[Sequence[Any]]) -> None:
    notes.insert_note_rows(conn, notes_sql, table, rows)


def import_problems(
    conn: apsw.Connection, doc: ImportDocument, mode: Mode, written: set[str]
) -> list[str]:
    """What the import would break (the first invariant that fails), or ``[]``."""
    for name in _INVARIANTS:
        problems = integrity_sql.CHECKS[name](conn)
        if problems:
            return list(problems)
    return []

"""The PostgreSQL engine's SQL of the JSON export and import
(:class:`~persistence.transfer.store_io.TransferSql`: the functions of the same names as
SQLite's :mod:`~persistence.sqlite.sql.json_io_sql`), and what backup and copy need:
pages of every table in its export order, row counts, whole-table clears for a replace,
log rows written with their ids, the graph tables row by row, and the checks an import
must pass before it commits.

Table and column names come from the closed lists below (and those of
:mod:`persistence.transfer`), never from a document; values are always parameters.
Functions run in the caller's transaction.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import psycopg

from migrations.sqlite import LATEST_VERSION as DOCUMENT_VERSION
from persistence.meta_keys import EMBEDDING_DIM_KEY, EMBEDDING_MODEL_KEY, REDACTIONS_KEY
from persistence.postgres import integrity as integrity_sql
from persistence.postgres import vector_column
from persistence.postgres.sql import (
    dedup_sql,
    graph_sql,
    memory_sql,
    meta_sql,
    notes_sql,
    schedule_sql,
    session_sql,
)
from persistence.records import (
    ForgettingRecord,
    Memory,
    PromotionRecord,
    RepetitionSchedule,
    SessionState,
    Tier,
    TranscriptEntry,
)
from persistence.statements import row, run, run_all, run_batch, value
from persistence.stores import graph_reads, notes
from persistence.stores.graph_rows import add_provenance as record_provenance
from persistence.stores.scope import WHOLE, Scope
from persistence.transfer.graph_io import GRAPH_FIELDS
from persistence.transfer.json_export import ExportHeader
from persistence.transfer.json_import import ImportDocument, Mode

# The functions of the shared names that the record families' SQL already has.


Connection = psycopg.Connection[Any]


def fetch_schedule(conn: Connection, memory_id: str) -> RepetitionSchedule | None:
    """The schedule of ``memory_id``, or ``None``."""
    found = row(conn, schedule_sql.fetch(memory_id))
    return None if found is None else schedule_sql.to_schedule(found)


def upsert_schedule(conn: Connection, schedule: RepetitionSchedule) -> None:
    """Insert or replace the schedule of one memory."""
    run(conn, schedule_sql.upsert(schedule))


def fetch_session(conn: Connection, session_id: str) -> SessionState | None:
    """The session, or ``None``."""
    found = row(conn, session_sql.fetch(session_id))
    return None if found is None else session_sql.to_session(found)
# --- the graph family's reads and writes (run over graph_sql's statements) ---------------


def has_entity(conn: Connection, eid: str) -> bool:
    return graph_reads.entity_exists(graph_sql, conn, eid)


def resolve(conn: Connection, norm: str, type_: str | None) -> str | None:
    return graph_reads.resolve(graph_sql, conn, norm, type_)


def drop_provenance(
    conn: Connection, memory_ids: Sequence[str], origin: str | None = None
) -> tuple[list[str], list[str]]:
    return graph_reads.drop_provenance(graph_sql, conn, memory_ids, origin)


def add_provenance(
    conn: Connection, memory_id: str, entity_ids: Iterable[str], relation_ids: Iterable[str],
    origin: str,
) -> None:  # fmt: skip
    record_provenance(graph_sql, conn, memory_id, entity_ids, relation_ids, origin)


def collect(conn: Connection, entity_ids: Sequence[str], relation_ids: Sequence[str]) -> None:
    run_all(conn, graph_sql.collect(entity_ids, relation_ids))


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


def header(conn: Connection) -> ExportHeader:
    """The document's schema version is the data model this code exports, numbered as
    the file chain numbers it (every field and the graph): a document does not say
    which engine wrote it."""
    dim = value(conn, meta_sql.read(EMBEDDING_DIM_KEY))
    return ExportHeader(
        schema_version=DOCUMENT_VERSION,
        embedding_dim=None if dim is None else int(dim),
        embedding_model=value(conn, meta_sql.read(EMBEDDING_MODEL_KEY)),
    )


def has_graph(conn: Connection) -> bool:
    """Every PostgreSQL schema has the graph (version 3)."""
    return True


def row_count(conn: Connection) -> int:
    """Rows an export lists: every table's, the graph's and the notes' included."""
    row = conn.execute(_COUNT_ALL).fetchone()
    assert row is not None
    return sum(int(n) for n in row) + notes.note_row_count(conn, notes_sql)


def counts(conn: Connection) -> dict[str, int]:
    """Rows per export table (one statement)."""
    row = conn.execute(_COUNT_ALL).fetchone()
    assert row is not None
    return {name: int(n) for name, n in zip(TABLE, row, strict=True)}


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


def memory_page(
    conn: Connection, tier: Tier, after_seq: int, limit: int, scope: Scope = WHOLE
) -> list[tuple[int, Memory]]:
    """The next ``limit`` memories of ``tier`` (in ``scope``) in insertion order
    (seq > ``after_seq``), each with its seq."""
    mine, agent = _mine(scope, "t.scope")
    rows = conn.execute(
        _MEMORY_PAGE.format(scope=mine), (tier.value, after_seq, *agent, limit)
    ).fetchall()
    return [(int(r[0]), memory_sql.to_memory(r[1:])) for r in rows]


_SESSION_COLUMNS = (
    "session_id, started_at, last_active_at, turn_number, active_agents, scratchpad_state, "
    "metadata, is_active, pending_compaction, ended_at"
)


def session_rows(
    conn: Connection, after_id: str, limit: int, scope: Scope = WHOLE
) -> list[tuple[Any, ...]]:
    """The next ``limit`` session rows (of ``scope``) by id (byte-wise) after ``after_id``."""
    mine, agent = _mine(scope)
    return conn.execute(
        f'SELECT {_SESSION_COLUMNS} FROM tm_sessions WHERE session_id COLLATE "C" > %s{mine} '
        'ORDER BY session_id COLLATE "C" LIMIT %s',
        (after_id, *agent, limit),
    ).fetchall()


def transcript_rows(
    conn: Connection, after_seq: int, limit: int, scope: Scope = WHOLE
) -> list[tuple[Any, ...]]:
    """The next ``limit`` transcript lines (of ``scope``) in insertion order: ``(seq, id,
    session_id, turn_number, role, content, timestamp, speaker)``."""
    mine, agent = _mine(scope)
    return conn.execute(
        "SELECT seq, id, session_id, turn_number, role, content, timestamp, speaker "
        f"FROM tm_transcripts WHERE seq > %s{mine} ORDER BY seq LIMIT %s",
        (after_seq, *agent, limit),
    ).fetchall()


def schedule_rows(
    conn: Connection, after_id: str, limit: int, scope: Scope = WHOLE
) -> list[tuple[Any, ...]]:
    """The next ``limit`` schedules (of ``scope``) by memory id (byte-wise) after
    ``after_id``."""
    mine, agent = _mine(scope)
    return conn.execute(
        "SELECT memory_id, next_review_at, interval_ms, review_count, ease_factor, "
        'stability_days, last_reviewed_at FROM tm_schedules WHERE memory_id COLLATE "C" > %s'
        f'{mine} ORDER BY memory_id COLLATE "C" LIMIT %s',
        (after_id, *agent, limit),
    ).fetchall()


def session_page(
    conn: Connection, after_id: str, limit: int, scope: Scope = WHOLE
) -> list[SessionState]:
    """The next ``limit`` sessions (of ``scope``) by id (byte-wise) after ``after_id``."""
    return [session_sql.to_session(r) for r in session_rows(conn, after_id, limit, scope)]


def transcript_page(
    conn: Connection, after_seq: int, limit: int, scope: Scope = WHOLE
) -> list[tuple[int, TranscriptEntry]]:
    """The next ``limit`` transcript lines (of ``scope``) in insertion order, with seqs."""
    rows = transcript_rows(conn, after_seq, limit, scope)
    return [(int(r[0]), TranscriptEntry(*r[1:])) for r in rows]


def schedule_page(
    conn: Connection, after_id: str, limit: int, scope: Scope = WHOLE
) -> list[RepetitionSchedule]:
    """The next ``limit`` schedules (of ``scope``) by memory id (byte-wise) after ``after_id``."""
    return [RepetitionSchedule(*r) for r in schedule_rows(conn, after_id, limit, scope)]


def promotion_page(
    conn: Connection, after_id: int, limit: int, scope: Scope = WHOLE
) -> list[PromotionRecord]:
    """The next ``limit`` promotion-log rows (of ``scope``) with id > ``after_id``."""
    mine, agent = _mine(scope)
    rows = conn.execute(
        "SELECT id, memory_id, from_tier, to_tier, promoted_at, reason FROM tm_promotion_log "
        f"WHERE id > %s{mine} ORDER BY id LIMIT %s",
        (after_id, *agent, limit),
    ).fetchall()
    return [PromotionRecord(r[0], r[1], Tier(r[2]), Tier(r[3]), r[4], r[5]) for r in rows]


def forgetting_page(
    conn: Connection, after_id: int, limit: int, scope: Scope = WHOLE
) -> list[tuple[int, ForgettingRecord]]:
    """The next ``limit`` forgetting-log rows (of ``scope``) with id > ``after_id``, with
    their ids."""
    mine, agent = _mine(scope)
    rows = conn.execute(
        "SELECT id, memory_id, tier, forgotten_at, retention, reason FROM tm_forgetting_log "
        f"WHERE id > %s{mine} ORDER BY id LIMIT %s",
        (after_id, *agent, limit),
    ).fetchall()
    return [(int(r[0]), ForgettingRecord(r[1], Tier(r[2]), r[3], r[4], r[5])) for r in rows]


def graph_rows(conn: Connection, table: str, scope: Scope = WHOLE) -> psycopg.Cursor[Any]:
    """Every row of one graph table (of ``scope``: on a server every graph row has one,
    a fact no memory asserts included), values in the export's field order, in a stable
    order (a cursor: read it in pages)."""
    names = ", ".join(GRAPH_FIELDS[table])
    mine, agent = scope.condition("scope", "%s")
    return conn.execute(
        f"SELECT {names} FROM {TABLE[table]} WHERE {mine} ORDER BY {_GRAPH_ORDER[table]}", agent
    )


def graph_pages(
    conn: Connection, table: str, size: int, scope: Scope = WHOLE
) -> Iterator[list[tuple[Any, ...]]]:
    """One graph table's rows (of ``scope``) in pages of ``size``, in a stable order."""
    cursor = graph_rows(conn, table, scope)
    while page := cursor.fetchmany(size):
        yield page


def note_rows(conn: Connection, table: str, scope: Scope = WHOLE) -> list[tuple[Any, ...]]:
    """Every row of one note table (of ``scope``), in export order."""
    return notes.note_rows(conn, notes_sql, table, scope)


# --- import writes --------------------------------------------------------------------


def has_notes(conn: Connection) -> bool:
    return notes.has_notes(conn, notes_sql)


def clear_notes(conn: Connection) -> None:
    notes.clear_notes(conn, notes_sql)


def insert_note_rows(conn: Connection, table: str, rows: Sequence[Sequence[Any]]) -> None:
    notes.insert_note_rows(conn, notes_sql, table, rows)


def clear_all(conn: Connection) -> None:
    """Empty every table an export lists (replace mode): memories with their vectors and
    keyword rows, sessions with their transcripts, schedules, logs, content keys, graph."""
    conn.execute("DELETE FROM tm_memories")
    for table in _CLEARED:
        conn.execute(f"DELETE FROM {table}")


def stored_embedding(conn: Connection) -> tuple[int | None, str | None]:
    """The store's embedding size and model (``None`` when not fixed yet)."""
    dim = value(conn, meta_sql.read(EMBEDDING_DIM_KEY))
    return (None if dim is None else int(dim)), value(conn, meta_sql.read(EMBEDDING_MODEL_KEY))


def prepare(conn: Connection, doc: ImportDocument, mode: Mode) -> None:
    """The embedding model becomes the document's (replace, or where none is yet); the
    store's vector size becomes the document's (replace) or is fixed by it (merge into a
    store without one), the vector column typed to match; replace empties every table."""
    if mode == "replace" or value(conn, meta_sql.read(EMBEDDING_MODEL_KEY)) is None:
        run(conn, meta_sql.write(EMBEDDING_MODEL_KEY, doc.embedding_model))
    stored = value(conn, meta_sql.read(EMBEDDING_DIM_KEY))
    wanted = None if doc.embedding_dim is None else str(doc.embedding_dim)
    if mode == "replace" and stored != wanted:
        conn.execute("DELETE FROM tm_vectors")  # the memories go anyway
        vector_column.drop_vector_index(conn)
        run(conn, meta_sql.write(EMBEDDING_DIM_KEY, wanted))
    elif mode == "merge" and stored is None and wanted is not None:
        run(conn, meta_sql.write(EMBEDDING_DIM_KEY, wanted))
    dim = value(conn, meta_sql.read(EMBEDDING_DIM_KEY))
    if dim is not None:
        vector_column.ensure_vector_index(conn, int(dim))
    if mode == "replace":
        clear_all(conn)


def memory_ids(conn: Connection) -> set[str]:
    """The id of every memory."""
    return {r[0] for r in conn.execute("SELECT id FROM tm_memories")}


def session_ids(conn: Connection) -> set[str]:
    """The id of every session."""
    return {r[0] for r in conn.execute("SELECT session_id FROM tm_sessions")}


def forgotten_ids(conn: Connection) -> set[str]:
    """The memory ids the forgetting log names."""
    return {r[0] for r in conn.execute("SELECT DISTINCT memory_id FROM tm_forgetting_log")}


def transcript_ids(conn: Connection) -> set[str]:
    """The id of every transcript line."""
    return {r[0] for r in conn.execute("SELECT id FROM tm_transcripts")}


def upsert_session(conn: Connection, session: SessionState) -> None:
    run(conn, session_sql.upsert(session_sql.encode_row(session)))


def insert_transcript(conn: Connection, e: TranscriptEntry) -> None:
    """Insert one transcript line as exported; its session is not touched."""
    conn.execute(
        "INSERT INTO tm_transcripts (id, session_id, turn_number, role, content, timestamp, "
        "speaker) VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (e.id, e.session_id, e.turn_number, e.role, e.content, e.timestamp, e.speaker),
    )


def insert_promotion(conn: Connection, record: PromotionRecord, keep_id: bool) -> None:
    """Insert a promotion-log row as exported (a fresh id unless ``keep_id``)."""
    values = (record.memory_id, record.from_tier.value, record.to_tier.value,
              record.promoted_at, record.reason)  # fmt: skip
    if keep_id:
        conn.execute(
            "INSERT INTO tm_promotion_log (id, memory_id, from_tier, to_tier, promoted_at, "
            "reason) OVERRIDING SYSTEM VALUE VALUES (%s, %s, %s, %s, %s, %s)",
            (record.id, *values),
        )
    else:
        conn.execute(
            "INSERT INTO tm_promotion_log (memory_id, from_tier, to_tier, promoted_at, reason) "
            "VALUES (%s, %s, %s, %s, %s)",
            values,
        )


def has_promotion(conn: Connection, record: PromotionRecord) -> bool:
    """True if the log holds this promotion (same memory, tiers and time)."""
    row = conn.execute(
        "SELECT 1 FROM tm_promotion_log WHERE memory_id = %s AND from_tier = %s "
        "AND to_tier = %s AND promoted_at = %s",
        (record.memory_id, record.from_tier.value, record.to_tier.value, record.promoted_at),
    ).fetchone()
    return row is not None


def insert_forgetting(conn: Connection, row_id: int | None, record: ForgettingRecord) -> None:
    """Insert a forgetting-log row as exported (``row_id=None``: a fresh id)."""
    values = (record.memory_id, record.tier.value, record.forgotten_at, record.retention,
              record.reason)  # fmt: skip
    if row_id is None:
        conn.execute(
            "INSERT INTO tm_forgetting_log (memory_id, tier, forgotten_at, retention, reason) "
            "VALUES (%s, %s, %s, %s, %s)",
            values,
        )
    else:
        conn.execute(
            "INSERT INTO tm_forgetting_log (id, memory_id, tier, forgotten_at, retention, "
            "reason) OVERRIDING SYSTEM VALUE VALUES (%s, %s, %s, %s, %s, %s)",
            (row_id, *values),
        )


def has_forgetting(conn: Connection, record: ForgettingRecord) -> bool:
    """True if the log holds this row (same memory, tier, time and reason)."""
    row = conn.execute(
        "SELECT 1 FROM tm_forgetting_log WHERE memory_id = %s AND tier = %s "
        "AND forgotten_at = %s AND reason = %s",
        (record.memory_id, record.tier.value, record.forgotten_at, record.reason),
    ).fetchone()
    return row is not None


_ADVANCE = (
    "SELECT setval(s.seq, x.m) FROM (SELECT pg_get_serial_sequence({t}, 'id')::regclass "
    "AS seq) AS s, (SELECT max(id) AS m FROM {table}) AS x "
    "WHERE x.m > coalesce(pg_sequence_last_value(s.seq), 0)"
)


def logs_written(conn: Connection) -> None:
    """After an import wrote the logs: move the id sequences of both logs past the ids
    written with their values, so the next row gets a new one (a sequence never goes
    back)."""
    for table in ("tm_promotion_log", "tm_forgetting_log"):
        conn.execute(_ADVANCE.format(t=f"'{table}'", table=table))


def unqueue(conn: Connection, memory_ids: Iterable[str]) -> None:
    """Take these memories off the extraction queue."""
    conn.execute("DELETE FROM tm_graph_queue WHERE memory_id = ANY(%s::text[])",
                 (sorted(set(memory_ids)),))  # fmt: skip


def clear_queue(conn: Connection) -> None:
    """Empty the extraction queue (the insert triggers filled it during a replace)."""
    conn.execute("DELETE FROM tm_graph_queue")


def insert_graph_row(conn: Connection, table: str, row: Mapping[str, Any]) -> None:
    """Insert one document row into a graph table (an alias gets its words)."""
    names = list(GRAPH_FIELDS[table])
    values = [row[n] for n in names]
    if table == "entity_aliases":
        names.append("tokens")
        values.append(_words(row["norm"]))
    marks = ", ".join("%s" for _ in names)
    conn.execute(f"INSERT INTO {TABLE[table]} ({', '.join(names)}) VALUES ({marks})", values)


def _words(norm: str) -> list[str]:
    return WORDS.findall(norm)


def has_relation(conn: Connection, rid: str) -> bool:
    """True if a relation with this id exists."""
    return conn.execute("SELECT 1 FROM tm_relations WHERE id = %s", (rid,)).fetchone() is not None


def mark_direct(conn: Connection, eid: str, direct: bool) -> None:
    """An entity becomes direct if the document says so (never the other way)."""
    conn.execute("UPDATE tm_entities SET direct = direct OR %s WHERE id = %s", (direct, eid))


def current_twin(conn: Connection, triple: Sequence[str]) -> str | None:
    """The id of the current relation ``subject -predicate-> object``, if there is one."""
    row = conn.execute(
        "SELECT id FROM tm_relations WHERE subject_id = %s AND predicate = %s "
        "AND object_id = %s AND valid_to IS NULL",
        tuple(triple),
    ).fetchone()
    return None if row is None else str(row[0])


def rebuild_content_keys(conn: Connection, memories: Sequence[Memory]) -> None:
    """Note the content keys of ``memories`` afresh (after a replace, all of them)."""
    run_batch(conn, dedup_sql.record(memories))


def tier_of(conn: Connection, memory_id: str) -> Tier | None:
    """The tier that holds ``memory_id``, or ``None``."""
    name = value(conn, memory_sql.tier_of(memory_id))
    return None if name is None else Tier(name)


_MAINTAINED = (
    "SELECT quote_ident(c.relname) FROM pg_class AS c JOIN pg_namespace AS n "
    "ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND c.relname LIKE 'tm\\_%%' "
    "AND n.nspname = current_schema() ORDER BY c.relname"
)


def maintained_tables(conn: Connection) -> list[str]:
    """The library's tables in the current schema, quoted for a ``VACUUM``."""
    return [str(r[0]) for r in conn.execute(_MAINTAINED)]


def add_redactions(conn: Connection, count: int) -> None:
    """Count ``count`` more secrets redacted before they reached the store."""
    run(conn, meta_sql.add(REDACTIONS_KEY, count))


def prepare_graph(
    conn: Connection, present: bool, mode: Mode, written: set[str], every: Sequence[str]
) -> bool:
    """Before the graph of an import: False without one in the document (the memories'
    insert triggers queued them for extraction: they stay queued); replace empties the
    extraction queue those triggers filled (the rest was emptied with the tables)."""
    if not present:
        return False
    if mode == "replace":
        clear_queue(conn)
    return True


def import_problems(
    conn: Connection, doc: ImportDocument, mode: Mode, written: set[str]
) -> list[str]:
    """The content keys of the memories written are made; then what the import would
    break (the first check that fails), or ``[]``."""
    memories = [m for _, m in doc.memories if mode == "replace" or m.id in written]
    rebuild_content_keys(conn, memories)
    for check in integrity_sql.IMPORT_CHECKS.values():
        problems = check(conn)
        if problems:
            return list(problems)
    return []

"""The JSON export and import on SQLite: the pages an export reads and the writes of an
import, behind the Protocols of :mod:`persistence.transfer`.

:func:`export_source` reads every table from one read transaction (a snapshot), page by
page with keyset paging. :func:`import_sink` writes a checked document in ONE write
transaction; a large import writes the memories with the index triggers off and
rebuilds the indexes once (:mod:`persistence.sqlite.bulk_index`), and the library's
invariants are checked before it commits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import apsw
import numpy as np

from migrations.sqlite import read_schema_version
from persistence.errors import InvalidImportError
from persistence.records import (
    ForgettingRecord,
    Memory,
    PromotionRecord,
    RepetitionSchedule,
    SessionState,
    Tier,
    TranscriptEntry,
)
from persistence.sqlite import bulk_index, graph_json_io
from persistence.sqlite.database import Database
from persistence.sqlite.sql import (
    forgetting_sql,
    graph_sql,
    index_sql,
    integrity_sql,
    json_io_sql,
    memory_sql,
    notes_sql,
    schedule_sql,
    session_sql,
)
from persistence.sqlite.sql.meta_sql import (
    EMBEDDING_DIM_KEY,
    EMBEDDING_MODEL_KEY,
    add_redactions,
    read_meta,
    write_meta,
)
from persistence.transfer.json_export import TABLES, ExportHeader
from persistence.transfer.json_import import Count, ImportDocument, Mode
from persistence.transfer.note_io import NOTE_TABLES

PAGE = 1000
BULK_AT = 1_000  # memories; fewer: row-by-row index triggers are cheap enough

# Checked inside the import's transaction; a failure rolls everything back.
_INVARIANTS = (
    "foreign_key_check", "one_tier_per_memory", "schedules_point_at_memories",
    "tags_point_at_memories", "promotion_log_points_at_memories",
    "promotion_log_agrees_with_tiers", "embedding_sizes", "graph_invariants",
)  # fmt: skip


# --- export ---------------------------------------------------------------------------


def _pages(
    fetch: Callable[[Any], list[Any]], key: Callable[[Any], Any], start: Any
) -> Iterator[Any]:
    after = start
    while page := fetch(after):
        yield page
        after = key(page[-1])


def _first(row: tuple[Any, ...]) -> Any:
    return row[0]


def _second(rows: Iterator[list[tuple[Any, Any]]]) -> Iterator[list[Any]]:
    for page in rows:
        yield [record for _, record in page]


class SQLiteExportSource:
    """The tables of one SQLite connection as an export reads them (an
    :class:`~persistence.transfer.json_export.ExportSource`); the caller holds the read
    transaction that makes every page come from one snapshot."""

    def __init__(self, conn: apsw.Connection, page: int = PAGE) -> None:
        self._conn = conn
        self._page = page

    @property
    def page_size(self) -> int:
        """Records per page."""
        return self._page

    def header(self) -> ExportHeader:
        dim = read_meta(self._conn, EMBEDDING_DIM_KEY)
        return ExportHeader(
            schema_version=read_schema_version(self._conn),
            embedding_dim=None if dim is None else int(dim),
            embedding_model=read_meta(self._conn, EMBEDDING_MODEL_KEY),
        )

    def row_count(self) -> int:
        rows = sum(json_io_sql.row_count(self._conn, t) for t in TABLES)
        return rows + graph_json_io.row_count(self._conn) + notes_sql.row_count(self._conn)

    def has_graph(self) -> bool:
        return graph_sql.has_graph(self._conn)

    def memories(self, tier: Tier) -> Iterator[list[Memory]]:
        conn, size = self._conn, self._page
        return _second(_pages(lambda a: memory_sql.page_in_order(conn, tier, a, size), _first, 0))

    def sessions(self) -> Iterator[list[SessionState]]:
        conn, size = self._conn, self._page
        return _pages(lambda a: session_sql.page(conn, a, size), lambda s: s.session_id, "")

    def transcripts(self) -> Iterator[list[TranscriptEntry]]:
        conn, size = self._conn, self._page
        return _second(_pages(lambda a: session_sql.transcript_page(conn, a, size), _first, 0))

    def schedules(self) -> Iterator[list[RepetitionSchedule]]:
        conn, size = self._conn, self._page
        return _pages(lambda a: schedule_sql.page(conn, a, size), lambda r: r.memory_id, "")

    def promotions(self) -> Iterator[list[PromotionRecord]]:
        conn, size = self._conn, self._page
        return _pages(lambda a: memory_sql.promotion_page(conn, a, size), lambda p: p.id, 0)

    def forgotten(self) -> Iterator[list[tuple[int, ForgettingRecord]]]:
        conn, size = self._conn, self._page
        return _pages(lambda a: forgetting_sql.page(conn, a, size), _first, 0)

    def graph_rows(self, table: str) -> Iterator[list[apsw.SQLiteValues]]:
        return graph_json_io.pages(self._conn, table, self._page)

    def has_notes(self) -> bool:
        return notes_sql.has_notes(self._conn)

    def note_rows(self, table: str) -> Iterator[list[tuple[Any, ...]]]:
        rows = notes_sql.table_rows(self._conn, table, None)
        return iter([rows] if rows else [])


@contextmanager
def export_source(conn: apsw.Connection) -> Iterator[SQLiteExportSource]:
    """The tables of ``conn`` from one snapshot: inside its read transaction, or one
    opened here for the block."""
    own_transaction = not conn.in_transaction
    if own_transaction:
        conn.execute("BEGIN")
    try:
        yield SQLiteExportSource(conn)
    finally:
        if own_transaction:
            conn.execute("COMMIT")


# --- import ---------------------------------------------------------------------------


class SQLiteImportSink:
    """Writes a checked document through one connection inside its write transaction
    (an :class:`~persistence.transfer.json_import.ImportSink`)."""

    def __init__(self, conn: apsw.Connection) -> None:
        self._conn = conn

    def stored_embedding(self) -> tuple[int | None, str | None]:
        dim = read_meta(self._conn, EMBEDDING_DIM_KEY)
        return (None if dim is None else int(dim)), read_meta(self._conn, EMBEDDING_MODEL_KEY)

    def memory_ids(self) -> set[str]:
        return memory_sql.all_ids(self._conn)

    def session_ids(self) -> set[str]:
        return session_sql.session_ids(self._conn)

    def forgotten_ids(self) -> set[str]:
        return forgetting_sql.forgotten_ids(self._conn)

    def write(self, doc: ImportDocument, mode: Mode, redacted: int, count: Count) -> None:
        conn = self._conn
        stored_dim = read_meta(conn, EMBEDDING_DIM_KEY)
        if mode == "replace" or read_meta(conn, EMBEDDING_MODEL_KEY) is None:
            write_meta(conn, EMBEDDING_MODEL_KEY, doc.embedding_model)
        if mode == "replace":
            memory_sql.delete_all(conn)
            session_sql.delete_all(conn)
            json_io_sql.clear_schedules_and_forgetting_log(conn)
            write_meta(conn, EMBEDDING_DIM_KEY, _dim_text(doc.embedding_dim))
        elif stored_dim is None and doc.embedding_dim is not None:
            write_meta(conn, EMBEDDING_DIM_KEY, str(doc.embedding_dim))

        written = self._write_memories(doc, mode, count)
        self._write_sessions(doc, mode, count)
        self._write_schedules(doc, mode, written, count)
        self._write_logs(doc, mode, written, count)
        add_redactions(conn, redacted)
        all_memories = [m.id for _, m in doc.memories]
        graph_json_io.write_graph(conn, doc.graph, mode, written, all_memories, count)
        self._write_notes(doc, mode, count)
        for name in _INVARIANTS:
            problems = integrity_sql.CHECKS[name](conn)
            if problems:
                raise InvalidImportError(
                    "$", f"would leave the database inconsistent: {problems[0]}"
                )

    def _write_notes(self, doc: ImportDocument, mode: Mode, count: Count) -> None:
        """The document's notes: replace mode holds exactly them; merge replaces a note
        of the same id with the document's (see :mod:`persistence.transfer.note_io`)."""
        conn = self._conn
        if mode == "replace" and notes_sql.has_notes(conn):
            notes_sql.clear(conn)
        if not doc.notes.present:
            return
        for table in NOTE_TABLES:
            rows = doc.notes.rows[table]
            notes_sql.insert_rows(conn, table, rows)
            for _ in rows:
                count(table, "inserted")

    def _write_memories(self, doc: ImportDocument, mode: Mode, count: Count) -> set[str]:
        """Write the memories; return the ids whose document version was written."""
        conn = self._conn
        written: set[str] = set()
        # Most of the file is new: rebuilding the indexes once beats row-by-row triggers.
        bulk = len(doc.memories) >= BULK_AT and len(doc.memories) >= index_sql.memory_count(conn)
        with bulk_index.triggers_suspended(conn) if bulk else nullcontext():
            for _, memory in doc.memories:
                outcome = _put_memory(conn, memory, mode)
                if outcome != "skipped":
                    written.add(memory.id)
                count(memory.tier.value, outcome)
        return written

    def _write_sessions(self, doc: ImportDocument, mode: Mode, count: Count) -> None:
        conn = self._conn
        for _, session in doc.sessions:
            current = session_sql.fetch(conn, session.session_id) if mode == "merge" else None
            if current is not None and session.last_active_at <= current.last_active_at:
                count("sessions", "skipped")
                continue
            session_sql.upsert(conn, session_sql.encode_row(session))
            count("sessions", "inserted" if current is None else "updated")
        known_lines = session_sql.transcript_ids(conn) if mode == "merge" else set()
        for _, entry in doc.transcripts:
            if entry.id in known_lines:
                count("session_transcripts", "skipped")
                continue
            session_sql.insert_transcript(conn, entry)
            count("session_transcripts", "inserted")

    def _write_schedules(
        self, doc: ImportDocument, mode: Mode, written: set[str], count: Count
    ) -> None:
        conn = self._conn
        for _, schedule in doc.schedules:
            current = schedule_sql.fetch(conn, schedule.memory_id) if mode == "merge" else None
            if schedule.memory_id not in written and (
                current is not None or memory_sql.tier_of(conn, schedule.memory_id) is None
            ):
                count("repetition_schedules", "skipped")
                continue
            schedule_sql.upsert(conn, schedule)
            count("repetition_schedules", "inserted" if current is None else "updated")

    def _write_logs(self, doc: ImportDocument, mode: Mode, written: set[str], count: Count) -> None:
        conn = self._conn
        for _, record in doc.promotions:
            # Merging keeps the file's history of a memory whose file version was kept;
            # the history of a forgotten memory joins unless the file already has it.
            if mode == "merge" and (
                memory_sql.has_promotion(conn, record)
                or (
                    record.memory_id not in written
                    and memory_sql.tier_of(conn, record.memory_id) is not None
                )
            ):
                count("promotion_log", "skipped")
                continue
            memory_sql.insert_promotion(conn, record, keep_id=mode == "replace")
            count("promotion_log", "inserted")
        for _, row_id, forgotten in doc.forgotten:
            if mode == "merge" and forgetting_sql.contains(conn, forgotten):
                count("forgetting_log", "skipped")
                continue
            forgetting_sql.insert(conn, row_id if mode == "replace" else None, forgotten)
            count("forgetting_log", "inserted")


@contextmanager
def import_sink(db: Database) -> Iterator[SQLiteImportSink]:
    """One write transaction on ``db`` and the sink that writes in it (an
    :data:`~persistence.transfer.json_import.OpenSink`)."""
    with db.transaction() as conn:
        yield SQLiteImportSink(conn)


def _dim_text(dim: int | None) -> str | None:
    return None if dim is None else str(dim)


def _put_memory(conn: apsw.Connection, memory: Memory, mode: Mode) -> str:
    """Write one memory; in merge mode the newer of two versions wins (by updated_at)."""
    blob = None if memory.embedding is None else np.asarray(memory.embedding, "<f4").tobytes()
    row = memory_sql.encode_row(memory, blob)
    if mode == "replace":
        memory_sql.upsert(conn, memory, row)
        return "inserted"
    current_tier = memory_sql.tier_of(conn, memory.id)
    current = None if current_tier is None else memory_sql.fetch(conn, current_tier, memory.id)
    if current is not None and memory.updated_at <= current.updated_at:
        return "skipped"
    rival = memory_sql.fetch_by_key(conn, memory.key) if memory.key is not None else None
    if rival is not None and rival.id != memory.id:
        if rival.updated_at >= memory.updated_at:
            return "skipped"
        memory_sql.delete(conn, Tier.SCRATCHPAD, rival.id)
    if current_tier is None:
        memory_sql.upsert(conn, memory, row)
        return "inserted"
    if current_tier is not memory.tier:
        memory_sql.remove_row(conn, current_tier, memory.id)
    memory_sql.upsert(conn, memory, row)
    return "updated"

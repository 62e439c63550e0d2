"""The JSON export's reading and the import's writing, written once for both engines.

:class:`StoreExportSource` reads every table page by page (keyset paging); the caller
holds the snapshot that makes every page come from one moment. :class:`StoreImportSink`
writes a checked document inside the import's one write transaction; the memories
themselves are written by the engine's :data:`MemoryWriter` (SQLite rebuilds its
indexes once for a large import, PostgreSQL inserts in batches). Each engine hands over
two modules of functions of the same names: its ``sql/`` module BUILDS the statements
both engines run alike (:class:`TransferStatements`, run here with
:mod:`persistence.statements`), and its steps module takes the steps that engine takes
its own way, each taking the connection first (:class:`TransferSteps`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from persistence.engine import Connection
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
from persistence.statements import Statement, run_all, stream
from persistence.stores.scope import WHOLE, Scope
from persistence.transfer.graph_write import GraphWriteStatements, GraphWriteSteps, write_graph
from persistence.transfer.json_export import ExportHeader
from persistence.transfer.json_import import Count, ImportDocument, Mode
from persistence.transfer.note_io import NOTE_TABLES

PAGE = 1000


def pages(
    fetch: Callable[[Any], list[Any]], key: Callable[[Any], Any], start: Any
) -> Iterator[Any]:
    """``fetch(after)`` page after page, ``after`` the ``key`` of the last record read."""
    after = start
    while page := fetch(after):
        yield page
        after = key(page[-1])


def records(keyed: Iterator[list[tuple[Any, Any]]]) -> Iterator[list[Any]]:
    """Pages of ``(key, record)`` as pages of records."""
    for page in keyed:
        yield [record for _, record in page]


def first(row: Sequence[Any]) -> Any:
    return row[0]


class ExportStatements(Protocol):
    """The export's statements both engines build alike."""

    def graph_rows(self, table: str, scope: Scope) -> Statement: ...


class ExportSteps(Protocol):
    """The engine's own reads of an export."""

    def header(self, conn: Connection) -> ExportHeader: ...
    def row_count(self, conn: Connection) -> int: ...
    def has_graph(self, conn: Connection) -> bool: ...
    def memory_page(
        self, conn: Connection, tier: Tier, after: int, limit: int, scope: Scope
    ) -> list[tuple[int, Memory]]: ...
    def session_page(
        self, conn: Connection, after: str, limit: int, scope: Scope
    ) -> list[SessionState]: ...
    def transcript_page(
        self, conn: Connection, after: int, limit: int, scope: Scope
    ) -> list[tuple[int, TranscriptEntry]]: ...
    def schedule_page(
        self, conn: Connection, after: str, limit: int, scope: Scope
    ) -> list[RepetitionSchedule]: ...
    def promotion_page(
        self, conn: Connection, after: int, limit: int, scope: Scope
    ) -> list[PromotionRecord]: ...
    def forgetting_page(
        self, conn: Connection, after: int, limit: int, scope: Scope
    ) -> list[tuple[int, ForgettingRecord]]: ...
    def has_notes(self, conn: Connection) -> bool: ...
    def note_rows(self, conn: Connection, table: str, scope: Scope) -> list[tuple[Any, ...]]: ...


class ImportStatements(GraphWriteStatements, Protocol):
    """The import's statements both engines build alike."""

    def logs_written(self) -> Sequence[Statement]: ...


class ImportSteps(GraphWriteSteps, Protocol):
    """The engine's own reads and writes of an import (inside its write transaction)."""

    def stored_embedding(self, conn: Connection) -> tuple[int | None, str | None]: ...
    def memory_ids(self, conn: Connection) -> set[str]: ...
    def session_ids(self, conn: Connection) -> set[str]: ...
    def forgotten_ids(self, conn: Connection) -> set[str]: ...
    def prepare(self, conn: Connection, doc: ImportDocument, mode: Mode) -> None: ...
    def fetch_session(self, conn: Connection, session_id: str) -> SessionState | None: ...
    def upsert_session(self, conn: Connection, session: SessionState) -> None: ...
    def transcript_ids(self, conn: Connection) -> set[str]: ...
    def insert_transcript(self, conn: Connection, entry: TranscriptEntry) -> None: ...
    def fetch_schedule(self, conn: Connection, memory_id: str) -> RepetitionSchedule | None: ...
    def upsert_schedule(self, conn: Connection, schedule: RepetitionSchedule) -> None: ...
    def tier_of(self, conn: Connection, memory_id: str) -> Tier | None: ...
    def has_promotion(self, conn: Connection, record: PromotionRecord) -> bool: ...
    def insert_promotion(
        self, conn: Connection, record: PromotionRecord, keep_id: bool
    ) -> None: ...
    def has_forgetting(self, conn: Connection, record: ForgettingRecord) -> bool: ...
    def insert_forgetting(
        self, conn: Connection, row_id: int | None, record: ForgettingRecord
    ) -> None: ...
    def add_redactions(self, conn: Connection, count: int) -> None: ...
    def prepare_graph(
        self, conn: Connection, present: bool, mode: Mode, written: set[str], every: Sequence[str]
    ) -> bool: ...
    def has_notes(self, conn: Connection) -> bool: ...
    def clear_notes(self, conn: Connection) -> None: ...
    def insert_note_rows(
        self, conn: Connection, table: str, rows: Sequence[tuple[Any, ...]]
    ) -> None: ...
    def import_problems(
        self, conn: Connection, doc: ImportDocument, mode: Mode, written: set[str]
    ) -> list[str]: ...


class TransferStatements(ExportStatements, ImportStatements, Protocol):
    """The statements of the JSON export and import an engine's ``sql/`` module builds
    (SQLite: :mod:`persistence.sqlite.sql.json_io_sql`; PostgreSQL:
    :mod:`persistence.postgres.sql.transfer_sql`)."""


class TransferSteps(ExportSteps, ImportSteps, Protocol):
    """The steps of the JSON export and import an engine takes its own way (SQLite:
    :mod:`persistence.sqlite.transfer_steps`; PostgreSQL:
    :mod:`persistence.postgres.transfer_steps`)."""


MemoryWriter = Callable[[Connection, ImportDocument, Mode, Count], set[str]]
"""The engine's writing of the document's memories: the ids whose version was written."""


class StoreExportSource:
    """The tables of one connection as an export reads them (an
    :class:`~persistence.transfer.json_export.ExportSource`); ``scope``: an agent-scoped
    handle's export holds its agent's rows only (the engine's SQL carries the scope's
    predicate; :meth:`row_count` stays the whole store's, an upper bound)."""

    def __init__(
        self,
        conn: Connection,
        sql: ExportStatements,
        steps: ExportSteps,
        page: int = PAGE,
        scope: Scope = WHOLE,
    ) -> None:
        self._conn = conn
        self._sql = sql
        self._steps = steps
        self._page = page
        self._scope = scope

    @property
    def page_size(self) -> int:
        """Records per page."""
        return self._page

    def header(self) -> ExportHeader:
        return self._steps.header(self._conn)

    def row_count(self) -> int:
        return self._steps.row_count(self._conn)

    def has_graph(self) -> bool:
        return self._steps.has_graph(self._conn)

    def memories(self, tier: Tier) -> Iterator[list[Memory]]:
        conn, steps, size, scope = self._conn, self._steps, self._page, self._scope
        return records(pages(lambda a: steps.memory_page(conn, tier, a, size, scope), first, 0))

    def sessions(self) -> Iterator[list[SessionState]]:
        conn, steps, size, scope = self._conn, self._steps, self._page, self._scope
        return pages(lambda a: steps.session_page(conn, a, size, scope), lambda s: s.session_id, "")

    def transcripts(self) -> Iterator[list[TranscriptEntry]]:
        conn, steps, size, scope = self._conn, self._steps, self._page, self._scope
        return records(pages(lambda a: steps.transcript_page(conn, a, size, scope), first, 0))

    def schedules(self) -> Iterator[list[RepetitionSchedule]]:
        conn, steps, size, scope = self._conn, self._steps, self._page, self._scope
        return pages(lambda a: steps.schedule_page(conn, a, size, scope), lambda r: r.memory_id, "")

    def promotions(self) -> Iterator[list[PromotionRecord]]:
        conn, steps, size, scope = self._conn, self._steps, self._page, self._scope
        return pages(lambda a: steps.promotion_page(conn, a, size, scope), lambda p: p.id, 0)

    def forgotten(self) -> Iterator[list[tuple[int, ForgettingRecord]]]:
        conn, steps, size, scope = self._conn, self._steps, self._page, self._scope
        return pages(lambda a: steps.forgetting_page(conn, a, size, scope), first, 0)

    def graph_rows(self, table: str) -> Iterator[list[Any]]:
        """One graph table's rows in pages, read from one cursor in a stable order."""
        found = stream(self._conn, self._sql.graph_rows(table, self._scope))
        while page := list(itertools.islice(found, self._page)):
            yield page

    def has_notes(self) -> bool:
        return self._steps.has_notes(self._conn)

    def note_rows(self, table: str) -> Iterator[list[tuple[Any, ...]]]:
        rows = self._steps.note_rows(self._conn, table, self._scope)
        return iter([rows] if rows else [])


class StoreImportSink:
    """Writes a checked document through the connection of one write transaction (an
    :class:`~persistence.transfer.json_import.ImportSink`)."""

    def __init__(
        self,
        conn: Connection,
        sql: ImportStatements,
        steps: ImportSteps,
        write_memories: MemoryWriter,
    ) -> None:
        self._conn = conn
        self._sql = sql
        self._steps = steps
        self._write_memories = write_memories

    def stored_embedding(self) -> tuple[int | None, str | None]:
        return self._steps.stored_embedding(self._conn)

    def memory_ids(self) -> set[str]:
        return self._steps.memory_ids(self._conn)

    def session_ids(self) -> set[str]:
        return self._steps.session_ids(self._conn)

    def forgotten_ids(self) -> set[str]:
        return self._steps.forgotten_ids(self._conn)

    def write(self, doc: ImportDocument, mode: Mode, redacted: int, count: Count) -> None:
        conn, steps = self._conn, self._steps
        steps.prepare(conn, doc, mode)  # the embedding model and size; replace empties
        written = self._write_memories(conn, doc, mode, count)
        self._write_sessions(doc, mode, count)
        self._write_schedules(doc, mode, written, count)
        self._write_logs(doc, mode, written, count)
        if redacted:
            steps.add_redactions(conn, redacted)
        every = [m.id for _, m in doc.memories]
        if steps.prepare_graph(conn, doc.graph.present, mode, written, every):
            write_graph(conn, self._sql, steps, doc.graph, mode, written, count)
        self._write_notes(doc, mode, count)
        problems = steps.import_problems(conn, doc, mode, written)  # a failure rolls all back
        if problems:
            raise InvalidImportError("$", f"would leave the database inconsistent: {problems[0]}")

    def _write_notes(self, doc: ImportDocument, mode: Mode, count: Count) -> None:
        """The document's notes: replace mode holds exactly them; merge replaces a note
        of the same id with the document's (see :mod:`persistence.transfer.note_io`)."""
        conn, steps = self._conn, self._steps
        if mode == "replace" and steps.has_notes(conn):
            steps.clear_notes(conn)
        if not doc.notes.present:
            return
        for table in NOTE_TABLES:
            rows = doc.notes.rows[table]
            steps.insert_note_rows(conn, table, rows)
            for _ in rows:
                count(table, "inserted")

    def _write_sessions(self, doc: ImportDocument, mode: Mode, count: Count) -> None:
        conn, steps = self._conn, self._steps
        for _, session in doc.sessions:
            current = steps.fetch_session(conn, session.session_id) if mode == "merge" else None
            if current is not None and session.last_active_at <= current.last_active_at:
                count("sessions", "skipped")
                continue
            steps.upsert_session(conn, session)
            count("sessions", "inserted" if current is None else "updated")
        known = steps.transcript_ids(conn) if mode == "merge" else set()
        for _, entry in doc.transcripts:
            if entry.id in known:
                count("session_transcripts", "skipped")
                continue
            steps.insert_transcript(conn, entry)
            count("session_transcripts", "inserted")

    def _write_schedules(
        self, doc: ImportDocument, mode: Mode, written: set[str], count: Count
    ) -> None:
        conn, steps = self._conn, self._steps
        for _, schedule in doc.schedules:
            current = steps.fetch_schedule(conn, schedule.memory_id) if mode == "merge" else None
            if schedule.memory_id not in written and (
                current is not None or steps.tier_of(conn, schedule.memory_id) is None
            ):
                count("repetition_schedules", "skipped")
                continue
            steps.upsert_schedule(conn, schedule)
            count("repetition_schedules", "inserted" if current is None else "updated")

    def _write_logs(self, doc: ImportDocument, mode: Mode, written: set[str], count: Count) -> None:
        conn, steps = self._conn, self._steps
        for _, record in doc.promotions:
            # Merging keeps the store's history of a memory whose stored version was kept;
            # the history of a forgotten memory joins unless the store already has it.
            if mode == "merge" and (
                steps.has_promotion(conn, record)
                or (
                    record.memory_id not in written
                    and steps.tier_of(conn, record.memory_id) is not None
                )
            ):
                count("promotion_log", "skipped")
                continue
            steps.insert_promotion(conn, record, keep_id=mode == "replace")
            count("promotion_log", "inserted")
        for _, row_id, forgotten in doc.forgotten:
            if mode == "merge" and steps.has_forgetting(conn, forgotten):
                count("forgetting_log", "skipped")
                continue
            steps.insert_forgetting(conn, row_id if mode == "replace" else None, forgotten)
            count("forgetting_log", "inserted")
        run_all(conn, self._sql.logs_written())

"""The JSON export's reading and the import's writing, written once for both engines.

:class:`StoreExportSource` reads every table page by page (keyset paging); the caller
holds the snapshot that makes every page come from one moment. :class:`StoreImportSink`
writes a checked document inside the import's one write transaction; the memories
themselves are written by the engine's :data:`MemoryWriter` (SQLite rebuilds its
indexes once for a large import, PostgreSQL inserts in batches). Each engine hands over
its builders (:class:`TransferSql`: its transfer ``sql/`` module, :class:`TransferStatements`,
and the record families' modules), run here with :mod:`persistence.statements`, and a
module of the few steps it takes its own way, each taking the connection first
(:class:`TransferSteps`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar

from persistence.engine import Connection
from persistence.errors import InvalidImportError
from persistence.meta_keys import EMBEDDING_DIM_KEY, EMBEDDING_MODEL_KEY, REDACTIONS_KEY
from persistence.records import (
    ForgettingRecord,
    Memory,
    PromotionRecord,
    RepetitionSchedule,
    SessionState,
    Tier,
    TranscriptEntry,
)
from persistence.statements import Row, Statement, column, row, rows, run, run_all, stream, value
from persistence.stores import graph_reads, notes
from persistence.stores.facts import MetaSql
from persistence.stores.graph_engine import Collect, GraphSql
from persistence.stores.memory_builders import MemorySql
from persistence.stores.notes import NotesSql
from persistence.stores.schedules import ScheduleSql
from persistence.stores.scope import WHOLE, Scope
from persistence.stores.sessions import SessionSql
from persistence.transfer.graph_write import GraphWriteStatements, write_graph
from persistence.transfer.json_export import ExportHeader
from persistence.transfer.json_import import Count, ImportDocument, Mode
from persistence.transfer.note_io import NOTE_TABLES

PAGE = 1000

T = TypeVar("T")


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


def first(found: Sequence[Any]) -> Any:
    return found[0]


def embedding(conn: Connection, meta: MetaSql) -> tuple[int | None, str | None]:
    """The store's embedding size and model (``None`` when not fixed yet)."""
    dim = value(conn, meta.read(EMBEDDING_DIM_KEY))
    model = value(conn, meta.read(EMBEDDING_MODEL_KEY))
    return (None if dim is None else int(dim)), (None if model is None else str(model))


class ExportStatements(Protocol):
    """The export's statements both engines build alike, and their decoders."""

    def row_counts(self, graph: bool) -> Sequence[Statement]: ...
    def memory_page(self, tier: Tier, after: int, limit: int, scope: Scope) -> Statement: ...
    def to_memory_page(self, found: Sequence[Row]) -> list[tuple[int, Memory]]: ...
    def session_page(self, after: str, limit: int, scope: Scope) -> Statement: ...
    def to_sessions(self, found: Sequence[Row]) -> list[SessionState]: ...
    def transcript_page(self, after: int, limit: int, scope: Scope) -> Statement: ...
    def to_transcripts(self, found: Sequence[Row]) -> list[tuple[int, TranscriptEntry]]: ...
    def schedule_page(self, after: str, limit: int, scope: Scope) -> Statement: ...
    def to_schedules(self, found: Sequence[Row]) -> list[RepetitionSchedule]: ...
    def promotion_page(self, after: int, limit: int, scope: Scope) -> Statement: ...
    def to_promotions(self, found: Sequence[Row]) -> list[PromotionRecord]: ...
    def forgetting_page(self, after: int, limit: int, scope: Scope) -> Statement: ...
    def to_forgotten(self, found: Sequence[Row]) -> list[tuple[int, ForgettingRecord]]: ...
    def graph_rows(self, table: str, scope: Scope) -> Statement: ...


class ImportStatements(GraphWriteStatements, Protocol):
    """The import's statements both engines build alike."""

    def memory_ids(self) -> Statement: ...
    def session_ids(self) -> Statement: ...
    def forgotten_ids(self) -> Statement: ...
    def transcript_ids(self) -> Statement: ...
    def insert_transcript(self, entry: TranscriptEntry) -> Statement: ...
    def has_promotion(self, record: PromotionRecord) -> Statement: ...
    def insert_promotion(self, record: PromotionRecord, keep_id: bool) -> Statement: ...
    def has_forgetting(self, record: ForgettingRecord) -> Statement: ...
    def insert_forgetting(self, row_id: int | None, record: ForgettingRecord) -> Statement: ...
    def logs_written(self) -> Sequence[Statement]: ...


class TransferStatements(ExportStatements, ImportStatements, Protocol):
    """The statements of the JSON export and import an engine's transfer ``sql/`` module
    builds (SQLite: :mod:`persistence.sqlite.sql.json_io_sql`; PostgreSQL:
    :mod:`persistence.postgres.sql.transfer_sql`)."""


class TransferSql(NamedTuple):
    """An engine's builders a transfer runs: its own and the record families'."""

    transfer: TransferStatements
    memories: MemorySql
    sessions: SessionSql
    schedules: ScheduleSql
    meta: MetaSql
    notes: NotesSql
    graph: GraphSql


class ExportSteps(Protocol):
    """The engine's own read of an export."""

    def schema_version(self, conn: Connection) -> int: ...


class ImportSteps(Protocol):
    """The engine's own steps of an import (inside its write transaction)."""

    def prepare(self, conn: Connection, doc: ImportDocument, mode: Mode) -> None: ...
    def prepare_graph(
        self, conn: Connection, present: bool, mode: Mode, written: set[str], every: Sequence[str]
    ) -> bool: ...
    def collect(
        self, conn: Connection, entity_ids: Sequence[str], relation_ids: Sequence[str]
    ) -> None: ...
    def import_problems(
        self, conn: Connection, doc: ImportDocument, mode: Mode, written: set[str]
    ) -> list[str]: ...


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
        sql: TransferSql,
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
        dim, model = embedding(self._conn, self._sql.meta)
        return ExportHeader(self._steps.schema_version(self._conn), dim, model)

    def row_count(self) -> int:
        """Rows an export lists: every table's, the graph's and the notes' included."""
        conn, sql = self._conn, self._sql
        found = (row(conn, s) or () for s in sql.transfer.row_counts(self.has_graph()))
        return sum(int(n) for counted in found for n in counted) + notes.note_row_count(
            conn, sql.notes
        )

    def has_graph(self) -> bool:
        return graph_reads.has_graph(self._sql.graph, self._conn)

    def _pages(
        self,
        build: Callable[[Any, int, Scope], Statement],
        decode: Callable[[Sequence[Row]], list[T]],
        key: Callable[[T], Any],
        start: Any,
    ) -> Iterator[list[T]]:
        conn, size, scope = self._conn, self._page, self._scope
        return pages(lambda a: decode(rows(conn, build(a, size, scope))), key, start)

    def memories(self, tier: Tier) -> Iterator[list[Memory]]:
        sql = self._sql.transfer

        def build(after: int, size: int, scope: Scope) -> Statement:
            return sql.memory_page(tier, after, size, scope)

        return records(self._pages(build, sql.to_memory_page, first, 0))

    def sessions(self) -> Iterator[list[SessionState]]:
        sql = self._sql.transfer
        return self._pages(sql.session_page, sql.to_sessions, lambda s: s.session_id, "")

    def transcripts(self) -> Iterator[list[TranscriptEntry]]:
        sql = self._sql.transfer
        return records(self._pages(sql.transcript_page, sql.to_transcripts, first, 0))

    def schedules(self) -> Iterator[list[RepetitionSchedule]]:
        sql = self._sql.transfer
        return self._pages(sql.schedule_page, sql.to_schedules, lambda r: r.memory_id, "")

    def promotions(self) -> Iterator[list[PromotionRecord]]:
        sql = self._sql.transfer
        return self._pages(sql.promotion_page, sql.to_promotions, lambda p: p.id, 0)

    def forgotten(self) -> Iterator[list[tuple[int, ForgettingRecord]]]:
        sql = self._sql.transfer
        return self._pages(sql.forgetting_page, sql.to_forgotten, first, 0)

    def graph_rows(self, table: str) -> Iterator[list[Any]]:
        """One graph table's rows in pages, read from one cursor in a stable order."""
        found = stream(self._conn, self._sql.transfer.graph_rows(table, self._scope))
        while page := list(itertools.islice(found, self._page)):
            yield page

    def has_notes(self) -> bool:
        return notes.has_notes(self._conn, self._sql.notes)

    def note_rows(self, table: str) -> Iterator[list[tuple[Any, ...]]]:
        found = notes.note_rows(self._conn, self._sql.notes, table, self._scope)
        return iter([found] if found else [])


class StoreImportSink:
    """Writes a checked document through the connection of one write transaction (an
    :class:`~persistence.transfer.json_import.ImportSink`)."""

    def __init__(
        self,
        conn: Connection,
        sql: TransferSql,
        steps: ImportSteps,
        write_memories: MemoryWriter,
    ) -> None:
        self._conn = conn
        self._sql = sql
        self._steps = steps
        self._write_memories = write_memories

    def stored_embedding(self) -> tuple[int | None, str | None]:
        return embedding(self._conn, self._sql.meta)

    def _ids(self, statement: Statement) -> set[str]:
        return set(column(self._conn, statement))

    def memory_ids(self) -> set[str]:
        return self._ids(self._sql.transfer.memory_ids())

    def session_ids(self) -> set[str]:
        return self._ids(self._sql.transfer.session_ids())

    def forgotten_ids(self) -> set[str]:
        return self._ids(self._sql.transfer.forgotten_ids())

    def write(self, doc: ImportDocument, mode: Mode, redacted: int, count: Count) -> None:
        conn, sql, steps = self._conn, self._sql, self._steps
        steps.prepare(conn, doc, mode)  # the embedding model and size; replace empties
        written = self._write_memories(conn, doc, mode, count)
        self._write_sessions(doc, mode, count)
        self._write_schedules(doc, mode, written, count)
        self._write_logs(doc, mode, written, count)
        if redacted:  # counted in the same transaction as the write they were removed from
            run(conn, sql.meta.add(REDACTIONS_KEY, redacted))
        every = [m.id for _, m in doc.memories]
        if steps.prepare_graph(conn, doc.graph.present, mode, written, every):
            collect: Collect = steps.collect
            write_graph(conn, sql.transfer, sql.graph, collect, doc.graph, mode, written, count)
        self._write_notes(doc, mode, count)
        problems = steps.import_problems(conn, doc, mode, written)  # a failure rolls all back
        if problems:
            raise InvalidImportError("$", f"would leave the database inconsistent: {problems[0]}")

    def _write_notes(self, doc: ImportDocument, mode: Mode, count: Count) -> None:
        """The document's notes: replace mode holds exactly them; merge replaces a note
        of the same id with the document's (see :mod:`persistence.transfer.note_io`)."""
        conn, sql = self._conn, self._sql.notes
        if mode == "replace" and notes.has_notes(conn, sql):
            notes.clear_notes(conn, sql)
        if not doc.notes.present:
            return
        for table in NOTE_TABLES:
            found = doc.notes.rows[table]
            notes.insert_note_rows(conn, sql, table, found)
            for _ in found:
                count(table, "inserted")

    def _write_sessions(self, doc: ImportDocument, mode: Mode, count: Count) -> None:
        conn, sql = self._conn, self._sql
        for _, session in doc.sessions:
            current = None
            if mode == "merge" and (held := row(conn, sql.sessions.fetch(session.session_id))):
                current = sql.sessions.to_session(held)
            if current is not None and session.last_active_at <= current.last_active_at:
                count("sessions", "skipped")
                continue
            run(conn, sql.sessions.upsert(sql.sessions.encode_row(session)))
            count("sessions", "inserted" if current is None else "updated")
        known = self._ids(sql.transfer.transcript_ids()) if mode == "merge" else set()
        for _, entry in doc.transcripts:
            if entry.id in known:
                count("session_transcripts", "skipped")
                continue
            run(conn, sql.transfer.insert_transcript(entry))
            count("session_transcripts", "inserted")

    def _held(self, memory_id: str) -> bool:
        """True if a tier holds ``memory_id``."""
        return value(self._conn, self._sql.memories.tier_of(memory_id)) is not None

    def _write_schedules(
        self, doc: ImportDocument, mode: Mode, written: set[str], count: Count
    ) -> None:
        conn, sql = self._conn, self._sql.schedules
        for _, schedule in doc.schedules:
            current = None
            if mode == "merge" and (held := row(conn, sql.fetch(schedule.memory_id))):
                current = sql.to_schedule(held)
            if schedule.memory_id not in written and (
                current is not None or not self._held(schedule.memory_id)
            ):
                count("repetition_schedules", "skipped")
                continue
            run(conn, sql.upsert(schedule))
            count("repetition_schedules", "inserted" if current is None else "updated")

    def _write_logs(self, doc: ImportDocument, mode: Mode, written: set[str], count: Count) -> None:
        conn, sql = self._conn, self._sql.transfer
        for _, record in doc.promotions:
            # Merging keeps the store's history of a memory whose stored version was kept;
            # the history of a forgotten memory joins unless the store already has it.
            if mode == "merge" and (
                row(conn, sql.has_promotion(record)) is not None
                or (record.memory_id not in written and self._held(record.memory_id))
            ):
                count("promotion_log", "skipped")
                continue
            run(conn, sql.insert_promotion(record, keep_id=mode == "replace"))
            count("promotion_log", "inserted")
        for _, row_id, forgotten in doc.forgotten:
            if mode == "merge" and row(conn, sql.has_forgetting(forgotten)) is not None:
                count("forgetting_log", "skipped")
                continue
            run(conn, sql.insert_forgetting(row_id if mode == "replace" else None, forgotten))
            count("forgetting_log", "inserted")
        run_all(conn, sql.logs_written())

"""The JSON export and import on PostgreSQL: the pages an export reads and the writes of
an import, behind the Protocols of :mod:`persistence.transfer` (the twin of
:mod:`persistence.sqlite.json_io`).

:func:`export_source` reads every table from one ``REPEATABLE READ READ ONLY``
transaction (a snapshot), page by page with keyset paging. :func:`import_sink` writes a
checked document in ONE write transaction; identity columns (the logs' ids) are written
with ``OVERRIDING SYSTEM VALUE`` and their sequences moved past them, and the library's
invariants are checked before it commits (the keyword window is rebuilt at COMMIT by
the recall index's deferred trigger).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import numpy as np
import psycopg

from migrations.sqlite import LATEST_VERSION as DOCUMENT_VERSION
from persistence.errors import InvalidImportError
from persistence.meta_keys import EMBEDDING_DIM_KEY, EMBEDDING_MODEL_KEY, REDACTIONS_KEY
from persistence.postgres.database import Connection, PgDatabase
from persistence.postgres.sql import (
    graph_sql,
    integrity_sql,
    memory_sql,
    meta_sql,
    notes_sql,
    schedule_sql,
    session_sql,
    transfer_sql,
    vector_sql,
)
from persistence.postgres.translate import call_error
from persistence.records import (
    ForgettingRecord,
    Memory,
    PromotionRecord,
    RepetitionSchedule,
    SessionState,
    Tier,
    TranscriptEntry,
)
from persistence.transfer.graph_io import GRAPH_TABLES, GraphDocument
from persistence.transfer.json_export import ExportHeader
from persistence.transfer.json_import import Count, ImportDocument, Mode
from persistence.transfer.note_io import NOTE_TABLES

PAGE = 1000


def _pages(
    fetch: Callable[[Any], list[Any]], key: Callable[[Any], Any], start: Any
) -> Iterator[list[Any]]:
    after = start
    while page := fetch(after):
        yield page
        after = key(page[-1])


def _records(pages: Iterator[list[tuple[Any, Any]]]) -> Iterator[list[Any]]:
    for page in pages:
        yield [record for _, record in page]


def _first(row: Any) -> Any:
    return row[0]


class PgExportSource:
    """The tables of one PostgreSQL connection as an export reads them (an
    :class:`~persistence.transfer.json_export.ExportSource`); the caller holds the
    snapshot transaction that makes every page come from one moment."""

    def __init__(self, conn: Connection, page: int = PAGE) -> None:
        self._conn = conn
        self._page = page

    def header(self) -> ExportHeader:
        """The document's schema version is the data model this code exports, numbered as
        the file chain numbers it (every field and the graph): a document does not say
        which engine wrote it."""
        dim = meta_sql.read(self._conn, EMBEDDING_DIM_KEY)
        return ExportHeader(
            schema_version=DOCUMENT_VERSION,
            embedding_dim=None if dim is None else int(dim),
            embedding_model=meta_sql.read(self._conn, EMBEDDING_MODEL_KEY),
        )

    def row_count(self) -> int:
        return transfer_sql.row_count(self._conn) + notes_sql.row_count(self._conn)

    def has_graph(self) -> bool:
        return True  # every PostgreSQL schema has it (version 3)

    def memories(self, tier: Tier) -> Iterator[list[Memory]]:
        conn, size = self._conn, self._page
        return _records(_pages(lambda a: transfer_sql.memory_page(conn, tier, a, size), _first, 0))

    def sessions(self) -> Iterator[list[SessionState]]:
        conn, size = self._conn, self._page
        rows = _pages(lambda a: transfer_sql.session_rows(conn, a, size), _first, "")
        return ([session_sql.to_session(r) for r in page] for page in rows)

    def transcripts(self) -> Iterator[list[TranscriptEntry]]:
        conn, size = self._conn, self._page
        rows = _pages(lambda a: transfer_sql.transcript_rows(conn, a, size), _first, 0)
        return ([TranscriptEntry(*r[1:]) for r in page] for page in rows)

    def schedules(self) -> Iterator[list[RepetitionSchedule]]:
        conn, size = self._conn, self._page
        rows = _pages(lambda a: transfer_sql.schedule_rows(conn, a, size), _first, "")
        return ([RepetitionSchedule(*r) for r in page] for page in rows)

    def promotions(self) -> Iterator[list[PromotionRecord]]:
        conn, size = self._conn, self._page
        return _pages(lambda a: transfer_sql.promotion_page(conn, a, size), lambda p: p.id, 0)

    def forgotten(self) -> Iterator[list[tuple[int, ForgettingRecord]]]:
        conn, size = self._conn, self._page
        return _pages(lambda a: transfer_sql.forgetting_page(conn, a, size), _first, 0)

    def graph_rows(self, table: str) -> Iterator[list[tuple[Any, ...]]]:
        cursor = transfer_sql.graph_rows(self._conn, table)
        while page := cursor.fetchmany(self._page):
            yield page

    def has_notes(self) -> bool:
        return notes_sql.has_notes(self._conn)

    def note_rows(self, table: str) -> Iterator[list[tuple[Any, ...]]]:
        rows = notes_sql.table_rows(self._conn, table)
        return iter([rows] if rows else [])


@contextmanager
def export_source(db: PgDatabase) -> Iterator[PgExportSource]:
    """Every table from one snapshot: inside this thread's transaction its view, else a
    ``REPEATABLE READ READ ONLY`` transaction of its own for the block."""
    with db.reading() as conn:
        own = not db.in_transaction
        try:
            if own:
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield PgExportSource(conn)
        except psycopg.Error as exc:
            raise call_error(exc, db._url) from None
        finally:
            if own and not conn.closed:
                with suppress(psycopg.Error):  # a broken connection: the pool drops it
                    conn.execute("ROLLBACK")


# --- import ---------------------------------------------------------------------------


class PgImportSink:
    """Writes a checked document through the connection of one write transaction (an
    :class:`~persistence.transfer.json_import.ImportSink`)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def stored_embedding(self) -> tuple[int | None, str | None]:
        dim = meta_sql.read(self._conn, EMBEDDING_DIM_KEY)
        return (None if dim is None else int(dim)), meta_sql.read(self._conn, EMBEDDING_MODEL_KEY)

    def memory_ids(self) -> set[str]:
        return transfer_sql.all_ids(self._conn)

    def session_ids(self) -> set[str]:
        return transfer_sql.session_ids(self._conn)

    def forgotten_ids(self) -> set[str]:
        return transfer_sql.forgotten_ids(self._conn)

    def write(self, doc: ImportDocument, mode: Mode, redacted: int, count: Count) -> None:
        conn = self._conn
        if mode == "replace" or meta_sql.read(conn, EMBEDDING_MODEL_KEY) is None:
            meta_sql.write(conn, EMBEDDING_MODEL_KEY, doc.embedding_model)
        self._fix_dimension(doc, mode)
        if mode == "replace":
            transfer_sql.clear_all(conn)
        written = self._write_memories(doc, mode, count)
        self._write_sessions(doc, mode, count)
        self._write_schedules(doc, mode, written, count)
        self._write_logs(doc, mode, written, count)
        if redacted:
            meta_sql.add(conn, REDACTIONS_KEY, redacted)
        self._write_graph(doc.graph, mode, written, count)
        self._write_notes(doc, mode, count)
        if mode == "replace":
            transfer_sql.rebuild_content_keys(conn, [m for _, m in doc.memories])
        else:
            transfer_sql.rebuild_content_keys(conn, [m for _, m in doc.memories if m.id in written])
        for check in integrity_sql.IMPORT_CHECKS.values():  # a failure rolls all back
            problems = check(conn)
            if problems:
                raise InvalidImportError(
                    "$", f"would leave the database inconsistent: {problems[0]}"
                )

    def _write_notes(self, doc: ImportDocument, mode: Mode, count: Count) -> None:
        """The document's notes: replace mode holds exactly them; merge replaces a note
        of the same id with the document's (see :mod:`persistence.transfer.note_io`)."""
        conn = self._conn
        if mode == "replace":
            notes_sql.clear(conn)
        if not doc.notes.present:
            return
        for table in NOTE_TABLES:
            rows = doc.notes.rows[table]
            notes_sql.insert_rows(conn, table, rows)
            for _ in rows:
                count(table, "inserted")

    def _fix_dimension(self, doc: ImportDocument, mode: Mode) -> None:
        """The store's vector size becomes the document's (replace) or is fixed by it
        (merge into a store without one); the vector column is typed to match."""
        conn = self._conn
        stored = meta_sql.read(conn, EMBEDDING_DIM_KEY)
        wanted = None if doc.embedding_dim is None else str(doc.embedding_dim)
        if mode == "replace" and stored != wanted:
            conn.execute("DELETE FROM tm_vectors")  # the memories go anyway
            vector_sql.drop_vector_index(conn)
            meta_sql.write(conn, EMBEDDING_DIM_KEY, wanted)
        elif mode == "merge" and stored is None and wanted is not None:
            meta_sql.write(conn, EMBEDDING_DIM_KEY, wanted)
        dim = meta_sql.read(conn, EMBEDDING_DIM_KEY)
        if dim is not None:
            vector_sql.ensure_vector_index(conn, int(dim))

    def _write_memories(self, doc: ImportDocument, mode: Mode, count: Count) -> set[str]:
        """Write the memories in document order; return the ids whose document version
        was written."""
        written: set[str] = set()
        rows: list[tuple[Any, ...]] = []
        vectors: list[tuple[str, np.ndarray]] = []
        for _, memory in doc.memories:
            vector = _vector(memory)
            if mode == "replace":
                rows.append(memory_sql.encode_row(memory))
                if vector is not None:
                    vectors.append((memory.id, vector))
                outcome = "inserted"
            else:
                outcome = self._merge_memory(memory, vector)
            if outcome != "skipped":
                written.add(memory.id)
            count(memory.tier.value, outcome)
        if rows:
            memory_sql.insert_many(self._conn, rows, vectors)
        return written

    def _merge_memory(self, memory: Memory, vector: np.ndarray | None) -> str:
        """Write one memory unless the stored version is as new (by ``updated_at``); a
        scratchpad key held by an older memory moves to this one."""
        conn = self._conn
        current = memory_sql.fetch(conn, None, memory.id)
        if current is not None and memory.updated_at <= current.updated_at:
            return "skipped"
        if memory.key is not None and memory.tier is Tier.SCRATCHPAD:
            rival = memory_sql.fetch_by_key(conn, memory.key)
            if rival is not None and rival.id != memory.id:
                if rival.updated_at >= memory.updated_at:
                    return "skipped"
                memory_sql.forget_rows(conn, [rival.id], None, Tier.SCRATCHPAD, None, None)
        memory_sql.upsert(conn, memory_sql.encode_row(memory), vector)
        return "inserted" if current is None else "updated"

    def _write_sessions(self, doc: ImportDocument, mode: Mode, count: Count) -> None:
        conn = self._conn
        for _, session in doc.sessions:
            current = session_sql.fetch(conn, session.session_id) if mode == "merge" else None
            if current is not None and session.last_active_at <= current.last_active_at:
                count("sessions", "skipped")
                continue
            session_sql.upsert(conn, session_sql.encode_row(session))
            count("sessions", "inserted" if current is None else "updated")
        known = transfer_sql.transcript_ids(conn) if mode == "merge" else set()
        for _, e in doc.transcripts:
            if e.id in known:
                count("session_transcripts", "skipped")
                continue
            transfer_sql.insert_transcript(
                conn, (e.id, e.session_id, e.turn_number, e.role, e.content, e.timestamp,
                       e.speaker)
            )  # fmt: skip
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
            # the history of a forgotten memory joins unless the store already has it.
            if mode == "merge" and (
                transfer_sql.has_promotion(conn, record)
                or (
                    record.memory_id not in written
                    and memory_sql.tier_of(conn, record.memory_id) is not None
                )
            ):
                count("promotion_log", "skipped")
                continue
            transfer_sql.insert_promotion(conn, record, keep_id=mode == "replace")
            count("promotion_log", "inserted")
        for _, row_id, forgotten in doc.forgotten:
            if mode == "merge" and transfer_sql.has_forgetting(conn, forgotten):
                count("forgetting_log", "skipped")
                continue
            transfer_sql.insert_forgetting(conn, row_id if mode == "replace" else None, forgotten)
            count("forgetting_log", "inserted")
        transfer_sql.advance_log_ids(conn)

    # --- the knowledge graph --------------------------------------------------------------

    def _write_graph(self, doc: GraphDocument, mode: Mode, written: set[str], count: Count) -> None:
        """The document's graph, after its memories (whose insert triggers queued them for
        extraction: without a graph in the document they stay queued)."""
        conn = self._conn
        if not doc.present:
            return
        if mode == "replace":
            transfer_sql.clear_queue(conn)
            for table in GRAPH_TABLES:
                for _, row in doc.rows[table]:
                    transfer_sql.insert_graph_row(conn, table, row)
                    count(table, "inserted")
            return
        self._merge_graph(doc, written, count)

    def _merge_graph(self, doc: GraphDocument, written: set[str], count: Count) -> None:
        conn = self._conn
        touched_entities: list[str] = []
        touched_relations: list[str] = []
        if written:  # the document's version of these memories won: their old facts go
            touched_entities, touched_relations = graph_sql.drop_provenance(conn, sorted(written))
            transfer_sql.unqueue(conn, written)
        entity_map: dict[str, str] = {}
        for _, row in doc.rows["entities"]:
            if not graph_sql.entity_exists(conn, row["id"]):
                transfer_sql.insert_graph_row(conn, "entities", row)
                count("entities", "inserted")
            else:
                transfer_sql.mark_direct(conn, row["id"], row["direct"])
                count("entities", "skipped")
            entity_map[row["id"]] = row["id"]
        for _, row in doc.rows["entity_aliases"]:
            found = graph_sql.resolve(conn, row["norm"], row["type"])
            if found is None:
                transfer_sql.insert_graph_row(conn, "entity_aliases", row)
                count("entity_aliases", "inserted")
            else:
                count("entity_aliases", "skipped")
                if found != row["entity_id"]:
                    entity_map[row["entity_id"]] = found  # the name is the store's entity's
        relation_map: dict[str, str] = {}
        for _, row in doc.rows["relations"]:
            subject = entity_map.get(row["subject_id"], row["subject_id"])
            obj = entity_map.get(row["object_id"], row["object_id"])
            twin = row["id"] if transfer_sql.has_relation(conn, row["id"]) else None
            if twin is None and row["valid_to"] is None:
                twin = transfer_sql.current_twin(conn, (subject, row["predicate"], obj))
            if twin is not None:
                relation_map[row["id"]] = twin
                count("relations", "skipped")
                continue
            transfer_sql.insert_graph_row(
                conn, "relations", {**row, "subject_id": subject, "object_id": obj}
            )
            relation_map[row["id"]] = row["id"]
            touched_relations.append(row["id"])
            count("relations", "inserted")
        for _, row in doc.rows["memory_entities"]:
            if row["memory_id"] not in written:
                count("memory_entities", "skipped")
                continue
            eid = entity_map.get(row["entity_id"], row["entity_id"])
            graph_sql.add_provenance(conn, row["memory_id"], [eid], [], row["origin"])
            count("memory_entities", "inserted")
        for _, row in doc.rows["memory_relations"]:
            if row["memory_id"] not in written:
                count("memory_relations", "skipped")
                continue
            rid = relation_map[row["relation_id"]]
            graph_sql.add_provenance(conn, row["memory_id"], [], [rid], row["origin"])
            touched_relations.append(rid)
            count("memory_relations", "inserted")
        for _, row in doc.rows["graph_queue"]:
            if row["memory_id"] not in written:
                count("graph_queue", "skipped")
                continue
            transfer_sql.insert_graph_row(conn, "graph_queue", row)
            count("graph_queue", "inserted")
        graph_sql.collect(conn, [*touched_entities, *entity_map.values()], touched_relations)


@contextmanager
def import_sink(db: PgDatabase) -> Iterator[PgImportSink]:
    """One write transaction on ``db`` and the sink that writes in it (an
    :data:`~persistence.transfer.json_import.OpenSink`); server errors translated."""
    with db.transaction() as conn:
        try:
            yield PgImportSink(conn)
        except psycopg.Error as exc:
            raise call_error(exc, db._url) from None


def _vector(memory: Memory) -> np.ndarray | None:
    if memory.embedding is None:
        return None
    return np.asarray(memory.embedding, dtype=np.float32)

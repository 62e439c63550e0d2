"""The PostgreSQL engine's steps of the JSON export and import
(:class:`~persistence.transfer.store_io.TransferSteps`: the functions of the same names as
:mod:`persistence.sqlite.transfer_steps`): what this engine does its own way, each taking
the connection first. They run the statements :mod:`~persistence.postgres.sql.transfer_sql`
builds (one statement for every table's count, pages in byte-wise order, log rows written
with their ids) or the record families' own SQL; what both engines do alike runs once
in :mod:`persistence.transfer.store_io`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from persistence.meta_keys import EMBEDDING_DIM_KEY, EMBEDDING_MODEL_KEY, REDACTIONS_KEY
from persistence.postgres.database import Connection
from persistence.postgres.sql import (
    dedup_sql,
    integrity_sql,
    meta_sql,
    notes_sql,
    schedule_sql,
    session_sql,
    transfer_sql,
    vector_sql,
)
from persistence.postgres.sql.graph_sql import add_provenance as add_provenance
from persistence.postgres.sql.graph_sql import collect as collect
from persistence.postgres.sql.graph_sql import drop_provenance as drop_provenance
from persistence.postgres.sql.graph_sql import resolve as resolve
from persistence.postgres.sql.memory_sql import tier_of as tier_of
from persistence.postgres.sql.notes_sql import has_notes as has_notes
from persistence.records import (
    ForgettingRecord,
    Memory,
    PromotionRecord,
    RepetitionSchedule,
    SessionState,
    Tier,
    TranscriptEntry,
)
from persistence.statements import column, row, rows, run, run_all
from persistence.stores.scope import WHOLE, Scope
from persistence.transfer.json_export import DOCUMENT_VERSION, ExportHeader
from persistence.transfer.json_import import ImportDocument, Mode

# The steps of the shared names that the record families' SQL already has.
clear_notes = notes_sql.clear
insert_note_rows = notes_sql.insert_rows
fetch_schedule = schedule_sql.fetch
upsert_schedule = schedule_sql.upsert
fetch_session = session_sql.fetch

# --- export -----------------------------------------------------------------------------


def header(conn: Connection) -> ExportHeader:
    """The document's schema version is the data model this code exports, numbered as
    the file chain numbers it (every field and the graph): a document does not say
    which engine wrote it."""
    dim = meta_sql.read(conn, EMBEDDING_DIM_KEY)
    return ExportHeader(
        schema_version=DOCUMENT_VERSION,
        embedding_dim=None if dim is None else int(dim),
        embedding_model=meta_sql.read(conn, EMBEDDING_MODEL_KEY),
    )


def has_graph(conn: Connection) -> bool:
    """Every PostgreSQL schema has the graph (version 3)."""
    return True


def row_count(conn: Connection) -> int:
    """Rows an export lists: every table's, the graph's and the notes' included."""
    found = row(conn, transfer_sql.count_all())
    assert found is not None
    return sum(int(n) for n in found) + notes_sql.row_count(conn)


def memory_page(
    conn: Connection, tier: Tier, after_seq: int, limit: int, scope: Scope = WHOLE
) -> list[tuple[int, Memory]]:
    """The next ``limit`` memories of ``tier`` (in ``scope``) in insertion order
    (seq > ``after_seq``), each with its seq."""
    return transfer_sql.to_memory_page(
        rows(conn, transfer_sql.memory_page(tier, after_seq, limit, scope))
    )


def session_page(
    conn: Connection, after_id: str, limit: int, scope: Scope = WHOLE
) -> list[SessionState]:
    """The next ``limit`` sessions (of ``scope``) by id (byte-wise) after ``after_id``."""
    return transfer_sql.to_sessions(rows(conn, transfer_sql.session_page(after_id, limit, scope)))


def transcript_page(
    conn: Connection, after_seq: int, limit: int, scope: Scope = WHOLE
) -> list[tuple[int, TranscriptEntry]]:
    """The next ``limit`` transcript lines (of ``scope``) in insertion order, with seqs."""
    found = rows(conn, transfer_sql.transcript_page(after_seq, limit, scope))
    return transfer_sql.to_transcripts(found)


def schedule_page(
    conn: Connection, after_id: str, limit: int, scope: Scope = WHOLE
) -> list[RepetitionSchedule]:
    """The next ``limit`` schedules (of ``scope``) by memory id (byte-wise) after ``after_id``."""
    found = rows(conn, transfer_sql.schedule_page(after_id, limit, scope))
    return transfer_sql.to_schedules(found)


def promotion_page(
    conn: Connection, after_id: int, limit: int, scope: Scope = WHOLE
) -> list[PromotionRecord]:
    """The next ``limit`` promotion-log rows (of ``scope``) with id > ``after_id``."""
    found = rows(conn, transfer_sql.promotion_page(after_id, limit, scope))
    return transfer_sql.to_promotions(found)


def forgetting_page(
    conn: Connection, after_id: int, limit: int, scope: Scope = WHOLE
) -> list[tuple[int, ForgettingRecord]]:
    """The next ``limit`` forgetting-log rows (of ``scope``) with id > ``after_id``, with
    their ids."""
    found = rows(conn, transfer_sql.forgetting_page(after_id, limit, scope))
    return transfer_sql.to_forgotten(found)


def note_rows(conn: Connection, table: str, scope: Scope = WHOLE) -> list[tuple[Any, ...]]:
    """Every row of one note table (of ``scope``), in export order."""
    return notes_sql.table_rows(conn, table, scope)


# --- import -----------------------------------------------------------------------------


def stored_embedding(conn: Connection) -> tuple[int | None, str | None]:
    """The store's embedding size and model (``None`` when not fixed yet)."""
    dim = meta_sql.read(conn, EMBEDDING_DIM_KEY)
    return (None if dim is None else int(dim)), meta_sql.read(conn, EMBEDDING_MODEL_KEY)


def prepare(conn: Connection, doc: ImportDocument, mode: Mode) -> None:
    """The embedding model becomes the document's (replace, or where none is yet); the
    store's vector size becomes the document's (replace) or is fixed by it (merge into a
    store without one), the vector column typed to match; replace empties every table."""
    if mode == "replace" or meta_sql.read(conn, EMBEDDING_MODEL_KEY) is None:
        meta_sql.write(conn, EMBEDDING_MODEL_KEY, doc.embedding_model)
    stored = meta_sql.read(conn, EMBEDDING_DIM_KEY)
    wanted = None if doc.embedding_dim is None else str(doc.embedding_dim)
    if mode == "replace" and stored != wanted:
        run(conn, transfer_sql.clear_vectors())  # the memories go anyway
        vector_sql.drop_vector_index(conn)
        meta_sql.write(conn, EMBEDDING_DIM_KEY, wanted)
    elif mode == "merge" and stored is None and wanted is not None:
        meta_sql.write(conn, EMBEDDING_DIM_KEY, wanted)
    dim = meta_sql.read(conn, EMBEDDING_DIM_KEY)
    if dim is not None:
        vector_sql.ensure_vector_index(conn, int(dim))
    if mode == "replace":
        run_all(conn, transfer_sql.clear_all())


def memory_ids(conn: Connection) -> set[str]:
    """The id of every memory."""
    return set(column(conn, transfer_sql.memory_ids()))


def session_ids(conn: Connection) -> set[str]:
    """The id of every session."""
    return set(column(conn, transfer_sql.session_ids()))


def forgotten_ids(conn: Connection) -> set[str]:
    """The memory ids the forgetting log names."""
    return set(column(conn, transfer_sql.forgotten_ids()))


def transcript_ids(conn: Connection) -> set[str]:
    """The id of every transcript line."""
    return set(column(conn, transfer_sql.transcript_ids()))


def upsert_session(conn: Connection, session: SessionState) -> None:
    session_sql.upsert(conn, session_sql.encode_row(session))


def insert_transcript(conn: Connection, entry: TranscriptEntry) -> None:
    """Insert one transcript line as exported; its session is not touched."""
    run(conn, transfer_sql.insert_transcript(entry))


def insert_promotion(conn: Connection, record: PromotionRecord, keep_id: bool) -> None:
    """Insert a promotion-log row as exported (a fresh id unless ``keep_id``)."""
    run(conn, transfer_sql.insert_promotion(record, keep_id))


def has_promotion(conn: Connection, record: PromotionRecord) -> bool:
    """True if the log holds this promotion (same memory, tiers and time)."""
    return row(conn, transfer_sql.has_promotion(record)) is not None


def insert_forgetting(conn: Connection, row_id: int | None, record: ForgettingRecord) -> None:
    """Insert a forgetting-log row as exported (``row_id=None``: a fresh id)."""
    run(conn, transfer_sql.insert_forgetting(row_id, record))


def has_forgetting(conn: Connection, record: ForgettingRecord) -> bool:
    """True if the log holds this row (same memory, tier, time and reason)."""
    return row(conn, transfer_sql.has_forgetting(record)) is not None


def add_redactions(conn: Connection, count: int) -> None:
    """Count ``count`` more secrets redacted before they reached the store."""
    meta_sql.add(conn, REDACTIONS_KEY, count)


def prepare_graph(
    conn: Connection, present: bool, mode: Mode, written: set[str], every: Sequence[str]
) -> bool:
    """Before the graph of an import: False without one in the document (the memories'
    insert triggers queued them for extraction: they stay queued); replace empties the
    extraction queue those triggers filled (the rest was emptied with the tables)."""
    if not present:
        return False
    if mode == "replace":
        run(conn, transfer_sql.clear_queue())
    return True


def import_problems(
    conn: Connection, doc: ImportDocument, mode: Mode, written: set[str]
) -> list[str]:
    """The content keys of the memories written are made; then what the import would
    break (the first check that fails), or ``[]``."""
    dedup_sql.record(conn, [m for _, m in doc.memories if mode == "replace" or m.id in written])
    for check in integrity_sql.IMPORT_CHECKS.values():
        problems = check(conn)
        if problems:
            return list(problems)
    return []

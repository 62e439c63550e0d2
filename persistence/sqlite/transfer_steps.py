"""The SQLite engine's steps of the JSON export and import
(:class:`~persistence.transfer.store_io.TransferSteps`: the functions of the same names as
:mod:`persistence.postgres.transfer_steps`): what this engine does its own way, each
taking the connection first. The pages an export reads and the rows an import writes
are the record families' own SQL; the graph's preparation, the counts and the checks
run the statements :mod:`~persistence.sqlite.sql.json_io_sql` builds. What both engines
do alike runs once in :mod:`persistence.transfer.store_io`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

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
from persistence.sqlite.sql import (
    dedup_sql,
    forgetting_sql,
    graph_sql,
    integrity_sql,
    json_io_sql,
    memory_sql,
    notes_sql,
    schedule_sql,
    session_sql,
)
from persistence.sqlite.sql.forgetting_sql import forgotten_ids as forgotten_ids
from persistence.sqlite.sql.graph_sql import add_provenance as add_provenance
from persistence.sqlite.sql.graph_sql import drop_provenance as drop_provenance
from persistence.sqlite.sql.graph_sql import has_graph as has_graph
from persistence.sqlite.sql.graph_sql import resolve as resolve
from persistence.sqlite.sql.memory_sql import has_promotion as has_promotion
from persistence.sqlite.sql.memory_sql import insert_promotion as insert_promotion
from persistence.sqlite.sql.memory_sql import tier_of as tier_of
from persistence.sqlite.sql.meta_sql import (
    EMBEDDING_DIM_KEY,
    EMBEDDING_MODEL_KEY,
    read_meta,
    write_meta,
)
from persistence.sqlite.sql.meta_sql import add_redactions as add_redactions
from persistence.sqlite.sql.notes_sql import has_notes as has_notes
from persistence.sqlite.sql.session_sql import insert_transcript as insert_transcript
from persistence.sqlite.sql.session_sql import session_ids as session_ids
from persistence.sqlite.sql.session_sql import transcript_ids as transcript_ids
from persistence.statements import run_all, value
from persistence.stores.scope import WHOLE, Scope
from persistence.transfer.graph_io import GRAPH_TABLES
from persistence.transfer.json_export import TABLES, ExportHeader
from persistence.transfer.json_import import ImportDocument, Mode

# The steps of the shared names that the record families' SQL already has.
has_forgetting = forgetting_sql.contains
insert_forgetting = forgetting_sql.insert
memory_ids = memory_sql.all_ids
insert_note_rows = notes_sql.insert_rows
clear_notes = notes_sql.clear
fetch_schedule = schedule_sql.fetch
upsert_schedule = schedule_sql.upsert
fetch_session = session_sql.fetch

# --- export -----------------------------------------------------------------------------


def header(conn: apsw.Connection) -> ExportHeader:
    """The file's schema version and embedding size and model."""
    dim = read_meta(conn, EMBEDDING_DIM_KEY)
    return ExportHeader(
        schema_version=read_schema_version(conn),
        embedding_dim=None if dim is None else int(dim),
        embedding_model=read_meta(conn, EMBEDDING_MODEL_KEY),
    )


def row_count(conn: apsw.Connection) -> int:
    """Rows an export lists: every table's, the graph's and the notes' included."""
    tables = [*TABLES, *(GRAPH_TABLES if graph_sql.has_graph(conn) else ())]
    counted = sum(int(value(conn, json_io_sql.table_count(t))) for t in tables)
    return counted + notes_sql.row_count(conn)


def memory_page(
    conn: apsw.Connection, tier: Tier, after_rowid: int, limit: int, scope: Scope = WHOLE
) -> list[tuple[int, Memory]]:
    """The next ``limit`` memories of ``tier`` (in ``scope``) in insertion order, each
    with its rowid."""
    return memory_sql.page_in_order(conn, tier, after_rowid, limit, scope)


def session_page(
    conn: apsw.Connection, after_id: str, limit: int, scope: Scope = WHOLE
) -> list[SessionState]:
    """The next ``limit`` sessions (of ``scope``) with id > ``after_id``."""
    return session_sql.page(conn, after_id, limit, scope.agent_id)


def transcript_page(
    conn: apsw.Connection, after_rowid: int, limit: int, scope: Scope = WHOLE
) -> list[tuple[int, TranscriptEntry]]:
    """The next ``limit`` transcript lines (of ``scope``'s sessions), with rowids."""
    return session_sql.transcript_page(conn, after_rowid, limit, scope.agent_id)


def schedule_page(
    conn: apsw.Connection, after_id: str, limit: int, scope: Scope = WHOLE
) -> list[RepetitionSchedule]:
    """The next ``limit`` schedules (of ``scope``'s live memories) by memory id."""
    held = json_io_sql.scoped_ids(scope) if scope.scoped else None
    return schedule_sql.page(conn, after_id, limit, held)


def promotion_page(
    conn: apsw.Connection, after_id: int, limit: int, scope: Scope = WHOLE
) -> list[PromotionRecord]:
    """The next ``limit`` promotion-log rows (of ``scope``'s memories, live or forgotten)."""
    held = json_io_sql.scoped_ids(scope, audited=True) if scope.scoped else None
    return memory_sql.promotion_page(conn, after_id, limit, held)


def forgetting_page(
    conn: apsw.Connection, after_id: int, limit: int, scope: Scope = WHOLE
) -> list[tuple[int, ForgettingRecord]]:
    """The next ``limit`` forgetting-log rows (of ``scope``), with their ids."""
    return forgetting_sql.page(conn, after_id, limit, scope.agent_id)


def note_rows(conn: apsw.Connection, table: str, scope: Scope = WHOLE) -> list[tuple[Any, ...]]:
    """Every row of one note table (``scope``'s notes and its memories' content history)."""
    return notes_sql.table_rows(conn, table, scope.agent_id)


# --- import -----------------------------------------------------------------------------


def stored_embedding(conn: apsw.Connection) -> tuple[int | None, str | None]:
    """The file's embedding size and model (``None`` when not fixed yet)."""
    dim = read_meta(conn, EMBEDDING_DIM_KEY)
    return (None if dim is None else int(dim)), read_meta(conn, EMBEDDING_MODEL_KEY)


def prepare(conn: apsw.Connection, doc: ImportDocument, mode: Mode) -> None:
    """The embedding model and size become the document's (replace) or are fixed by it
    (where none is yet); replace empties the memories, sessions and logs."""
    stored_dim = read_meta(conn, EMBEDDING_DIM_KEY)
    if mode == "replace" or read_meta(conn, EMBEDDING_MODEL_KEY) is None:
        write_meta(conn, EMBEDDING_MODEL_KEY, doc.embedding_model)
    if mode == "replace":
        memory_sql.delete_all(conn)
        session_sql.delete_all(conn)
        run_all(conn, json_io_sql.clear_schedules_and_forgetting_log())
        dim = doc.embedding_dim
        write_meta(conn, EMBEDDING_DIM_KEY, None if dim is None else str(dim))
    elif stored_dim is None and doc.embedding_dim is not None:
        write_meta(conn, EMBEDDING_DIM_KEY, str(doc.embedding_dim))


def upsert_session(conn: apsw.Connection, session: SessionState) -> None:
    session_sql.upsert(conn, session_sql.encode_row(session))


def prepare_graph(
    conn: apsw.Connection, present: bool, mode: Mode, written: set[str], every: Sequence[str]
) -> bool:
    """Before the graph of an import: False if there is nothing more to write (a file
    without the graph; a document without one, whose new memories are queued for
    extraction). Replace empties the graph; the duplicate keys follow the memories."""
    if not graph_sql.has_graph(conn):
        return False
    dedup_sql.rebuild(conn)  # derived from the memories as imported
    if mode == "replace":
        run_all(conn, json_io_sql.clear_graph())
    if not present:
        graph_sql.enqueue(conn, sorted(written if mode == "merge" else set(every)))
        graph_sql.collect_garbage(conn)
        return False
    return True


def collect(conn: apsw.Connection, entity_ids: Sequence[str], relation_ids: Sequence[str]) -> None:
    """Collect what a merge left unsupported."""
    graph_sql.collect(conn, entity_ids, relation_ids)
    graph_sql.collect_garbage(conn)


def import_problems(
    conn: apsw.Connection, doc: ImportDocument, mode: Mode, written: set[str]
) -> list[str]:
    """What the import would break (the first invariant that fails), or ``[]``."""
    for name in json_io_sql.INVARIANTS:
        problems = integrity_sql.CHECKS[name](conn)
        if problems:
            return list(problems)
    return []

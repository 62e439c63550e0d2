"""The JSON export and import on SQLite: the shared reader and writer of
:mod:`persistence.transfer.store_io` over this engine's statements
(:mod:`~persistence.sqlite.sql.json_io_sql`) and steps
(:mod:`~persistence.sqlite.transfer_steps`), and what differs: how the memories are written.

:func:`export_source` reads every table from one read transaction (a snapshot), page by
page with keyset paging. :func:`import_sink` writes a checked document in ONE write
transaction; a large import writes the memories with the index triggers off and
rebuilds the indexes once (:mod:`persistence.sqlite.bulk_index`), and the library's
invariants are checked before it commits.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import apsw
import numpy as np

from persistence.records import Memory, Tier
from persistence.sqlite import bulk_index, memory_steps, transfer_steps
from persistence.sqlite.database import Database
from persistence.sqlite.sql import (
    graph_sql,
    index_sql,
    json_io_sql,
    memory_sql,
    meta_sql,
    notes_sql,
    schedule_sql,
    session_sql,
)
from persistence.statements import Statement, row, run, value
from persistence.stores.scope import WHOLE, Scope
from persistence.transfer.json_import import Count, ImportDocument, Mode
from persistence.transfer.store_io import StoreExportSource, StoreImportSink, TransferSql

BULK_AT = 1_000  # memories; fewer: row-by-row index triggers are cheap enough

SQL = TransferSql(
    json_io_sql, memory_sql, session_sql, schedule_sql, meta_sql, notes_sql, graph_sql
)


@contextmanager
def export_source(conn: apsw.Connection, scope: Scope = WHOLE) -> Iterator[StoreExportSource]:
    """The tables of ``conn`` (``scope``'s rows) from one snapshot: inside its read
    transaction, or one opened here for the block."""
    own_transaction = not conn.in_transaction
    if own_transaction:
        conn.execute("BEGIN")
    try:
        yield StoreExportSource(conn, SQL, transfer_steps, scope=scope)
    finally:
        if own_transaction:
            conn.execute("COMMIT")


@contextmanager
def import_sink(engine: Database) -> Iterator[StoreImportSink]:
    """One write transaction on ``engine`` and the sink that writes in it (an
    :data:`~persistence.transfer.json_import.OpenSink`)."""
    with engine.transaction() as conn:
        yield StoreImportSink(conn, SQL, transfer_steps, write_memories)


def write_memories(
    conn: apsw.Connection, doc: ImportDocument, mode: Mode, count: Count
) -> set[str]:
    """Write the memories; return the ids whose document version was written."""
    written: set[str] = set()
    # Most of the file is new: rebuilding the indexes once beats row-by-row triggers.
    bulk = len(doc.memories) >= BULK_AT and len(doc.memories) >= int(
        value(conn, index_sql.memory_count()) or 0
    )
    with bulk_index.triggers_suspended(conn) if bulk else nullcontext():
        for _, memory in doc.memories:
            outcome = _put_memory(conn, memory, mode)
            if outcome != "skipped":
                written.add(memory.id)
            count(memory.tier.value, outcome)
    return written


def _put_memory(conn: apsw.Connection, memory: Memory, mode: Mode) -> str:
    """Write one memory; in merge mode the newer of two versions wins (by updated_at)."""
    blob = None if memory.embedding is None else np.asarray(memory.embedding, "<f4").tobytes()
    columns = memory_sql.encode_row(memory, blob)
    if mode == "replace":
        memory_steps.write(conn, memory, columns)
        return "inserted"
    held = value(conn, memory_sql.tier_of(memory.id))
    current_tier = None if held is None else Tier(held)
    current = (
        None if current_tier is None else _memory(conn, memory_sql.fetch(current_tier, memory.id))
    )
    if current is not None and memory.updated_at <= current.updated_at:
        return "skipped"
    rival = _memory(conn, memory_sql.fetch_by_key(memory.key)) if memory.key is not None else None
    if rival is not None and rival.id != memory.id:
        if rival.updated_at >= memory.updated_at:
            return "skipped"
        memory_steps.delete(conn, Tier.SCRATCHPAD, rival.id)
    if current_tier is None:
        memory_steps.write(conn, memory, columns)
        return "inserted"
    if current_tier is not memory.tier:
        run(conn, memory_sql.remove_row(current_tier, memory.id))
    memory_steps.write(conn, memory, columns)
    return "updated"


def _memory(conn: apsw.Connection, statement: Statement) -> Memory | None:
    found = row(conn, statement)
    return None if found is None else memory_sql.to_memory(found)

"""The JSON export and import on PostgreSQL: the shared reader and writer of
:mod:`persistence.transfer.store_io` over this engine's statements
(:mod:`~persistence.postgres.sql.transfer_sql`) and steps
(:mod:`~persistence.postgres.transfer_steps`), and what differs: how the memories are written.

:func:`export_source` reads every table from one ``REPEATABLE READ READ ONLY``
transaction (a snapshot), page by page with keyset paging. :func:`import_sink` writes a
checked document in ONE write transaction; identity columns (the logs' ids) are written
with ``OVERRIDING SYSTEM VALUE`` and their sequences moved past them, and the library's
invariants are checked before it commits (the keyword window is rebuilt at COMMIT by
the recall index's deferred trigger).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from persistence.postgres import transfer_steps
from persistence.postgres.database import Connection, PgDatabase
from persistence.postgres.memory_steps import upsert
from persistence.postgres.sql import (
    graph_sql,
    memory_sql,
    meta_sql,
    notes_sql,
    schedule_sql,
    session_sql,
    transfer_sql,
)
from persistence.records import Memory, Tier
from persistence.statements import Statement, row, run, run_all
from persistence.stores.scope import WHOLE, Scope
from persistence.transfer.json_import import Count, ImportDocument, Mode
from persistence.transfer.store_io import StoreExportSource, StoreImportSink, TransferSql

SQL = TransferSql(
    transfer_sql, memory_sql, session_sql, schedule_sql, meta_sql, notes_sql, graph_sql
)


@contextmanager
def export_source(engine: PgDatabase, scope: Scope = WHOLE) -> Iterator[StoreExportSource]:
    """Every table (``scope``'s rows) from one snapshot: inside this thread's transaction
    its view, else a ``REPEATABLE READ READ ONLY`` transaction of its own for the block."""
    with engine.snapshot() as conn:
        yield StoreExportSource(conn, SQL, transfer_steps, scope=scope)


@contextmanager
def import_sink(engine: PgDatabase) -> Iterator[StoreImportSink]:
    """One write transaction on ``engine`` and the sink that writes in it (an
    :data:`~persistence.transfer.json_import.OpenSink`); server errors translated."""
    with engine.transaction() as conn:
        yield StoreImportSink(conn, SQL, transfer_steps, write_memories)


def write_memories(conn: Connection, doc: ImportDocument, mode: Mode, count: Count) -> set[str]:
    """Write the memories in document order (a replace in one batch); return the ids
    whose document version was written."""
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
            outcome = _merge_memory(conn, memory, vector)
        if outcome != "skipped":
            written.add(memory.id)
        count(memory.tier.value, outcome)
    if rows:
        for statements in memory_sql.insert_many(rows, vectors):
            run_all(conn, statements)
    return written


def _merge_memory(conn: Connection, memory: Memory, vector: np.ndarray | None) -> str:
    """Write one memory unless the stored version is as new (by ``updated_at``); a
    scratchpad key held by an older memory moves to this one."""
    current = _memory(conn, memory_sql.fetch(None, memory.id))
    if current is not None and memory.updated_at <= current.updated_at:
        return "skipped"
    if memory.key is not None and memory.tier is Tier.SCRATCHPAD:
        rival = _memory(conn, memory_sql.fetch_by_key(memory.key))
        if rival is not None and rival.id != memory.id:
            if rival.updated_at >= memory.updated_at:
                return "skipped"
            run(conn, memory_sql.forget_rows([rival.id], None, Tier.SCRATCHPAD, None, None))
    upsert(conn, memory_sql.encode_row(memory), vector)
    return "inserted" if current is None else "updated"


def _memory(conn: Connection, statement: Statement) -> Memory | None:
    found = row(conn, statement)
    return None if found is None else memory_sql.to_memory(found)


def _vector(memory: Memory) -> np.ndarray | None:
    if memory.embedding is None:
        return None
    return np.asarray(memory.embedding, dtype=np.float32)

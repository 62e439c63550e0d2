"""The SQLite engine's steps of the JSON export and import
(:class:`~persistence.transfer.store_io.TransferSteps`: the functions of the same names as
:mod:`persistence.postgres.transfer_steps`): what this engine does its own way, each
taking the connection first. They run the statements
:mod:`~persistence.sqlite.sql.json_io_sql` and the record families' ``sql/`` modules
build; what both engines do alike runs once in :mod:`persistence.transfer.store_io`.
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from migrations.sqlite import read_schema_version
from persistence.sqlite import graph_steps, integrity, memory_steps
from persistence.sqlite.sql import (
    graph_sql,
    json_io_sql,
    memory_sql,
    meta_sql,
    session_sql,
)
from persistence.sqlite.sql.meta_sql import EMBEDDING_DIM_KEY, EMBEDDING_MODEL_KEY
from persistence.statements import run, run_all
from persistence.stores import graph_reads
from persistence.transfer.json_import import ImportDocument, Mode
from persistence.transfer.store_io import embedding


def schema_version(conn: apsw.Connection) -> int:
    """The file's schema version: an export says which chain step its rows follow."""
    return read_schema_version(conn)


def prepare(conn: apsw.Connection, doc: ImportDocument, mode: Mode) -> None:
    """The embedding model and size become the document's (replace) or are fixed by it
    (where none is yet); replace empties the memories, sessions and logs."""
    stored_dim, stored_model = embedding(conn, meta_sql)
    if mode == "replace" or stored_model is None:
        run(conn, meta_sql.write(EMBEDDING_MODEL_KEY, doc.embedding_model))
    if mode == "replace":
        run_all(conn, memory_sql.delete_all())
        run_all(conn, session_sql.DELETE_ALL)
        run_all(conn, json_io_sql.clear_schedules_and_forgetting_log())
        dim = doc.embedding_dim
        run(conn, meta_sql.write(EMBEDDING_DIM_KEY, None if dim is None else str(dim)))
    elif stored_dim is None and doc.embedding_dim is not None:
        run(conn, meta_sql.write(EMBEDDING_DIM_KEY, str(doc.embedding_dim)))


def prepare_graph(
    conn: apsw.Connection, present: bool, mode: Mode, written: set[str], every: Sequence[str]
) -> bool:
    """Before the graph of an import: False if there is nothing more to write (a file
    without the graph; a document without one, whose new memories are queued for
    extraction). Replace empties the graph; the duplicate keys follow the memories."""
    if not graph_reads.has_graph(graph_sql, conn):
        return False
    memory_steps.rebuild_content_keys(conn)  # derived from the memories as imported
    if mode == "replace":
        run_all(conn, json_io_sql.clear_graph())
    if not present:
        run_all(conn, graph_sql.enqueue(sorted(written if mode == "merge" else set(every))))
        graph_steps.collect_garbage(conn)
        return False
    return True


def collect(conn: apsw.Connection, entity_ids: Sequence[str], relation_ids: Sequence[str]) -> None:
    """Collect what a merge left unsupported, and the garbage of the memories it replaced."""
    graph_steps.collect(conn, entity_ids, relation_ids)
    graph_steps.collect_garbage(conn)


def import_problems(
    conn: apsw.Connection, doc: ImportDocument, mode: Mode, written: set[str]
) -> list[str]:
    """What the import would break (the first invariant that fails), or ``[]``."""
    for name in json_io_sql.INVARIANTS:
        problems = integrity.CHECKS[name](conn)
        if problems:
            return list(problems)
    return []

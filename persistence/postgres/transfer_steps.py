"""The PostgreSQL engine's steps of the JSON export and import
(:class:`~persistence.transfer.store_io.TransferSteps`: the functions of the same names as
:mod:`persistence.sqlite.transfer_steps`): what this engine does its own way, each taking
the connection first. They run the statements :mod:`~persistence.postgres.sql.transfer_sql`
and the record families' ``sql/`` modules build (the vector column's index is the recall
index's step); what both engines do alike runs once in
:mod:`persistence.transfer.store_io`.
"""

from __future__ import annotations

from collections.abc import Sequence

from persistence.meta_keys import EMBEDDING_DIM_KEY, EMBEDDING_MODEL_KEY
from persistence.postgres import integrity, vector_column
from persistence.postgres.database import Connection
from persistence.postgres.sql import dedup_sql, graph_sql, meta_sql, transfer_sql
from persistence.statements import run, run_all, run_batch, value
from persistence.transfer.json_export import DOCUMENT_VERSION
from persistence.transfer.json_import import ImportDocument, Mode
from persistence.transfer.store_io import embedding


def schema_version(conn: Connection) -> int:
    """The data model this code exports, numbered as the file chain numbers it (every
    field and the graph): a document does not say which engine wrote it."""
    return DOCUMENT_VERSION


def prepare(conn: Connection, doc: ImportDocument, mode: Mode) -> None:
    """The embedding model becomes the document's (replace, or where none is yet); the
    store's vector size becomes the document's (replace) or is fixed by it (merge into a
    store without one), the vector column typed to match; replace empties every table."""
    stored, model = embedding(conn, meta_sql)
    if mode == "replace" or model is None:
        run(conn, meta_sql.write(EMBEDDING_MODEL_KEY, doc.embedding_model))
    wanted = doc.embedding_dim
    if mode == "replace" and stored != wanted:
        run(conn, transfer_sql.clear_vectors())  # the memories go anyway
        vector_column.drop_vector_index(conn)
        run(conn, meta_sql.write(EMBEDDING_DIM_KEY, None if wanted is None else str(wanted)))
    elif mode == "merge" and stored is None and wanted is not None:
        run(conn, meta_sql.write(EMBEDDING_DIM_KEY, str(wanted)))
    dim = value(conn, meta_sql.read(EMBEDDING_DIM_KEY))
    if dim is not None:
        vector_column.ensure_vector_index(conn, int(dim))
    if mode == "replace":
        run_all(conn, transfer_sql.clear_all())


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


def collect(conn: Connection, entity_ids: Sequence[str], relation_ids: Sequence[str]) -> None:
    """Collect what a merge left unsupported (one function on the server)."""
    run_all(conn, graph_sql.collect(entity_ids, relation_ids))


def import_problems(
    conn: Connection, doc: ImportDocument, mode: Mode, written: set[str]
) -> list[str]:
    """The content keys of the memories written are made; then what the import would
    break (the first check that fails), or ``[]``."""
    run_batch(
        conn, dedup_sql.record([m for _, m in doc.memories if mode == "replace" or m.id in written])
    )
    for check in integrity.IMPORT_CHECKS.values():
        problems = check(conn)
        if problems:
            return list(problems)
    return []

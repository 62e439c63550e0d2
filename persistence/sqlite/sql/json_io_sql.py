"""The SQLite engine's SQL of the JSON export and import
(:class:`~persistence.transfer.store_io.TransferSql`: the functions of the same names as
PostgreSQL's :mod:`~persistence.postgres.sql.transfer_sql`): the pages an export reads,
the rows an import writes (the record families' own SQL where it has them), the graph
tables read and written whole, the emptying of the tables for a replace, and the checks
an import must pass before it commits.

Table and column names come from the closed lists of :mod:`persistence.transfer`, never
from a document; values are always parameters.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import apsw
import orjson

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
from persistence.sqlite import graph_steps
from persistence.sqlite.connection import query_one, query_value
from persistence.sqlite.sql import (
    dedup_sql,
    forgetting_sql,
    graph_sql,
    integrity_sql,
    memory_sql,
    notes_sql,
    schedule_sql,
    session_sql,
)
from persistence.sqlite.sql.forgetting_sql import forgotten_ids as forgotten_ids
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
from persistence.statements import run_all
from persistence.stores import graph_reads
from persistence.stores.graph_rows import add_provenance as record_provenance
from persistence.stores.scope import WHOLE, Scope
from persistence.transfer.graph_io import GRAPH_BOOLS, GRAPH_FIELDS, GRAPH_TABLES
from persistence.transfer.json_export import TABLES, ExportHeader
from persistence.transfer.json_import import ImportDocument, Mode

# The functions of the shared names that the record families' SQL already has.
has_forgetting = forgetting_sql.contains
insert_forgetting = forgetting_sql.insert
memory_ids = memory_sql.all_ids
insert_note_rows = notes_sql.insert_rows
fetch_schedule = schedule_sql.fetch
upsert_schedule = schedule_sql.upsert
fetch_session = session_sql.fetch


_ORDER = {
    "entities": "id",
    "entity_aliases": "rowid",
    "relations": "id",
    "memory_entities": "memory_id, entity_id, origin",
    "memory_relations": "memory_id, relation_id, origin",
    "graph_queue": "memory_id",
}
"""Each graph table's stable export order."""
_CLEARED = (
    "memory_relations", "memory_entities", "relations", "entity_aliases", "entities",
    "graph_queue", "graph_dirty",
)  # fmt: skip
"""The graph's tables in an order that empties them without breaking a foreign key."""


_INVARIANTS = (
    "foreign_key_check", "one_tier_per_memory", "schedules_point_at_memories",
    "tags_point_at_memories", "promotion_log_points_at_memories",
    "promotion_log_agrees_with_tiers", "embedding_sizes", "graph_invariants",
)  # fmt: skip
"""Checked inside the import's transaction; a failure rolls everything back."""

# --- the graph family's reads and writes (run over graph_sql's statements) ---------------


def has_graph(conn: apsw.Connection) -> bool:
    return graph_reads.has_graph(graph_sql, conn)


def resolve(conn: apsw.Connection, norm: str, type_: str | None) -> str | None:
    return graph_reads.resolve(graph_sql, conn, norm, type_)


def drop_provenance(
    conn: apsw.Connection, memory_ids: Sequence[str], origin: str | None = None
) -> tuple[list[str], list[str]]:
    return graph_reads.drop_provenance(graph_sql, conn, memory_ids, origin)


def add_provenance(
    conn: apsw.Connection, memory_id: str, entity_ids: Iterable[str],
    relation_ids: Iterable[str], origin: str,
) -> None:  # fmt: skip
    record_provenance(graph_sql, conn, memory_id, entity_ids, relation_ids, origin)


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
    rows = sum(table_count(conn, t) for t in TABLES) + notes_sql.row_count(conn)
    if has_graph(conn):
        rows += sum(table_count(conn, t) for t in GRAPH_TABLES)
    return rows


# A scoped export holds the agent's data: its memories (``agent_id``), the sessions it
# started and their transcripts, the schedules of its memories and the promotion log of
# its memories live or forgotten, its forgetting-log rows, its notes, and the graph its
# memories assert. A file's graph rows carry no agent: a fact no memory asserts is left
# out (on a server every row has its scope).


def _ids(scope: Scope, audited: bool = False) -> tuple[str, tuple[str, ...]]:
    """A subquery of the scope's live memory ids (``audited``: and its forgotten ones)."""
    live, agent = memory_sql.scoped_ids(scope)
    if not audited:
        return live, agent
    forgotten, agent_too = scope.condition()
    return f"{live} UNION ALL SELECT memory_id FROM forgetting_log WHERE {forgotten}", (
        *agent, *agent_too,
    )  # fmt: skip


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
    return schedule_sql.page(conn, after_id, limit, _ids(scope) if scope.scoped else None)


def promotion_page(
    conn: apsw.Connection, after_id: int, limit: int, scope: Scope = WHOLE
) -> list[PromotionRecord]:
    """The next ``limit`` promotion-log rows (of ``scope``'s memories, live or forgotten)."""
    held = _ids(scope, audited=True) if scope.scoped else None
    return memory_sql.promotion_page(conn, after_id, limit, held)


def forgetting_page(
    conn: apsw.Connection, after_id: int, limit: int, scope: Scope = WHOLE
) -> list[tuple[int, ForgettingRecord]]:
    """The next ``limit`` forgetting-log rows (of ``scope``), with their ids."""
    return forgetting_sql.page(conn, after_id, limit, scope.agent_id)


def graph_pages(
    conn: apsw.Connection, table: str, size: int, scope: Scope = WHOLE
) -> Iterator[list[apsw.SQLiteValues]]:
    """One graph table's rows (those ``scope``'s memories assert) in pages of ``size``,
    in a stable order."""
    rows = graph_rows(conn, table, scope)
    while page := list(itertools.islice(rows, size)):
        yield page


def note_rows(conn: apsw.Connection, table: str, scope: Scope = WHOLE) -> list[tuple[Any, ...]]:
    """Every row of one note table (``scope``'s notes and its memories' content history)."""
    return notes_sql.table_rows(conn, table, scope.agent_id)


def table_count(conn: apsw.Connection, table: str) -> int:
    """How many rows ``table`` (one of the export's tables) holds."""
    if table not in TABLES and table not in GRAPH_FIELDS:
        raise ValueError(table)
    return int(query_value(conn, f"SELECT count(*) FROM {table}"))


def graph_rows(
    conn: apsw.Connection, table: str, scope: Scope = WHOLE
) -> Iterator[apsw.SQLiteValues]:
    """Every row of one graph table (those ``scope``'s memories assert), values in the
    export's field order, in a stable order."""
    names = GRAPH_FIELDS[table]
    mine, params = _graph_scope(table, scope)
    yield from conn.execute(
        f"SELECT {', '.join(names)} FROM {table} WHERE {mine} ORDER BY {_ORDER[table]}", params
    )


def _graph_scope(table: str, scope: Scope) -> tuple[str, tuple[str, ...]]:
    """The condition keeping a graph table's rows that ``scope``'s memories assert: their
    provenance and queue rows, the relations with that provenance, the entities those
    name or that provenance names, and their aliases."""
    if not scope.scoped:
        return "1 = 1", ()
    live, agent = _ids(scope)
    relations = f"SELECT relation_id FROM memory_relations WHERE memory_id IN ({live})"
    if table in ("memory_entities", "memory_relations", "graph_queue"):
        return f"memory_id IN ({live})", agent
    if table == "relations":
        return f"id IN ({relations})", agent
    entities = (
        f"SELECT entity_id FROM memory_entities WHERE memory_id IN ({live}) "
        f"UNION SELECT subject_id FROM relations WHERE id IN ({relations}) "
        f"UNION SELECT object_id FROM relations WHERE id IN ({relations})"
    )
    column = "id" if table == "entities" else "entity_id"
    return f"{column} IN ({entities})", agent * 3


def insert_graph_row(conn: apsw.Connection, table: str, row: Mapping[str, Any]) -> None:
    """Insert one document row into a graph table (true/false stored as 1/0)."""
    names = GRAPH_FIELDS[table]
    marks = ", ".join("?" for _ in names)
    values = [int(row[n]) if (table, n) in GRAPH_BOOLS else row[n] for n in names]
    conn.execute(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})", values)


def clear_graph(conn: apsw.Connection) -> None:
    """Empty every graph table (replace mode)."""
    for table in _CLEARED:
        conn.execute(f"DELETE FROM {table}")


def clear_schedules_and_forgetting_log(conn: apsw.Connection) -> None:
    """Empty ``repetition_schedules`` and ``forgetting_log`` (replace mode)."""
    conn.execute("DELETE FROM repetition_schedules")
    conn.execute("DELETE FROM forgetting_log")


def unqueue(conn: apsw.Connection, memory_ids: Iterable[str]) -> None:
    """Take these memories off the extraction queue."""
    conn.execute(
        "DELETE FROM graph_queue WHERE memory_id IN (SELECT value FROM json_each(?))",
        (orjson.dumps(sorted(set(memory_ids))).decode(),),
    )


def has_entity(conn: apsw.Connection, eid: str) -> bool:
    """True if an entity with this id exists."""
    return query_one(conn, "SELECT 1 FROM entities WHERE id = ?", (eid,)) is not None


def mark_direct(conn: apsw.Connection, eid: str, direct: bool) -> None:
    """An entity becomes direct if the document says so (never the other way)."""
    conn.execute("UPDATE entities SET direct = max(direct, ?) WHERE id = ?", (int(direct), eid))


def has_relation(conn: apsw.Connection, rid: str) -> bool:
    """True if a relation with this id exists."""
    return query_one(conn, "SELECT 1 FROM relations WHERE id = ?", (rid,)) is not None


def current_twin(conn: apsw.Connection, triple: Sequence[str]) -> str | None:
    """The id of the current relation ``subject -predicate-> object``, if there is one."""
    twin = query_one(
        conn,
        "SELECT id FROM relations WHERE subject_id = ? AND predicate = ? "
        "AND object_id = ? AND valid_to IS NULL",
        tuple(triple),
    )
    return None if twin is None else str(twin[0])


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
        clear_schedules_and_forgetting_log(conn)
        dim = doc.embedding_dim
        write_meta(conn, EMBEDDING_DIM_KEY, None if dim is None else str(dim))
    elif stored_dim is None and doc.embedding_dim is not None:
        write_meta(conn, EMBEDDING_DIM_KEY, str(doc.embedding_dim))


def upsert_session(conn: apsw.Connection, session: SessionState) -> None:
    session_sql.upsert(conn, session_sql.encode_row(session))


def logs_written(conn: apsw.Connection) -> None:
    """Nothing to do: the logs' ids are the rowids written."""


def prepare_graph(
    conn: apsw.Connection, present: bool, mode: Mode, written: set[str], every: Sequence[str]
) -> bool:
    """Before the graph of an import: False if there is nothing more to write (a file
    without the graph; a document without one, whose new memories are queued for
    extraction). Replace empties the graph; the duplicate keys follow the memories."""
    if not has_graph(conn):
        return False
    dedup_sql.rebuild(conn)  # derived from the memories as imported
    if mode == "replace":
        clear_graph(conn)
    if not present:
        run_all(conn, graph_sql.enqueue(sorted(written if mode == "merge" else set(every))))
        graph_steps.collect_garbage(conn)
        return False
    return True


def collect(conn: apsw.Connection, entity_ids: Sequence[str], relation_ids: Sequence[str]) -> None:
    """Collect what a merge left unsupported."""
    graph_steps.collect(conn, entity_ids, relation_ids)
    graph_steps.collect_garbage(conn)


def clear_notes(conn: apsw.Connection) -> None:
    notes_sql.clear(conn)


def import_problems(
    conn: apsw.Connection, doc: ImportDocument, mode: Mode, written: set[str]
) -> list[str]:
    """What the import would break (the first invariant that fails), or ``[]``."""
    for name in _INVARIANTS:
        problems = integrity_sql.CHECKS[name](conn)
        if problems:
            return list(problems)
    return []

"""Export every table to one versioned JSON document, streamed page by page.

The document::

    {"format": "tiered-memory", "format_version": 1, "schema_version": N,
     "exported_at": <epoch ms>, "embedding_dim": D | null,
     "tables": {"scratchpad": [...], "episodic": [...], "semantic": [...],
                "sessions": [...], "session_transcripts": [...],
                "repetition_schedules": [...], "promotion_log": [...],
                "forgetting_log": [...],
                "entities": [...], "entity_aliases": [...], "relations": [...],
                "memory_entities": [...], "memory_relations": [...], "graph_queue": [...]}}

(the knowledge graph's tables, see :mod:`persistence.graph_io`, from schema version 10).

Each row is one JSON object (orjson); embeddings are base64 of little-endian float32.
Rows come in a stable order, so exporting an imported document gives it back unchanged
but for ``exported_at``. Everything is read inside one read transaction (a snapshot).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

import apsw
import numpy as np
import orjson

from migrations import read_schema_version
from persistence import records
from persistence.formats import graph_io
from persistence.records import Memory, Tier
from persistence.sqlite.connection import query_value
from persistence.sqlite.sql import forgetting_sql, graph_sql, memory_sql, schedule_sql, session_sql
from persistence.sqlite.sql.meta_sql import EMBEDDING_DIM_KEY, EMBEDDING_MODEL_KEY, read_meta

FORMAT = "tiered-memory"
FORMAT_VERSION = 1
TABLES = (
    "scratchpad", "episodic", "semantic", "sessions", "session_transcripts",
    "repetition_schedules", "promotion_log", "forgetting_log",
)  # fmt: skip
PAGE = 1000
MEMORY_FIELDS = tuple(name for name in records.MEMORY_FIELDS if name != "tier")
"""A memory row's fields (the tier is the table it is listed under)."""
OPTIONAL_MEMORY_FIELDS = ("speaker",)
"""Exported since schema version 9; a document without them imports as ``None``."""


def memory_to_json(memory: Memory) -> dict[str, Any]:
    """One memory as an export row (the tier is the table it is listed under)."""
    row = {name: getattr(memory, name) for name in MEMORY_FIELDS if name != "embedding"}
    row["tags"] = list(memory.tags)
    row["linked_memories"] = list(memory.linked_memories)
    row["metadata"] = dict(memory.metadata)
    row["embedding"] = encode_vector(memory.embedding)
    return row


def encode_vector(vector: Any) -> str | None:
    """base64 of a float32 vector in little-endian order (``None`` stays ``None``)."""
    if vector is None:
        return None
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def _pages(
    fetch: Callable[[Any], list[Any]], key: Callable[[Any], Any], start: Any
) -> Iterator[Any]:
    after = start
    while page := fetch(after):
        yield from page
        after = key(page[-1])


def _first(row: tuple[Any, ...]) -> Any:
    return row[0]


def _rows(conn: apsw.Connection, table: str) -> Iterator[dict[str, Any]]:
    if table in ("scratchpad", "episodic", "semantic"):
        tier = Tier(table)
        in_order = _pages(lambda a: memory_sql.page_in_order(conn, tier, a, PAGE), _first, 0)
        for _, memory in in_order:
            yield memory_to_json(memory)
    elif table == "sessions":
        for s in _pages(lambda a: session_sql.page(conn, a, PAGE), lambda s: s.session_id, ""):
            yield {
                "session_id": s.session_id,
                "started_at": s.started_at,
                "last_active_at": s.last_active_at,
                "turn_number": s.turn_number,
                "active_agents": list(s.active_agents),
                "scratchpad_state": list(s.scratchpad_state),
                "metadata": dict(s.metadata),
                "is_active": s.is_active,
                "pending_compaction": s.pending_compaction,
                "ended_at": s.ended_at,
            }
    elif table == "session_transcripts":
        lines = _pages(lambda a: session_sql.transcript_page(conn, a, PAGE), lambda r: r[0], 0)
        for _, e in lines:
            yield {
                "id": e.id,
                "session_id": e.session_id,
                "turn_number": e.turn_number,
                "role": e.role,
                "content": e.content,
                "timestamp": e.timestamp,
                "speaker": e.speaker,
            }
    elif table == "repetition_schedules":
        for r in _pages(lambda a: schedule_sql.page(conn, a, PAGE), lambda r: r.memory_id, ""):
            yield {
                "memory_id": r.memory_id,
                "next_review_at": r.next_review_at,
                "interval_ms": r.interval_ms,
                "review_count": r.review_count,
                "ease_factor": r.ease_factor,
                "stability_days": r.stability_days,
                "last_reviewed_at": r.last_reviewed_at,
            }
    elif table == "promotion_log":
        for p in _pages(lambda a: memory_sql.promotion_page(conn, a, PAGE), lambda p: p.id, 0):
            yield {
                "id": p.id,
                "memory_id": p.memory_id,
                "from_tier": p.from_tier.value,
                "to_tier": p.to_tier.value,
                "promoted_at": p.promoted_at,
                "reason": p.reason,
            }
    elif table == "forgetting_log":
        for row_id, f in _pages(lambda a: forgetting_sql.page(conn, a, PAGE), lambda r: r[0], 0):
            yield {
                "id": row_id,
                "memory_id": f.memory_id,
                "tier": f.tier.value,
                "forgotten_at": f.forgotten_at,
                "retention": f.retention,
                "reason": f.reason,
            }
    else:  # pragma: no cover - TABLES is closed
        raise ValueError(table)


def _row_count(conn: apsw.Connection) -> int:
    rows = sum(int(query_value(conn, f"SELECT count(*) FROM {t}")) for t in TABLES)
    return rows + graph_io.row_count(conn)


def _has_graph(conn: apsw.Connection) -> bool:
    return graph_sql.has_graph(conn)


def _write_array(out: IO[bytes], rows: Iterable[dict[str, Any]], tick: Callable[[], None]) -> None:
    out.write(b"[")
    first = True
    for row in rows:
        if not first:
            out.write(b",")
        out.write(orjson.dumps(row))
        first = False
        tick()
    out.write(b"]")


def export_document(
    conn: apsw.Connection,
    out: IO[bytes],
    exported_at: int,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Write the whole document to ``out`` from one snapshot; return the rows written."""
    own_transaction = not conn.in_transaction
    if own_transaction:
        conn.execute("BEGIN")
    try:
        total = _row_count(conn)
        done = 0

        def tick() -> None:
            nonlocal done
            done += 1
            if progress is not None and (done % 500 == 0 or done == total):
                progress(done, total)

        dim = read_meta(conn, EMBEDDING_DIM_KEY)
        header = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "schema_version": read_schema_version(conn),
            "exported_at": exported_at,
            "embedding_dim": None if dim is None else int(dim),
            "embedding_model": read_meta(conn, EMBEDDING_MODEL_KEY),
        }
        out.write(orjson.dumps(header)[:-1] + b',"tables":{')
        for n, table in enumerate(TABLES):
            out.write((b"," if n else b"") + orjson.dumps(table) + b":")
            _write_array(out, _rows(conn, table), tick)
        for table in graph_io.GRAPH_TABLES if _has_graph(conn) else ():
            out.write(b"," + orjson.dumps(table) + b":")
            _write_array(out, graph_io.exported_rows(conn, table), tick)
        out.write(b"}}\n")
    finally:
        if own_transaction:
            conn.execute("COMMIT")
    return done

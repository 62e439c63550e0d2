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

(the knowledge graph's tables, see :mod:`persistence.transfer.graph_io`, from schema
version 10; then ``notes``, ``note_versions``, ``note_links`` and ``memory_versions``,
see :mod:`persistence.transfer.note_io`, from schema version 13).

Each row is one JSON object (orjson); embeddings are base64 of little-endian float32.
Rows come in a stable order, so exporting an imported document gives it back unchanged
but for ``exported_at``. A backend hands the rows over as an :class:`ExportSource`:
pages of records read from one snapshot; this module turns them into the document.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, Protocol, TypeVar

import numpy as np
import orjson

from migrations.sqlite import LATEST_VERSION
from persistence import records
from persistence.records import (
    ForgettingRecord,
    Memory,
    PromotionRecord,
    RepetitionSchedule,
    SessionState,
    Tier,
    TranscriptEntry,
)
from persistence.transfer import graph_io, note_io

FORMAT = "tiered-memory"
FORMAT_VERSION = 1
DOCUMENT_VERSION = LATEST_VERSION
"""The data model this code exports, numbered as the file chain numbers it (every field
and the graph): a document does not say which engine wrote it."""
TABLES = (
    "scratchpad", "episodic", "semantic", "sessions", "session_transcripts",
    "repetition_schedules", "promotion_log", "forgetting_log",
)  # fmt: skip
MEMORY_FIELDS = tuple(name for name in records.MEMORY_FIELDS if name != "tier")
"""A memory row's fields (the tier is the table it is listed under)."""
OPTIONAL_MEMORY_FIELDS = ("speaker", "superseded_by", "valid_to", "superseded_reason")
"""Exported since schema version 9 (``speaker``) and 18 (supersession); a document
without them imports as ``None`` (a memory of an older export is current)."""

_R = TypeVar("_R")


@dataclass(frozen=True, slots=True)
class ExportHeader:
    """What the document says about the store it came from."""

    schema_version: int
    embedding_dim: int | None
    embedding_model: str | None


class ExportSource(Protocol):
    """One consistent snapshot of a backend's tables, read page by page.

    Every method reads the same snapshot; each table's rows come in a stable order
    (memories, transcript lines and the forgetting log in insertion order, the others
    by id), so that an export of an imported document gives the document back.
    """

    def header(self) -> ExportHeader:
        """The schema version and the embedding facts of the store."""
        ...

    def row_count(self) -> int:
        """How many rows the document will list (all tables, the graph's included)."""
        ...

    def has_graph(self) -> bool:
        """True if the store has the knowledge graph's tables (schema 10 on)."""
        ...

    def memories(self, tier: Tier) -> Iterable[Sequence[Memory]]:
        """The memories of ``tier``, in insertion order."""
        ...

    def sessions(self) -> Iterable[Sequence[SessionState]]:
        """Every session, by id."""
        ...

    def transcripts(self) -> Iterable[Sequence[TranscriptEntry]]:
        """Every transcript line, in insertion order."""
        ...

    def schedules(self) -> Iterable[Sequence[RepetitionSchedule]]:
        """Every repetition schedule, by memory id."""
        ...

    def promotions(self) -> Iterable[Sequence[PromotionRecord]]:
        """The promotion log, by id."""
        ...

    def forgotten(self) -> Iterable[Sequence[tuple[int, ForgettingRecord]]]:
        """The forgetting log with each row's id, by id."""
        ...

    def graph_rows(self, table: str) -> Iterable[Sequence[Sequence[Any]]]:
        """One graph table's rows as value tuples in :data:`graph_io.GRAPH_FIELDS`
        order, in a stable order."""
        ...

    def has_notes(self) -> bool:
        """True if the store has the note tables (file schema 13, server schema 9 on)."""
        ...

    def note_rows(self, table: str) -> Iterable[Sequence[Sequence[Any]]]:
        """One note table's rows as value tuples in :data:`note_io.NOTE_TABLE_FIELDS`
        order, in a stable order."""
        ...


# --- records to JSON ------------------------------------------------------------------


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


def session_to_json(s: SessionState) -> dict[str, Any]:
    """One session as an export row."""
    return {
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


def transcript_to_json(e: TranscriptEntry) -> dict[str, Any]:
    """One transcript line as an export row."""
    return {
        "id": e.id,
        "session_id": e.session_id,
        "turn_number": e.turn_number,
        "role": e.role,
        "content": e.content,
        "timestamp": e.timestamp,
        "speaker": e.speaker,
    }


def schedule_to_json(r: RepetitionSchedule) -> dict[str, Any]:
    """One repetition schedule as an export row."""
    return {
        "memory_id": r.memory_id,
        "next_review_at": r.next_review_at,
        "interval_ms": r.interval_ms,
        "review_count": r.review_count,
        "ease_factor": r.ease_factor,
        "stability_days": r.stability_days,
        "last_reviewed_at": r.last_reviewed_at,
    }


def promotion_to_json(p: PromotionRecord) -> dict[str, Any]:
    """One promotion-log row as an export row."""
    return {
        "id": p.id,
        "memory_id": p.memory_id,
        "from_tier": p.from_tier.value,
        "to_tier": p.to_tier.value,
        "promoted_at": p.promoted_at,
        "reason": p.reason,
    }


def forgetting_to_json(row: tuple[int, ForgettingRecord]) -> dict[str, Any]:
    """One forgetting-log row (with its id) as an export row."""
    row_id, f = row
    return {
        "id": row_id,
        "memory_id": f.memory_id,
        "tier": f.tier.value,
        "forgotten_at": f.forgotten_at,
        "retention": f.retention,
        "reason": f.reason,
    }


# --- streaming ------------------------------------------------------------------------


def _each(
    pages: Iterable[Sequence[_R]], to_json: Callable[[_R], dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    for page in pages:
        for record in page:
            yield to_json(record)


def _rows(source: ExportSource, table: str) -> Iterator[dict[str, Any]]:
    if table in ("scratchpad", "episodic", "semantic"):
        return _each(source.memories(Tier(table)), memory_to_json)
    if table == "sessions":
        return _each(source.sessions(), session_to_json)
    if table == "session_transcripts":
        return _each(source.transcripts(), transcript_to_json)
    if table == "repetition_schedules":
        return _each(source.schedules(), schedule_to_json)
    if table == "promotion_log":
        return _each(source.promotions(), promotion_to_json)
    if table == "forgetting_log":
        return _each(source.forgotten(), forgetting_to_json)
    raise ValueError(table)  # pragma: no cover - TABLES is closed


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
    source: ExportSource,
    out: IO[bytes],
    exported_at: int,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Write the whole document to ``out`` from ``source``; return the rows written."""
    total = source.row_count()
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None and (done % 500 == 0 or done == total):
            progress(done, total)

    facts = source.header()
    header = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "schema_version": facts.schema_version,
        "exported_at": exported_at,
        "embedding_dim": facts.embedding_dim,
        "embedding_model": facts.embedding_model,
    }
    out.write(orjson.dumps(header)[:-1] + b',"tables":{')
    for n, table in enumerate(TABLES):
        out.write((b"," if n else b"") + orjson.dumps(table) + b":")
        _write_array(out, _rows(source, table), tick)
    for table in graph_io.GRAPH_TABLES if source.has_graph() else ():
        out.write(b"," + orjson.dumps(table) + b":")
        rows = (
            graph_io.row_to_json(table, row) for page in source.graph_rows(table) for row in page
        )
        _write_array(out, rows, tick)
    for table in note_io.NOTE_TABLES if source.has_notes() else ():
        out.write(b"," + orjson.dumps(table) + b":")
        notes = (
            note_io.row_to_json(table, row) for page in source.note_rows(table) for row in page
        )
        _write_array(out, notes, tick)
    out.write(b"}}\n")
    return done

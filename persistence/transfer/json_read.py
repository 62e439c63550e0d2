"""Read a JSON export and validate ALL of it before anything is written.

Every record goes through the validators the stores' writes use (one rule set); the
first bad value is named by its place in the document (``tables.episodic[17].importance``).
The result, an :class:`ImportDocument`, is what every backend writes.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from migrations.sqlite import LATEST_VERSION
from persistence.errors import InvalidImportError, InvalidInputError
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
from persistence.transfer.json_export import (
    FORMAT,
    FORMAT_VERSION,
    MEMORY_FIELDS,
    OPTIONAL_MEMORY_FIELDS,
    TABLES,
)
from persistence.validation import (
    validate_forgetting,
    validate_memory,
    validate_promotion,
    validate_schedule,
    validate_session,
    validate_transcript,
)

_SESSION_FIELDS = (
    "session_id", "started_at", "last_active_at", "turn_number", "active_agents",
    "scratchpad_state", "metadata", "is_active", "pending_compaction", "ended_at",
)  # fmt: skip
_TRANSCRIPT_FIELDS = ("id", "session_id", "turn_number", "role", "content", "timestamp")
_SCHEDULE_FIELDS = (
    "memory_id", "next_review_at", "interval_ms", "review_count", "ease_factor",
    "stability_days", "last_reviewed_at",
)  # fmt: skip
_PROMOTION_FIELDS = ("id", "memory_id", "from_tier", "to_tier", "promoted_at", "reason")
_FORGETTING_FIELDS = ("id", "memory_id", "tier", "forgotten_at", "retention", "reason")


@dataclass
class Document:
    """A validated export, as records."""

    schema_version: int
    embedding_dim: int | None
    embedding_model: str | None = None
    memories: list[tuple[str, Memory]] = field(default_factory=list)
    sessions: list[tuple[str, SessionState]] = field(default_factory=list)
    transcripts: list[tuple[str, TranscriptEntry]] = field(default_factory=list)
    schedules: list[tuple[str, RepetitionSchedule]] = field(default_factory=list)
    promotions: list[tuple[str, PromotionRecord]] = field(default_factory=list)
    forgotten: list[tuple[str, int, ForgettingRecord]] = field(default_factory=list)
    graph: graph_io.GraphDocument = field(default_factory=graph_io.GraphDocument)
    notes: note_io.NoteDocument = field(default_factory=note_io.NoteDocument)

    @property
    def row_count(self) -> int:
        return (
            sum(
                len(rows)
                for rows in (
                    self.memories,
                    self.sessions,
                    self.transcripts,
                    self.schedules,
                    self.promotions,
                    self.forgotten,
                )  # fmt: skip
            )
            + self.graph.row_count
            + self.notes.row_count
        )


ImportDocument = Document
"""The public name of a validated export (what an import's ``scrub`` hook rewrites)."""


# --- reading and validating ---------------------------------------------------------


def _fail(where: str, problem: str) -> InvalidImportError:
    return InvalidImportError(where, problem)


def _object(
    value: Any, where: str, fields: tuple[str, ...], optional: tuple[str, ...] = ()
) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, f"must be an object, got {type(value).__name__}")
    missing = [f for f in fields if f not in value]
    if missing:
        raise _fail(where, f"missing field(s) {missing}")
    extra = sorted(set(value) - set(fields) - set(optional))
    if extra:
        raise _fail(where, f"unknown field(s) {extra}")
    return value


def _optional_str(row: Mapping[str, Any], name: str, where: str) -> str | None:
    """A nullable text field that older documents lack (read as ``None``)."""
    return _str(row, name, where, nullable=True) if name in row else None


def _int(row: Mapping[str, Any], name: str, where: str, nullable: bool = False) -> int | None:
    value = row[name]
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(f"{where}.{name}", f"must be an integer, got {value!r}")
    if not -(2**63) <= value < 2**63:
        raise _fail(f"{where}.{name}", "is out of the 64-bit range")
    return value


def _num(row: Mapping[str, Any], name: str, where: str, nullable: bool = False) -> float | None:
    value = row[name]
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(f"{where}.{name}", f"must be a finite number, got {value!r}")
    return float(value)


def _str(row: Mapping[str, Any], name: str, where: str, nullable: bool = False) -> str | None:
    value = row[name]
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise _fail(f"{where}.{name}", f"must be a string, got {value!r}")
    return value


def _strs(row: Mapping[str, Any], name: str, where: str) -> tuple[str, ...]:
    value = row[name]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _fail(f"{where}.{name}", "must be a list of non-empty strings")
    return tuple(value)


def _bool(row: Mapping[str, Any], name: str, where: str) -> bool:
    value = row[name]
    if not isinstance(value, bool):
        raise _fail(f"{where}.{name}", f"must be true or false, got {value!r}")
    return value


def _dict(row: Mapping[str, Any], name: str, where: str) -> dict[str, Any]:
    value = row[name]
    if not isinstance(value, dict):
        raise _fail(f"{where}.{name}", f"must be an object, got {type(value).__name__}")
    return value


def _tier(row: Mapping[str, Any], name: str, where: str) -> Tier:
    value = row[name]
    try:
        return Tier(value)
    except ValueError:
        raise _fail(f"{where}.{name}", f"must be one of {[t.value for t in Tier]}") from None


def _embedding(row: Mapping[str, Any], where: str, dim: int | None) -> Any:
    value = row["embedding"]
    if value is None:
        return None
    if not isinstance(value, str):
        raise _fail(f"{where}.embedding", "must be base64 text or null")
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise _fail(f"{where}.embedding", "is not valid base64") from None
    if not raw or len(raw) % 4:
        raise _fail(f"{where}.embedding", "is not a whole number of float32 values")
    vector = np.frombuffer(raw, dtype="<f4")
    if not np.all(np.isfinite(vector)):
        raise _fail(f"{where}.embedding", "contains NaN or infinity")
    if dim is None:
        raise _fail(f"{where}.embedding", "is set but the document's embedding_dim is null")
    if vector.size != dim:
        raise _fail(f"{where}.embedding", f"has {vector.size} dimensions, not {dim}")
    return vector


_FIELD_MESSAGE = re.compile(
    r"^(?:memory|session|schedule|transcript|promotion|forgetting)\.(\w+) (.*)$", re.S
)


def checked(where: str, check: Callable[[Any], None], record: Any) -> None:
    """Run a record validator; point its message at the field's place in the document."""
    try:
        check(record)
    except InvalidInputError as exc:
        match = _FIELD_MESSAGE.match(str(exc))
        if match:
            raise _fail(f"{where}.{match.group(1)}", match.group(2)) from None
        raise _fail(where, str(exc)) from None


def _memory(
    row: Any, tier: Tier, where: str, dim: int | None, max_content_bytes: int | None
) -> Memory:
    required = tuple(f for f in MEMORY_FIELDS if f not in OPTIONAL_MEMORY_FIELDS)
    r = _object(row, where, required, OPTIONAL_MEMORY_FIELDS)
    key = _str(r, "key", where, nullable=True)
    if (tier is Tier.SCRATCHPAD) != (key is not None):
        need = "a key" if tier is Tier.SCRATCHPAD else "no key"
        raise _fail(f"{where}.key", f"a {tier.value} memory must have {need}")
    memory = Memory(
        id=_str(r, "id", where) or "",
        content=_str(r, "content", where) or "",
        tier=tier,
        key=key,
        session_id=_str(r, "session_id", where, nullable=True),
        agent_id=_str(r, "agent_id", where, nullable=True),
        category=_str(r, "category", where, nullable=True),
        tags=_strs(r, "tags", where),
        importance=_num(r, "importance", where) or 0.0,
        retention=_num(r, "retention", where) or 0.0,
        token_count=_int(r, "token_count", where) or 0,
        source=_str(r, "source", where, nullable=True),
        metadata=_dict(r, "metadata", where),
        linked_memories=_strs(r, "linked_memories", where),
        embedding=_embedding(r, where, dim),
        access_count=_int(r, "access_count", where) or 0,
        last_accessed_at=_int(r, "last_accessed_at", where, nullable=True),
        created_at=_int(r, "created_at", where) or 0,
        updated_at=_int(r, "updated_at", where) or 0,
        speaker=_optional_str(r, "speaker", where),
        superseded_by=_optional_str(r, "superseded_by", where),
        valid_to=_int(r, "valid_to", where, nullable=True) if "valid_to" in r else None,
        superseded_reason=_optional_str(r, "superseded_reason", where),
    )
    checked(where, partial(validate_memory, max_content_bytes=max_content_bytes), memory)
    if len(set(memory.tags)) != len(memory.tags):
        raise _fail(f"{where}.tags", "lists a tag twice")
    return memory


def _session(row: Any, where: str) -> SessionState:
    r = _object(row, where, _SESSION_FIELDS)
    session = SessionState(
        session_id=_str(r, "session_id", where) or "",
        started_at=_int(r, "started_at", where) or 0,
        last_active_at=_int(r, "last_active_at", where) or 0,
        turn_number=_int(r, "turn_number", where) or 0,
        active_agents=_strs(r, "active_agents", where),
        scratchpad_state=_strs(r, "scratchpad_state", where),
        metadata=_dict(r, "metadata", where),
        is_active=_bool(r, "is_active", where),
        pending_compaction=_bool(r, "pending_compaction", where),
        ended_at=_int(r, "ended_at", where, nullable=True),
    )
    checked(where, validate_session, session)
    return session


def _transcript(row: Any, where: str) -> TranscriptEntry:
    r = _object(row, where, _TRANSCRIPT_FIELDS, ("speaker",))
    entry = TranscriptEntry(
        id=_str(r, "id", where) or "",
        session_id=_str(r, "session_id", where) or "",
        turn_number=_int(r, "turn_number", where) or 0,
        role=_str(r, "role", where) or "",
        content=_str(r, "content", where) or "",
        timestamp=_int(r, "timestamp", where) or 0,
        speaker=_optional_str(r, "speaker", where),
    )
    checked(where, validate_transcript, entry)
    return entry


def _schedule(row: Any, where: str) -> RepetitionSchedule:
    r = _object(row, where, _SCHEDULE_FIELDS)
    schedule = RepetitionSchedule(
        memory_id=_str(r, "memory_id", where) or "",
        next_review_at=_int(r, "next_review_at", where) or 0,
        interval_ms=_int(r, "interval_ms", where) or 0,
        review_count=_int(r, "review_count", where) or 0,
        ease_factor=_num(r, "ease_factor", where) or 0.0,
        stability_days=_num(r, "stability_days", where) or 0.0,
        last_reviewed_at=_int(r, "last_reviewed_at", where, nullable=True),
    )
    checked(where, validate_schedule, schedule)
    return schedule


def _promotion(row: Any, where: str) -> PromotionRecord:
    r = _object(row, where, _PROMOTION_FIELDS)
    record = PromotionRecord(
        id=_int(r, "id", where) or 0,
        memory_id=_str(r, "memory_id", where) or "",
        from_tier=_tier(r, "from_tier", where),
        to_tier=_tier(r, "to_tier", where),
        promoted_at=_int(r, "promoted_at", where) or 0,
        reason=_str(r, "reason", where, nullable=True),
    )
    checked(where, validate_promotion, record)
    return record


def _forgetting(row: Any, where: str) -> tuple[int, ForgettingRecord]:
    r = _object(row, where, _FORGETTING_FIELDS)
    row_id = _int(r, "id", where) or 0
    if row_id < 1:
        raise _fail(f"{where}.id", "must be >= 1")
    record = ForgettingRecord(
        memory_id=_str(r, "memory_id", where) or "",
        tier=_tier(r, "tier", where),
        forgotten_at=_int(r, "forgotten_at", where) or 0,
        retention=_num(r, "retention", where, nullable=True),
        reason=_str(r, "reason", where) or "",
    )
    checked(where, validate_forgetting, record)
    return row_id, record


def _unique(items: list[tuple[str, Any]], key: Callable[[Any], Any], what: str) -> None:
    seen: set[Any] = set()
    for where, item in items:
        value = key(item)
        if value in seen:
            raise _fail(where, f"repeats {what} {value!r}")
        seen.add(value)


def read_document(path: Path, max_content_bytes: int | None = None) -> Document:
    """Parse and validate an export; raise :class:`InvalidImportError` at the first problem.

    Every record goes through the validators the store's writes use (one rule set).
    """
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise _fail(str(path), f"is not valid JSON ({exc})") from None
    top = ("format", "format_version", "schema_version", "exported_at", "embedding_dim", "tables")
    optional = ("embedding_model",)  # absent from exports before schema version 6
    doc = _object(data, "$", top, optional)
    if doc["format"] != FORMAT:
        raise _fail("$.format", f"must be {FORMAT!r}: this is not a tiered-memory export")
    version = doc["format_version"]
    if isinstance(version, bool) or version != FORMAT_VERSION:  # true == 1 in Python
        raise _fail("$.format_version", f"{doc['format_version']!r} is not {FORMAT_VERSION}")
    schema_version = _int(doc, "schema_version", "$") or 0
    if not 1 <= schema_version <= LATEST_VERSION:
        raise _fail(
            "$.schema_version",
            f"{schema_version} is not supported (1 to {LATEST_VERSION}): upgrade tiered-memory",
        )
    _int(doc, "exported_at", "$")
    dim = _int(doc, "embedding_dim", "$", nullable=True)
    if dim is not None and dim < 1:
        raise _fail("$.embedding_dim", "must be >= 1 or null")
    tables = _object(
        doc["tables"], "$.tables", TABLES, (*graph_io.GRAPH_TABLES, *note_io.NOTE_TABLES)
    )
    for name in TABLES:
        if not isinstance(tables[name], list):
            raise _fail(f"tables.{name}", "must be a list")
    model = doc.get("embedding_model")
    if model is not None and (not isinstance(model, str) or not model):
        raise _fail("$.embedding_model", "must be a non-empty string or null")
    out = Document(schema_version, dim, model)
    for tier in Tier:
        for n, row in enumerate(tables[tier.value]):
            where = f"tables.{tier.value}[{n}]"
            out.memories.append((where, _memory(row, tier, where, dim, max_content_bytes)))
    out.sessions = [(f"tables.sessions[{n}]", _session(r, f"tables.sessions[{n}]"))
                    for n, r in enumerate(tables["sessions"])]  # fmt: skip
    out.transcripts = [
        (f"tables.session_transcripts[{n}]", _transcript(r, f"tables.session_transcripts[{n}]"))
        for n, r in enumerate(tables["session_transcripts"])
    ]
    out.schedules = [
        (f"tables.repetition_schedules[{n}]", _schedule(r, f"tables.repetition_schedules[{n}]"))
        for n, r in enumerate(tables["repetition_schedules"])
    ]
    out.promotions = [
        (f"tables.promotion_log[{n}]", _promotion(r, f"tables.promotion_log[{n}]"))
        for n, r in enumerate(tables["promotion_log"])
    ]
    for n, row in enumerate(tables["forgetting_log"]):
        where = f"tables.forgetting_log[{n}]"
        row_id, record = _forgetting(row, where)
        out.forgotten.append((where, row_id, record))
    _unique(out.memories, lambda m: m.id, "memory id")
    _unique([(w, m) for w, m in out.memories if m.key is not None], lambda m: m.key, "key")
    _unique(out.sessions, lambda s: s.session_id, "session id")
    _unique(out.transcripts, lambda e: e.id, "transcript id")
    _unique(out.schedules, lambda s: s.memory_id, "schedule for memory")
    _unique(out.promotions, lambda p: p.id, "promotion id")
    _unique([(w, i) for w, i, _ in out.forgotten], lambda i: i, "forgetting id")
    out.graph = graph_io.read_graph(tables, {m.id for _, m in out.memories})
    out.notes = note_io.read_notes(tables, {m.id for _, m in out.memories})
    return out

"""Copy a whole store into an empty one, backend to backend, in ONE destination transaction.

The source hands its tables over as an :class:`~persistence.transfer.ExportSource` (one
snapshot); :func:`read_source` turns them into the :class:`ImportDocument` an import of
that source's JSON export would build (the same records, the same order, the same checks
against the destination's content limit), without writing or parsing any JSON; the
destination's :data:`~persistence.transfer.OpenSink` writes it in replace mode inside
one write transaction, so any failure leaves the destination as it was. The embedding
model and size travel in the document's header, the knowledge graph as its rows.

The destination must be empty (no memory, session or forgetting-log row): a copy never
merges. Memory use: the whole document is held in RAM while it is written (about 2 kB
per memory with a 384-dim vector, plus its text), which is fine up to ~100k memories;
streaming page by page would need an :class:`~persistence.transfer.ImportSink` that
writes in parts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from persistence.errors import InvalidInputError
from persistence.records import Progress, Tier
from persistence.transfer import graph_io, note_io
from persistence.transfer.json_export import TABLES, ExportSource
from persistence.transfer.json_import import OpenSink, check_against_store
from persistence.transfer.json_read import Document, ImportDocument, checked
from persistence.validation import (
    validate_forgetting,
    validate_memory,
    validate_promotion,
    validate_schedule,
    validate_session,
    validate_transcript,
)

_R = TypeVar("_R")


@dataclass(frozen=True, slots=True)
class CopyResult:
    """What a copy wrote: rows per table (every table of the export, the graph's too)."""

    source: str
    destination: str
    tables: dict[str, int] = field(default_factory=dict)

    @property
    def memories(self) -> int:
        """Memories copied, all tiers."""
        return sum(self.tables.get(tier.value, 0) for tier in Tier)

    @property
    def rows(self) -> int:
        """Rows copied, all tables."""
        return sum(self.tables.values())


def _records(pages: Iterable[Sequence[_R]]) -> Iterator[_R]:
    for page in pages:
        yield from page


def read_source(
    source: ExportSource,
    *,
    max_content_bytes: int | None = None,
    tick: Callable[[], None] | None = None,
) -> ImportDocument:
    """Every table of ``source`` as the document its JSON export would import as; each
    record passes the validators an import runs (``max_content_bytes`` is the
    destination's limit); ``tick`` is called once per row read."""
    step = tick or (lambda: None)
    facts = source.header()
    doc = Document(facts.schema_version, facts.embedding_dim, facts.embedding_model)
    check_memory = partial(validate_memory, max_content_bytes=max_content_bytes)
    for tier in Tier:
        for n, memory in enumerate(_records(source.memories(tier))):
            doc.memories.append(_place(f"tables.{tier.value}[{n}]", check_memory, memory, step))
    doc.sessions = [_place(f"tables.sessions[{n}]", validate_session, s, step)
                    for n, s in enumerate(_records(source.sessions()))]  # fmt: skip
    doc.transcripts = [
        _place(f"tables.session_transcripts[{n}]", validate_transcript, e, step)
        for n, e in enumerate(_records(source.transcripts()))
    ]
    doc.schedules = [
        _place(f"tables.repetition_schedules[{n}]", validate_schedule, r, step)
        for n, r in enumerate(_records(source.schedules()))
    ]
    doc.promotions = [
        _place(f"tables.promotion_log[{n}]", validate_promotion, p, step)
        for n, p in enumerate(_records(source.promotions()))
    ]
    for n, (row_id, record) in enumerate(_records(source.forgotten())):
        where, _ = _place(f"tables.forgetting_log[{n}]", validate_forgetting, record, step)
        doc.forgotten.append((where, row_id, record))
    graph: dict[str, list[dict[str, Any]]] = {}
    for table in graph_io.GRAPH_TABLES if source.has_graph() else ():
        graph[table] = [
            graph_io.row_to_json(table, row) for row in _records(source.graph_rows(table))
        ]
        for _ in graph[table]:
            step()
    doc.graph = graph_io.read_graph(graph, {m.id for _, m in doc.memories})
    notes: dict[str, list[dict[str, Any]]] = {}
    for table in note_io.NOTE_TABLES if source.has_notes() else ():
        notes[table] = [
            note_io.row_to_json(table, row) for row in _records(source.note_rows(table))
        ]
        for _ in notes[table]:
            step()
    doc.notes = note_io.read_notes(notes, {m.id for _, m in doc.memories})
    return doc


def _place(
    where: str, check: Callable[[Any], None], record: _R, tick: Callable[[], None]
) -> tuple[str, _R]:
    checked(where, check, record)
    tick()
    return where, record


def _many(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what.replace('memory', 'memorie')}s"


def _require_empty(memories: int, sessions: int, forgotten: int, destination: str) -> None:
    """Refuse a destination that holds memories, sessions or forgetting-log rows."""
    if memories or sessions or forgotten:
        held = _many(memories, "memory")
        if sessions or forgotten:
            held += f" ({_many(sessions, 'session')}, {_many(forgotten, 'forgotten memory')})"
        raise InvalidInputError(
            f"{destination} already holds {held}; copy into a new file or an empty database "
            "(nothing was copied)"
        )


def copy_store(
    source: ExportSource,
    open_sink: OpenSink,
    *,
    progress: Progress | None = None,
    max_content_bytes: int | None = None,
    redacted: int = 0,
    source_name: str = "source",
    destination_name: str = "destination",
) -> CopyResult:
    """Copy everything ``source`` holds into the empty store ``open_sink`` opens, in one
    transaction there; return the rows written per table.

    ``progress`` is told (done, total) in units of rows read plus rows written (total =
    twice the rows). ``redacted`` is added to the destination's count of redacted secrets
    (the source's count, so statistics agree). A destination that holds anything is
    refused with :class:`~persistence.InvalidInputError`; any failure rolls the
    destination back to what it was.
    """
    total = 2 * source.row_count()
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None and (done % 500 == 0 or done == total):
            progress(done, total)

    doc = read_source(source, max_content_bytes=max_content_bytes, tick=tick)
    tables = dict.fromkeys((*TABLES, *graph_io.GRAPH_TABLES, *note_io.NOTE_TABLES), 0)

    def count(table: str, outcome: str) -> None:
        if outcome != "skipped":
            tables[table] += 1
        tick()

    if progress is not None:
        progress(done, total)
    with open_sink() as sink:
        _require_empty(
            len(sink.memory_ids()), len(sink.session_ids()), len(sink.forgotten_ids()),
            destination_name,
        )  # fmt: skip
        check_against_store(doc, "replace", sink)
        sink.write(doc, "replace", redacted, count)
    return CopyResult(source_name, destination_name, tables)

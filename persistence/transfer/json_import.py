"""Import a JSON export: validate the whole document, then write it in ONE transaction.

Validation happens before the first write and names the first bad value by its place
in the document (``tables.episodic[17].importance``); :mod:`~persistence.transfer.json_read`
checks the document alone, :func:`check_against_store` checks it against what the store
holds (embedding model and size, references), inside the transaction. The writing is
the backend's, through an :class:`ImportSink`. A failure of any kind rolls the
transaction back, so the store holds exactly what it held before.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Literal, Protocol

from persistence.errors import InvalidImportError
from persistence.records import ImportResult, TableCounts
from persistence.transfer import graph_io, note_io
from persistence.transfer.json_export import TABLES
from persistence.transfer.json_read import Document, ImportDocument, read_document

__all__ = [
    "Count",
    "Document",
    "ImportDocument",
    "ImportSink",
    "Mode",
    "OpenSink",
    "check_against_store",
    "import_document",
    "read_document",
]

Mode = Literal["replace", "merge"]
Count = Callable[[str, str], None]
"""Called once per document row written or skipped: (table, "inserted" | "updated" |
"skipped")."""


class ImportSink(Protocol):
    """A backend's side of an import; every call happens inside one write transaction."""

    def stored_embedding(self) -> tuple[int | None, str | None]:
        """The store's embedding size and model (``None`` when not fixed yet)."""
        ...

    def memory_ids(self) -> set[str]:
        """The ids of every memory the store holds (all tiers)."""
        ...

    def session_ids(self) -> set[str]:
        """The ids of every session the store holds."""
        ...

    def forgotten_ids(self) -> set[str]:
        """The ids of the memories the forgetting log names."""
        ...

    def write(self, doc: ImportDocument, mode: Mode, redacted: int, count: Count) -> None:
        """Write the checked document: ``replace`` makes the store hold exactly it,
        ``merge`` keeps the newer row on id conflicts (by ``updated_at``; sessions by
        ``last_active_at``). ``redacted`` values are added to the store's count of
        redactions. Calls ``count`` once per document row; raises
        :class:`InvalidImportError` if the result would break the store's invariants."""
        ...


OpenSink = Callable[[], AbstractContextManager[ImportSink]]
"""Opens one write transaction and yields the sink that writes in it: leaving the block
normally commits, an exception rolls everything back."""


def _fail(where: str, problem: str) -> InvalidImportError:
    return InvalidImportError(where, problem)


def check_against_store(doc: Document, mode: Mode, sink: ImportSink) -> None:
    """Refuse a document that does not fit the store: vectors of another model or size
    merged into it, or rows naming what neither the document nor the store holds
    (transcripts need their session, schedules their memory; a promotion-log row needs
    its memory, or a forgetting-log row for it: forgetting keeps the audit)."""
    stored_dim, stored_model = sink.stored_embedding()
    if mode == "merge":
        embedded = any(m.embedding is not None for _, m in doc.memories)
        known = None not in (stored_model, doc.embedding_model)
        if embedded and known and stored_model != doc.embedding_model:
            raise _fail(
                "$.embedding_model",
                f"is {doc.embedding_model!r} but this database was embedded with "
                f"{stored_model!r}: vectors of two models cannot be mixed",
            )
        if stored_dim is not None and doc.embedding_dim not in (None, stored_dim):
            raise _fail(
                "$.embedding_dim",
                f"is {doc.embedding_dim} but this database holds {stored_dim}-dim embeddings",
            )
        memory_ids = sink.memory_ids() | {m.id for _, m in doc.memories}
        session_ids = sink.session_ids() | {s.session_id for _, s in doc.sessions}
        forgotten_ids = sink.forgotten_ids()
    else:
        memory_ids = {m.id for _, m in doc.memories}
        session_ids = {s.session_id for _, s in doc.sessions}
        forgotten_ids = set()
    forgotten_ids |= {f.memory_id for _, _, f in doc.forgotten}
    for where, entry in doc.transcripts:
        if entry.session_id not in session_ids:
            raise _fail(f"{where}.session_id", f"names session {entry.session_id!r}, not there")
    for where, schedule in doc.schedules:
        if schedule.memory_id not in memory_ids:
            raise _fail(f"{where}.memory_id", f"names memory {schedule.memory_id!r}, not there")
    for where, record in doc.promotions:
        if record.memory_id not in memory_ids and record.memory_id not in forgotten_ids:
            raise _fail(
                f"{where}.memory_id",
                f"names memory {record.memory_id!r}, neither there nor in the forgetting log",
            )


def import_document(
    open_sink: OpenSink,
    path: Path,
    mode: Mode,
    progress: Callable[[int, int], None] | None = None,
    *,
    max_content_bytes: int | None = None,
    scrub: Callable[[ImportDocument], int] | None = None,
) -> ImportResult:
    """Validate ``path`` and write it through the sink ``open_sink`` yields, in one
    transaction (content over ``max_content_bytes`` is refused). ``scrub`` may rewrite
    the document's records before anything is written (the domain's redaction of
    secrets): it returns how many values it redacted (counted in the store with the
    import), or raises to refuse."""
    doc = read_document(path, max_content_bytes)
    redacted = scrub(doc) if scrub is not None else 0
    counts: dict[str, dict[str, int]] = {t: {"inserted": 0, "updated": 0, "skipped": 0}
                                         for t in (*TABLES, *graph_io.GRAPH_TABLES,
                                                   *note_io.NOTE_TABLES)}  # fmt: skip
    total, done = doc.row_count, 0

    def count(table: str, outcome: str) -> None:
        nonlocal done
        counts[table][outcome] += 1
        done += 1
        if progress is not None and (done % 500 == 0 or done == total):
            progress(done, total)

    with open_sink() as sink:
        check_against_store(doc, mode, sink)
        sink.write(doc, mode, redacted, count)
    tables = {name: TableCounts(**c) for name, c in counts.items()}
    return ImportResult(mode, str(path), tables)

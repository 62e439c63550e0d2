"""NoteStore: notes, their versions and links, and memories' content history, written
once for both engines over the engine's notes SQL (:class:`NotesSql`: statements built by
functions of the same names, run here). The store shares the engine's connections and
transactions: a note written in a memory transaction commits with it.

The functions at the end run the notes' part of an export or import for the engines'
transfer SQL (the same steps on both engines)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from persistence.engine import Connection, Engine
from persistence.note_records import MemoryVersion, Note, NoteVersion
from persistence.statements import (
    Batch,
    Row,
    Statement,
    column,
    count,
    row,
    rows,
    run,
    run_all,
    run_batch,
    value,
)
from persistence.stores.scope import WHOLE, Scope


class NotesSql(Protocol):
    """What an engine's ``notes_sql`` module builds and decodes (``sqlite``'s and
    ``postgres``' both satisfy it). Statements that delete or link return a row per row
    they touched (``RETURNING``)."""

    def fetch(self, note_id: str, scope: Scope = WHOLE) -> Statement: ...
    def links(self, note_id: str) -> Statement: ...
    def to_note(self, row: Row, links: Sequence[Row] = ()) -> Note: ...
    def save(self, note: Note, version: NoteVersion) -> list[Statement]: ...
    def versions(self, note_id: str, scope: Scope = WHOLE) -> Statement: ...
    def to_version(self, row: Row) -> NoteVersion: ...
    def recent(self, tag: str | None, limit: int | None, scope: Scope = WHOLE) -> Statement: ...
    def unindex(self, note_id: str, scope: Scope = WHOLE) -> list[Statement]: ...
    def delete(self, note_id: str, scope: Scope = WHOLE) -> Statement: ...
    def link(self, note_id: str, kind: str, target: str, at: int) -> Statement: ...
    def unlink(self, note_id: str, kind: str, target: str) -> Statement: ...
    def linked_to(self, kind: str, target: str, scope: Scope = WHOLE) -> Statement: ...
    def search(
        self, words: Sequence[str], limit: int, scope: Scope = WHOLE
    ) -> Statement | None: ...
    def count(self, scope: Scope = WHOLE) -> Statement: ...
    def memory_versions(self, memory_id: str) -> Statement: ...
    def to_memory_version(self, row: Row) -> MemoryVersion: ...
    def add_memory_version(self, version: MemoryVersion) -> Statement: ...
    def has_notes(self) -> Statement: ...
    def row_count(self) -> Statement: ...
    def table_rows(self, table: str, scope: Scope = WHOLE) -> Statement: ...
    def insert_rows(self, table: str, rows: Sequence[Sequence[Any]]) -> list[Batch]: ...
    def clear(self) -> list[Statement]: ...


class NoteStore:
    """The :class:`~persistence.NoteStorage` of one store; ``scope`` goes with every
    statement that reads or removes notes (a scoped handle: its agent's notes)."""

    def __init__(self, engine: Engine, sql: NotesSql, scope: Scope = WHOLE) -> None:
        self.engine = engine
        self.sql = sql
        self.scope = scope

    def _note(self, conn: Connection, found: Row) -> Note:
        """The note a row holds, with its links (one more statement)."""
        return self.sql.to_note(found, rows(conn, self.sql.links(found[0])))

    def save_note(self, note: Note, version: NoteVersion) -> None:
        with self.engine.transaction() as conn:
            run_all(conn, self.sql.save(note, version))

    def get_note(self, note_id: str) -> Note | None:
        with self.engine.reading() as conn:
            found = row(conn, self.sql.fetch(note_id, self.scope))
            return None if found is None else self._note(conn, found)

    def note_versions(self, note_id: str) -> list[NoteVersion]:
        with self.engine.reading() as conn:
            found = rows(conn, self.sql.versions(note_id, self.scope))
            return [self.sql.to_version(r) for r in found]

    def list_notes(self, tag: str | None = None, limit: int | None = None) -> list[Note]:
        with self.engine.reading() as conn:
            found = rows(conn, self.sql.recent(tag, limit, self.scope))
            return [self._note(conn, r) for r in found]

    def delete_note(self, note_id: str) -> bool:
        with self.engine.transaction() as conn:
            run_all(conn, self.sql.unindex(note_id, self.scope))
            return count(conn, self.sql.delete(note_id, self.scope)) > 0

    def link_note(self, note_id: str, kind: str, target: str, at: int) -> bool:
        with self.engine.transaction() as conn:
            return count(conn, self.sql.link(note_id, kind, target, at)) > 0

    def unlink_note(self, note_id: str, kind: str, target: str) -> bool:
        with self.engine.transaction() as conn:
            return count(conn, self.sql.unlink(note_id, kind, target)) > 0

    def notes_linked_to(self, kind: str, target: str) -> list[str]:
        with self.engine.reading() as conn:
            return column(conn, self.sql.linked_to(kind, target, self.scope))

    def search_notes(self, words: Sequence[str], limit: int) -> list[tuple[str, float]]:
        if not words:
            return []
        with self.engine.reading() as conn:
            statement = self.sql.search(words, limit, self.scope)
            if statement is None:
                return []
            return [(r[0], float(r[1])) for r in rows(conn, statement)]

    def note_count(self) -> int:
        with self.engine.reading() as conn:
            return int(value(conn, self.sql.count(self.scope)))

    def memory_versions(self, memory_id: str) -> list[MemoryVersion]:
        with self.engine.reading() as conn:
            found = rows(conn, self.sql.memory_versions(memory_id))
            return [self.sql.to_memory_version(r) for r in found]

    def add_memory_version(self, version: MemoryVersion) -> None:
        with self.engine.transaction() as conn:
            run(conn, self.sql.add_memory_version(version))


# --- the notes' part of an export or import (in the caller's transaction) ----------------


def has_notes(conn: Connection, sql: NotesSql) -> bool:
    """True if the store has the note tables (older files have none)."""
    return bool(value(conn, sql.has_notes()))


def note_row_count(conn: Connection, sql: NotesSql) -> int:
    """Rows the note tables hold (an export's share), 0 without them."""
    return int(value(conn, sql.row_count())) if has_notes(conn, sql) else 0


def note_rows(conn: Connection, sql: NotesSql, table: str, scope: Scope) -> list[Row]:
    """Every row of one note table (of ``scope``), in export order."""
    return rows(conn, sql.table_rows(table, scope))


def insert_note_rows(
    conn: Connection, sql: NotesSql, table: str, found: Sequence[Sequence[Any]]
) -> None:
    """Write a document's rows of one note table (a note of the same id replaced)."""
    for batch in sql.insert_rows(table, found):
        run_batch(conn, batch)


def clear_notes(conn: Connection, sql: NotesSql) -> None:
    """Delete every note, and memories' content history (a replace)."""
    run_all(conn, sql.clear())

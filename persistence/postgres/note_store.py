"""PgNoteStore: notes, their versions and links, and memories' content history on
PostgreSQL; the twin of :class:`persistence.sqlite.note_store.NoteStore`. Row-level
security keeps a scoped handle to its agent's notes; the SQL is
:mod:`~persistence.postgres.sql.notes_sql`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import psycopg

from persistence.note_records import MemoryVersion, Note, NoteVersion
from persistence.postgres.database import Connection, PgDatabase
from persistence.postgres.sql import notes_sql
from persistence.postgres.translate import call_error


class PgNoteStore:
    """The :class:`~persistence.NoteStorage` of one server database (one scope)."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        with self.db.transaction() as conn:
            try:
                yield conn
            except psycopg.Error as exc:
                raise call_error(exc, self.db._url) from None

    def save_note(self, note: Note, version: NoteVersion) -> None:
        with self._writing() as conn:
            notes_sql.save(conn, note, version)

    def get_note(self, note_id: str) -> Note | None:
        with self.db.reading() as conn:
            return notes_sql.fetch(conn, note_id)

    def note_versions(self, note_id: str) -> list[NoteVersion]:
        with self.db.reading() as conn:
            return notes_sql.versions(conn, note_id)

    def list_notes(self, tag: str | None = None, limit: int | None = None) -> list[Note]:
        with self.db.reading() as conn:
            return notes_sql.recent(conn, tag, limit)

    def delete_note(self, note_id: str) -> bool:
        with self._writing() as conn:
            return notes_sql.delete(conn, note_id)

    def link_note(self, note_id: str, kind: str, target: str, at: int) -> bool:
        with self._writing() as conn:
            return notes_sql.link(conn, note_id, kind, target, at)

    def unlink_note(self, note_id: str, kind: str, target: str) -> bool:
        with self._writing() as conn:
            return notes_sql.unlink(conn, note_id, kind, target)

    def notes_linked_to(self, kind: str, target: str) -> list[str]:
        with self.db.reading() as conn:
            return notes_sql.linked_to(conn, kind, target)

    def search_notes(self, words: Sequence[str], limit: int) -> list[tuple[str, float]]:
        if not words:
            return []
        with self.db.reading() as conn:
            return notes_sql.search(conn, words, limit)

    def note_count(self) -> int:
        with self.db.reading() as conn:
            return notes_sql.count(conn)

    def memory_versions(self, memory_id: str) -> list[MemoryVersion]:
        with self.db.reading() as conn:
            return notes_sql.memory_versions(conn, memory_id)

    def add_memory_version(self, version: MemoryVersion) -> None:
        with self._writing() as conn:
            notes_sql.add_memory_version(conn, version)

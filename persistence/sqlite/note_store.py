"""NoteStore: notes, their versions and links, and memories' content history in a file.

A part over a :class:`~persistence.sqlite.store.SQLiteStore`'s engine (same
connections, same transactions: a note written in a memory transaction commits with
it); the SQL is :mod:`~persistence.sqlite.sql.notes_sql`. With ``agent_id`` (an
agent-scoped handle) it reads and writes only that agent's notes. Deleting a note runs
with SQLite's ``secure_delete`` on, so the pages it freed hold none of its text.
"""

from __future__ import annotations

from collections.abc import Sequence

from persistence.note_records import MemoryVersion, Note, NoteVersion
from persistence.sqlite.database import Database
from persistence.sqlite.sql import notes_sql
from persistence.sqlite.sql.index_sql import fts5_match


class NoteStore:
    """The :class:`~persistence.NoteStorage` of one file (``agent_id``: one agent's)."""

    def __init__(self, db: Database, agent_id: str | None = None) -> None:
        self.db = db
        self.agent_id = agent_id

    def save_note(self, note: Note, version: NoteVersion) -> None:
        with self.db.transaction() as conn:
            notes_sql.save(conn, note, version)

    def get_note(self, note_id: str) -> Note | None:
        with self.db.reading() as conn:
            return notes_sql.fetch(conn, note_id, self.agent_id)

    def note_versions(self, note_id: str) -> list[NoteVersion]:
        with self.db.reading() as conn:
            return notes_sql.versions(conn, note_id, self.agent_id)

    def list_notes(self, tag: str | None = None, limit: int | None = None) -> list[Note]:
        with self.db.reading() as conn:
            return notes_sql.recent(conn, self.agent_id, tag, limit)

    def delete_note(self, note_id: str) -> bool:
        with self.db.transaction() as conn:
            before = conn.pragma("secure_delete")
            conn.pragma("secure_delete", 1)
            try:
                return notes_sql.delete(conn, note_id, self.agent_id)
            finally:
                conn.pragma("secure_delete", before)

    def link_note(self, note_id: str, kind: str, target: str, at: int) -> bool:
        with self.db.transaction() as conn:
            return notes_sql.link(conn, note_id, kind, target, at)

    def unlink_note(self, note_id: str, kind: str, target: str) -> bool:
        with self.db.transaction() as conn:
            return notes_sql.unlink(conn, note_id, kind, target)

    def notes_linked_to(self, kind: str, target: str) -> list[str]:
        with self.db.reading() as conn:
            return notes_sql.linked_to(conn, kind, target, self.agent_id)

    def search_notes(self, words: Sequence[str], limit: int) -> list[tuple[str, float]]:
        if not words:
            return []
        with self.db.reading() as conn:
            return notes_sql.search(conn, fts5_match(words), limit, self.agent_id)

    def note_count(self) -> int:
        with self.db.reading() as conn:
            return notes_sql.count(conn, self.agent_id)

    def memory_versions(self, memory_id: str) -> list[MemoryVersion]:
        with self.db.reading() as conn:
            return notes_sql.memory_versions(conn, memory_id)

    def add_memory_version(self, version: MemoryVersion) -> None:
        with self.db.transaction() as conn:
            notes_sql.add_memory_version(conn, version)

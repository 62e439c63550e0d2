"""NoteStore: notes, their versions and links, and memories' content history, written
once for both engines over the engine's notes SQL (functions of the same names, the
connection first). The store shares the engine's connections and transactions: a note
written in a memory transaction commits with it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from persistence.engine import Engine
from persistence.note_records import MemoryVersion, Note, NoteVersion
from persistence.stores.scope import WHOLE, Scope


class NoteStore:
    """The :class:`~persistence.NoteStorage` of one store; ``scope`` goes with every
    statement that reads or removes notes (a scoped handle: its agent's notes)."""

    def __init__(self, engine: Engine, sql: Any, scope: Scope = WHOLE) -> None:
        self.engine = engine
        self.sql = sql
        self.scope = scope

    def save_note(self, note: Note, version: NoteVersion) -> None:
        with self.engine.transaction() as conn:
            self.sql.save(conn, note, version)

    def get_note(self, note_id: str) -> Note | None:
        with self.engine.reading() as conn:
            found: Note | None = self.sql.fetch(conn, note_id, self.scope)
            return found

    def note_versions(self, note_id: str) -> list[NoteVersion]:
        with self.engine.reading() as conn:
            return list(self.sql.versions(conn, note_id, self.scope))

    def list_notes(self, tag: str | None = None, limit: int | None = None) -> list[Note]:
        with self.engine.reading() as conn:
            return list(self.sql.recent(conn, tag, limit, self.scope))

    def delete_note(self, note_id: str) -> bool:
        with self.engine.transaction() as conn:
            return bool(self.sql.delete(conn, note_id, self.scope))

    def link_note(self, note_id: str, kind: str, target: str, at: int) -> bool:
        with self.engine.transaction() as conn:
            return bool(self.sql.link(conn, note_id, kind, target, at))

    def unlink_note(self, note_id: str, kind: str, target: str) -> bool:
        with self.engine.transaction() as conn:
            return bool(self.sql.unlink(conn, note_id, kind, target))

    def notes_linked_to(self, kind: str, target: str) -> list[str]:
        with self.engine.reading() as conn:
            return list(self.sql.linked_to(conn, kind, target, self.scope))

    def search_notes(self, words: Sequence[str], limit: int) -> list[tuple[str, float]]:
        if not words:
            return []
        with self.engine.reading() as conn:
            return list(self.sql.search(conn, words, limit, self.scope))

    def note_count(self) -> int:
        with self.engine.reading() as conn:
            return int(self.sql.count(conn, self.scope))

    def memory_versions(self, memory_id: str) -> list[MemoryVersion]:
        with self.engine.reading() as conn:
            return list(self.sql.memory_versions(conn, memory_id))

    def add_memory_version(self, version: MemoryVersion) -> None:
        with self.engine.transaction() as conn:
            self.sql.add_memory_version(conn, version)

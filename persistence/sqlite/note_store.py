"""The SQLite half of the note store: a file's notes SQL for one agent or all.

The shared :class:`~persistence.stores.notes.NoteStore` runs over :class:`AgentNotes`:
:mod:`~persistence.sqlite.sql.notes_sql` with the handle's agent filled in (an
agent-scoped handle reads and writes only that agent's notes), search words made an
FTS5 query, and a delete run with SQLite's ``secure_delete`` on, so the pages it freed
hold none of the note's text.
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from persistence.note_records import Note, NoteVersion
from persistence.sqlite.database import Database
from persistence.sqlite.sql import notes_sql
from persistence.sqlite.sql.index_sql import fts5_match
from persistence.stores import notes


class AgentNotes:
    """:mod:`~persistence.sqlite.sql.notes_sql` as the shared store calls it, scoped to
    ``agent_id`` (``None``: every note)."""

    save = staticmethod(notes_sql.save)
    link = staticmethod(notes_sql.link)
    unlink = staticmethod(notes_sql.unlink)
    memory_versions = staticmethod(notes_sql.memory_versions)
    add_memory_version = staticmethod(notes_sql.add_memory_version)

    def __init__(self, agent_id: str | None = None) -> None:
        self.agent_id = agent_id

    def fetch(self, conn: apsw.Connection, note_id: str) -> Note | None:
        return notes_sql.fetch(conn, note_id, self.agent_id)

    def versions(self, conn: apsw.Connection, note_id: str) -> list[NoteVersion]:
        return notes_sql.versions(conn, note_id, self.agent_id)

    def recent(self, conn: apsw.Connection, tag: str | None, limit: int | None) -> list[Note]:
        return notes_sql.recent(conn, self.agent_id, tag, limit)

    def delete(self, conn: apsw.Connection, note_id: str) -> bool:
        before = conn.pragma("secure_delete")
        conn.pragma("secure_delete", 1)
        try:
            return notes_sql.delete(conn, note_id, self.agent_id)
        finally:
            conn.pragma("secure_delete", before)

    def linked_to(self, conn: apsw.Connection, kind: str, target: str) -> list[str]:
        return notes_sql.linked_to(conn, kind, target, self.agent_id)

    def search(
        self, conn: apsw.Connection, words: Sequence[str], limit: int
    ) -> list[tuple[str, float]]:
        return notes_sql.search(conn, fts5_match(words), limit, self.agent_id)

    def count(self, conn: apsw.Connection) -> int:
        return notes_sql.count(conn, self.agent_id)


class NoteStore(notes.NoteStore):
    """The notes of one file (``agent_id``: one agent's), built as the backend builds it."""

    def __init__(self, db: Database, agent_id: str | None = None) -> None:
        super().__init__(db, AgentNotes(agent_id))
        self.agent_id = agent_id

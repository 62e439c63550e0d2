"""The shared note store over a file: :mod:`~persistence.sqlite.sql.notes_sql` as it is
(each statement carries the handle's :class:`~persistence.stores.scope.Scope`; search
words become an FTS5 query; a note's writes and deletes come with the statements that keep
its keywords in ``notes_fts``, and the pages a delete frees are zeroed: ``secure_delete``
is on for every connection that writes)."""

from __future__ import annotations

from persistence.sqlite.database import Database
from persistence.sqlite.sql import notes_sql
from persistence.stores import notes
from persistence.stores.scope import Scope


class NoteStore(notes.NoteStore):
    """The notes of one file (``agent_id``: one agent's), built as the backend builds it."""

    def __init__(self, engine: Database, agent_id: str | None = None) -> None:
        super().__init__(engine, notes_sql, Scope.of(agent_id))
        self.agent_id = agent_id

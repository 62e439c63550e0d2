"""The shared note store over a server database (see
:class:`persistence.stores.notes.NoteStore`): :mod:`~persistence.postgres.sql.notes_sql`
as it is; each statement carries the handle's scope and row-level security keeps a
scoped handle to its agent's notes again."""

from __future__ import annotations

from persistence.postgres.database import PgDatabase
from persistence.postgres.sql import notes_sql
from persistence.stores.notes import NoteStore
from persistence.stores.scope import WHOLE, Scope


class PgNoteStore(NoteStore):
    """The notes of one server database (one scope), built as the backend builds it."""

    def __init__(self, engine: PgDatabase, scope: Scope = WHOLE) -> None:
        super().__init__(engine, notes_sql, scope)

"""The SQLite half of the session store: a file's session SQL for one agent or all.

The shared :class:`~persistence.stores.sessions.SessionStore` runs over
:class:`AgentSessions`: :mod:`~persistence.sqlite.sql.session_sql` with the handle's
agent filled in. With ``agent_id`` (an agent-scoped handle) the store sees only the
sessions that agent started, and their transcripts; the sessions an unscoped handle
started are store-wide (the operator's). PostgreSQL needs none of this: row-level
security scopes its statements.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import apsw

from persistence.records import SessionState, TranscriptEntry
from persistence.sqlite.database import Database
from persistence.sqlite.sql import session_sql
from persistence.stores import sessions
from persistence.stores.config import StoreConfig
from persistence.validation import DEFAULT_MAX_CONTENT_BYTES


class AgentSessions:
    """:mod:`~persistence.sqlite.sql.session_sql` as the shared store calls it, scoped to
    ``agent_id`` (``None``: every session)."""

    encode_row = staticmethod(session_sql.encode_row)

    def __init__(self, agent_id: str | None = None) -> None:
        self.agent_id = agent_id

    def upsert(self, conn: apsw.Connection, row: tuple[Any, ...]) -> bool:
        return session_sql.upsert(conn, row, self.agent_id)

    def fetch(self, conn: apsw.Connection, session_id: str) -> SessionState | None:
        return session_sql.fetch(conn, session_id, self.agent_id)

    def is_active(self, conn: apsw.Connection, session_id: str) -> bool | None:
        return session_sql.is_active(conn, session_id, self.agent_id)

    def delete(self, conn: apsw.Connection, session_id: str) -> bool:
        return session_sql.delete(conn, session_id, self.agent_id)

    def recent(self, conn: apsw.Connection, limit: int | None) -> list[SessionState]:
        return session_sql.recent(conn, limit, self.agent_id)

    def pending_compaction(self, conn: apsw.Connection) -> list[SessionState]:
        return session_sql.pending_compaction(conn, self.agent_id)

    def active(self, conn: apsw.Connection) -> list[SessionState]:
        return session_sql.active(conn, self.agent_id)

    def touch(self, conn: apsw.Connection, session_id: str, at: int) -> None:
        """Another agent's session is left as it is."""
        if self.agent_id is None or self.fetch(conn, session_id):
            session_sql.touch(conn, session_id, at)

    def append_transcript(self, conn: apsw.Connection, entry: TranscriptEntry) -> bool:
        """False (nothing written) if the handle sees no such session."""
        if self.fetch(conn, entry.session_id) is None:
            return False
        session_sql.append_transcript(conn, entry)
        return True

    def transcripts(self, conn: apsw.Connection, session_id: str) -> list[TranscriptEntry]:
        """Another agent's session has none, as this handle sees it."""
        if self.agent_id is not None and not self.fetch(conn, session_id):
            return []
        return session_sql.transcripts(conn, session_id)


class SessionStore(sessions.SessionStore):
    """The shared session store over a file, built from a clock (as an agent-scoped
    backend builds it): ``agent_id``, only that agent's sessions."""

    def __init__(self, db: Database, clock: Callable[[], int], agent_id: str | None = None) -> None:
        super().__init__(db, AgentSessions(agent_id), StoreConfig(clock, DEFAULT_MAX_CONTENT_BYTES))
        self.agent_id = agent_id

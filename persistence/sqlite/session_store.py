"""SessionStore: conversation sessions and their transcripts.

One part of :class:`~persistence.sqlite.store.SQLiteStore`, over its
:class:`~persistence.sqlite.database.Database`; the SQL is
:mod:`~persistence.sqlite.sql.session_sql`. Deleting a session keeps the memories
that came from it. With ``agent_id`` (an agent-scoped handle) the store sees only the
sessions that agent started, and their transcripts; the sessions an unscoped handle
started are store-wide (the operator's).
"""

from __future__ import annotations

from collections.abc import Callable

from persistence.errors import InvalidInputError, SessionNotFoundError
from persistence.records import SessionState, TranscriptEntry, new_id
from persistence.sqlite.database import Database
from persistence.sqlite.sql import session_sql
from persistence.validation import require_int, require_str, validate_session, validate_transcript


class SessionStore:
    """Sessions and transcripts in one file; ``clock`` (epoch ms) stamps transcript lines;
    ``agent_id``: only that agent's sessions (see the module docstring)."""

    def __init__(self, db: Database, clock: Callable[[], int], agent_id: str | None = None) -> None:
        self.db = db
        self.clock = clock
        self.agent_id = agent_id
        self._reading = db.reading
        self._transaction = db.transaction

    def put_session(self, session: SessionState) -> None:
        """Insert or update a session (its transcript is kept)."""
        validate_session(session)
        row = session_sql.encode_row(session)
        with self._transaction() as conn:
            if not session_sql.upsert(conn, row, self.agent_id):
                raise InvalidInputError(
                    f"session id {session.session_id!r} is taken in this file by another agent"
                )

    def get_session(self, session_id: str) -> SessionState | None:
        """The session, or ``None``."""
        require_str(session_id, "session_id")
        with self._reading() as conn:
            return session_sql.fetch(conn, session_id, self.agent_id)

    def session_is_active(self, session_id: str) -> bool | None:
        """Whether the session is active (not ended); ``None`` if there is none."""
        require_str(session_id, "session_id")
        with self._reading() as conn:
            return session_sql.is_active(conn, session_id, self.agent_id)

    def delete_session(self, session_id: str) -> bool:
        """Delete a session and its transcript; memories from it stay. True if it existed."""
        require_str(session_id, "session_id")
        with self._transaction() as conn:
            return session_sql.delete(conn, session_id, self.agent_id)

    def get_sessions(self, limit: int | None = None) -> list[SessionState]:
        """All sessions, ended or not, most recently active first."""
        require_int(limit, "limit", allow_none=True, minimum=0)
        with self._reading() as conn:
            return session_sql.recent(conn, limit, self.agent_id)

    def get_sessions_pending_compaction(self) -> list[SessionState]:
        """Sessions flagged for compaction, least recently active first."""
        with self._reading() as conn:
            return session_sql.pending_compaction(conn, self.agent_id)

    def touch_session(self, session_id: str, at: int) -> None:
        """Move a session's ``last_active_at`` forward to ``at`` (never backward)."""
        require_str(session_id, "session_id")
        require_int(at, "at")
        with self._transaction() as conn:
            if self.agent_id is None or session_sql.fetch(conn, session_id, self.agent_id):
                session_sql.touch(conn, session_id, at)

    def get_active_sessions(self) -> list[SessionState]:
        """Sessions not yet ended, most recently active first."""
        with self._reading() as conn:
            return session_sql.active(conn, self.agent_id)

    def append_transcript(
        self, session_id: str, turn: int, role: str, content: str, *, speaker: str | None = None
    ) -> TranscriptEntry:
        """Add a transcript line; the session's turn and ``last_active_at`` move forward."""
        entry = TranscriptEntry(new_id(), session_id, turn, role, content, self.clock(), speaker)
        validate_transcript(entry)
        with self._transaction() as conn:
            if session_sql.fetch(conn, session_id, self.agent_id) is None:
                raise SessionNotFoundError(f"no session {session_id}: start it first")
            session_sql.append_transcript(conn, entry)
        return entry

    def get_transcripts(self, session_id: str) -> list[TranscriptEntry]:
        """A session's transcript in turn order."""
        require_str(session_id, "session_id")
        with self._reading() as conn:
            if self.agent_id is not None and not session_sql.fetch(conn, session_id, self.agent_id):
                return []
            return session_sql.transcripts(conn, session_id)

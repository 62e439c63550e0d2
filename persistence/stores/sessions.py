"""SessionStore: conversation sessions and their transcripts, written once for both
engines over the engine's ``session_sql`` (functions of the same names, the connection
first). Deleting a session keeps the memories that came from it."""

from __future__ import annotations

from typing import Any

from persistence.engine import Engine
from persistence.errors import InvalidInputError, SessionNotFoundError
from persistence.records import SessionState, TranscriptEntry, new_id
from persistence.stores.config import StoreConfig
from persistence.validation import require_int, require_str, validate_session, validate_transcript


class SessionStore:
    """Sessions and transcripts; the config's clock (epoch ms) stamps transcript lines.
    The config's scope goes with every statement: a scoped handle sees the sessions its
    agent started and their transcripts; a session id another agent holds is refused."""

    def __init__(self, engine: Engine, sql: Any, config: StoreConfig) -> None:
        self.engine = engine
        self.sql = sql
        self.config = config

    def put_session(self, session: SessionState) -> None:
        """Insert or update a session (its transcript is kept)."""
        validate_session(session)
        row = self.sql.encode_row(session)
        with self.engine.transaction() as conn:
            if not self.sql.upsert(conn, row, self.config.scope):
                raise InvalidInputError(
                    f"session id {session.session_id!r} is taken in this file by another agent"
                )

    def get_session(self, session_id: str) -> SessionState | None:
        """The session, or ``None``."""
        require_str(session_id, "session_id")
        with self.engine.reading() as conn:
            found: SessionState | None = self.sql.fetch(conn, session_id, self.config.scope)
            return found

    def session_is_active(self, session_id: str) -> bool | None:
        """Whether the session is active (not ended); ``None`` if there is none."""
        require_str(session_id, "session_id")
        with self.engine.reading() as conn:
            active: bool | None = self.sql.is_active(conn, session_id, self.config.scope)
            return active

    def delete_session(self, session_id: str) -> bool:
        """Delete a session and its transcript; memories from it stay. True if it existed."""
        require_str(session_id, "session_id")
        with self.engine.transaction() as conn:
            return bool(self.sql.delete(conn, session_id, self.config.scope))

    def get_sessions(self, limit: int | None = None) -> list[SessionState]:
        """All sessions, ended or not, most recently active first."""
        require_int(limit, "limit", allow_none=True, minimum=0)
        with self.engine.reading() as conn:
            return list(self.sql.recent(conn, limit, self.config.scope))

    def get_sessions_pending_compaction(self) -> list[SessionState]:
        """Sessions flagged for compaction, least recently active first."""
        with self.engine.reading() as conn:
            return list(self.sql.pending_compaction(conn, self.config.scope))

    def touch_session(self, session_id: str, at: int) -> None:
        """Move a session's ``last_active_at`` forward to ``at`` (never backward)."""
        require_str(session_id, "session_id")
        require_int(at, "at")
        with self.engine.transaction() as conn:
            self.sql.touch(conn, session_id, at, self.config.scope)

    def get_active_sessions(self) -> list[SessionState]:
        """Sessions not yet ended, most recently active first."""
        with self.engine.reading() as conn:
            return list(self.sql.active(conn, self.config.scope))

    def append_transcript(
        self, session_id: str, turn: int, role: str, content: str, *, speaker: str | None = None
    ) -> TranscriptEntry:
        """Add a transcript line; the session's turn and ``last_active_at`` move forward.
        Raises :class:`SessionNotFoundError` for a session not started."""
        entry = TranscriptEntry(
            new_id(), session_id, turn, role, content, self.config.clock(), speaker
        )
        validate_transcript(entry)
        with self.engine.transaction() as conn:
            if not self.sql.append_transcript(conn, entry, self.config.scope):
                raise SessionNotFoundError(f"no session {session_id}: start it first")
        return entry

    def get_transcripts(self, session_id: str) -> list[TranscriptEntry]:
        """A session's transcript in turn order."""
        require_str(session_id, "session_id")
        with self.engine.reading() as conn:
            return list(self.sql.transcripts(conn, session_id, self.config.scope))

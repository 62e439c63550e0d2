"""PgSessionStore: conversation sessions and their transcripts on PostgreSQL.

One part of :class:`~persistence.postgres.store.PostgresStore`, the twin of
:class:`persistence.sqlite.session_store.SessionStore` (same validation, same errors);
the SQL is :mod:`~persistence.postgres.sql.session_sql`. Deleting a session keeps the
memories that came from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from persistence.errors import SessionNotFoundError
from persistence.postgres.config import StoreConfig
from persistence.postgres.database import Connection, PgDatabase
from persistence.postgres.sql import session_sql
from persistence.postgres.translate import call_error
from persistence.records import SessionState, TranscriptEntry, new_id
from persistence.validation import require_int, require_str, validate_session, validate_transcript


class PgSessionStore:
    """Sessions and transcripts on one server; the config's clock stamps transcript lines."""

    def __init__(self, db: PgDatabase, config: StoreConfig) -> None:
        self.db = db
        self.config = config

    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        with self.db.transaction() as conn:
            try:
                yield conn
            except psycopg.Error as exc:
                raise call_error(exc, self.db._url) from None

    def put_session(self, session: SessionState) -> None:
        """Insert or update a session (its transcript is kept)."""
        validate_session(session)
        row = session_sql.encode_row(session)
        with self._writing() as conn:
            session_sql.upsert(conn, row)

    def get_session(self, session_id: str) -> SessionState | None:
        """The session, or ``None``."""
        require_str(session_id, "session_id")
        with self.db.reading() as conn:
            return session_sql.fetch(conn, session_id)

    def session_is_active(self, session_id: str) -> bool | None:
        """Whether the session is active (not ended); ``None`` if there is none."""
        require_str(session_id, "session_id")
        with self.db.reading() as conn:
            return session_sql.is_active(conn, session_id)

    def delete_session(self, session_id: str) -> bool:
        """Delete a session and its transcript; memories from it stay. True if it existed."""
        require_str(session_id, "session_id")
        with self._writing() as conn:
            return session_sql.delete(conn, session_id)

    def get_sessions(self, limit: int | None = None) -> list[SessionState]:
        """All sessions, ended or not, most recently active first."""
        require_int(limit, "limit", allow_none=True, minimum=0)
        with self.db.reading() as conn:
            return session_sql.recent(conn, limit)

    def get_sessions_pending_compaction(self) -> list[SessionState]:
        """Sessions flagged for compaction, least recently active first."""
        with self.db.reading() as conn:
            return session_sql.pending_compaction(conn)

    def touch_session(self, session_id: str, at: int) -> None:
        """Move a session's ``last_active_at`` forward to ``at`` (never backward)."""
        require_str(session_id, "session_id")
        require_int(at, "at")
        with self._writing() as conn:
            session_sql.touch(conn, session_id, at)

    def get_active_sessions(self) -> list[SessionState]:
        """Sessions not yet ended, most recently active first."""
        with self.db.reading() as conn:
            return session_sql.active(conn)

    def append_transcript(
        self, session_id: str, turn: int, role: str, content: str, *, speaker: str | None = None
    ) -> TranscriptEntry:
        """Add a transcript line; the session's turn and ``last_active_at`` move forward
        (one statement). Raises :class:`SessionNotFoundError` for a session not started."""
        entry = TranscriptEntry(
            new_id(), session_id, turn, role, content, self.config.clock(), speaker
        )
        validate_transcript(entry)
        with self._writing() as conn:
            if not session_sql.append_transcript(conn, entry):
                raise SessionNotFoundError(f"no session {session_id}: start it first")
        return entry

    def get_transcripts(self, session_id: str) -> list[TranscriptEntry]:
        """A session's transcript in turn order."""
        require_str(session_id, "session_id")
        with self.db.reading() as conn:
            return session_sql.transcripts(conn, session_id)

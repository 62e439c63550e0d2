"""Sessions: start and end, transcripts with turn numbers that count themselves."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from persistence import (
    InvalidInputError,
    MemoryStorage,
    SessionNotFoundError,
    SessionState,
    TranscriptEntry,
    new_id,
    require_content,
    require_mapping,
    require_str,
    require_str_tuple,
)
from tiered_memory.redaction import Redactor, count_in_file, redact_text, redact_value


class SessionManager:
    """Session lifecycle over the store; reach it as ``manager.sessions``."""

    def __init__(
        self, store: MemoryStorage, clock: Callable[[], int], *, redactor: Redactor | None = None
    ) -> None:
        self._store = store
        self._clock = clock
        self._redactor = redactor  # transcript lines and metadata values lose their secrets

    def start(
        self,
        session_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        agents: tuple[str, ...] = (),
    ) -> SessionState:
        """Start a session (a fresh id if none is given); an existing id is refused."""
        require_str(session_id, "session_id", allow_none=True, allow_empty=False)
        require_mapping(metadata, "metadata", allow_none=True)
        require_str_tuple(agents, "agents")
        metadata, redacted = redact_value(self._redactor, metadata)
        now = self._clock()
        session = SessionState(
            session_id=session_id or new_id(),
            started_at=now,
            last_active_at=now,
            active_agents=tuple(agents),
            metadata=dict(metadata or {}),
        )
        with self._store.transaction():
            if self._store.sessions.get_session(session.session_id) is not None:
                raise InvalidInputError(f"session {session.session_id} already exists")
            count_in_file(self._store, redacted)
            self._store.sessions.put_session(session)
        return session

    def get(self, session_id: str) -> SessionState | None:
        """The session, or ``None``."""
        return self._store.sessions.get_session(session_id)

    def require(self, session_id: str) -> SessionState:
        """The session, or :class:`SessionNotFoundError`."""
        session = self._store.sessions.get_session(session_id)
        if session is None:
            raise SessionNotFoundError(f"no session {session_id}: start_session() it first")
        return session

    def end(self, session_id: str) -> SessionState:
        """End a session (ending twice keeps the first end time)."""
        with self._store.transaction():
            session = self.require(session_id)
            if not session.is_active:
                return session
            now = self._clock()
            ended = replace(
                session,
                is_active=False,
                ended_at=now,
                last_active_at=max(now, session.last_active_at),
            )
            self._store.sessions.put_session(ended)
        return ended

    def append(
        self, session_id: str, role: str, content: str, *, speaker: str | None = None
    ) -> TranscriptEntry:
        """Add a transcript line as the session's next turn."""
        require_str(role, "role", allow_empty=False)
        require_content(content)
        require_str(speaker, "speaker", allow_none=True)
        content, redacted = redact_text(self._redactor, content)
        with self._store.transaction():
            session = self.require(session_id)
            if not session.is_active:
                raise InvalidInputError(f"session {session_id} has ended")
            count_in_file(self._store, redacted)
            turn = session.turn_number + 1
            return self._store.sessions.append_transcript(
                session_id, turn, role, content, speaker=speaker
            )

    def transcript(self, session_id: str) -> list[TranscriptEntry]:
        """Every line of a session's transcript, in order."""
        self.require(session_id)
        return self._store.sessions.get_transcripts(session_id)

    def delete(self, session_id: str) -> bool:
        """Delete a session and its transcript; True if it existed."""
        return self._store.sessions.delete_session(session_id)

    def active(self) -> list[SessionState]:
        """Sessions not yet ended, most recently active first."""
        return self._store.sessions.get_active_sessions()

    def all(self, limit: int | None = None) -> list[SessionState]:
        """Every session, ended or not, most recently active first."""
        return self._store.sessions.get_sessions(limit)

    def require_active(self, session_id: str) -> SessionState:
        """The session, or :class:`SessionNotFoundError` / :class:`InvalidInputError` if
        it has ended."""
        session = self.require(session_id)
        if not session.is_active:
            raise InvalidInputError(f"session {session_id} has ended")
        return session

    def check_active(self, session_id: str) -> None:
        """:meth:`require_active` without reading the session: the check each write into a
        session makes."""
        active = self._store.sessions.session_is_active(session_id)
        if active is None:
            raise SessionNotFoundError(f"no session {session_id}: start_session() it first")
        if not active:
            raise InvalidInputError(f"session {session_id} has ended")

    def touch(self, session_id: str) -> None:
        """Mark a session active now (it must exist and not have ended)."""
        with self._store.transaction():
            self.require_active(session_id)
            self._store.sessions.touch_session(session_id, self._clock())

    def mark_for_compaction(self, session_id: str, pending: bool = True) -> SessionState:
        """Flag (or unflag) a session whose transcript awaits compaction."""
        with self._store.transaction():
            session = replace(self.require(session_id), pending_compaction=pending)
            self._store.sessions.put_session(session)
        return session

    def pending_compaction(self) -> list[SessionState]:
        """Sessions flagged for compaction, least recently active first."""
        return self._store.sessions.get_sessions_pending_compaction()


class SessionCalls:
    """The manager's session and transcript calls; the manager provides its
    :class:`SessionManager` and ``_require_open``."""

    sessions: SessionManager

    def _require_open(self) -> None:
        raise NotImplementedError  # the manager's

    def start_session(
        self, session_id: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> SessionState:
        """Start a session; see :meth:`SessionManager.start`."""
        self._require_open()
        return self.sessions.start(session_id, metadata)

    def end_session(self, session_id: str) -> SessionState:
        """End a session."""
        self._require_open()
        return self.sessions.end(session_id)

    def get_session(self, session_id: str) -> SessionState | None:
        """The session, or ``None``."""
        self._require_open()
        return self.sessions.get(session_id)

    def active_sessions(self) -> list[SessionState]:
        """Sessions not yet ended, most recently active first."""
        self._require_open()
        return self.sessions.active()

    def append_transcript(
        self, session_id: str, role: str, content: str, *, speaker: str | None = None
    ) -> TranscriptEntry:
        """Add a line to a session's transcript as its next turn (``speaker``: who said
        it, when ``role`` alone does not tell, as in a chat of several people)."""
        self._require_open()
        return self.sessions.append(session_id, role, content, speaker=speaker)

    def get_transcript(self, session_id: str) -> list[TranscriptEntry]:
        """A session's transcript, in order."""
        self._require_open()
        return self.sessions.transcript(session_id)

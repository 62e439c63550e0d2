"""SessionStore: conversation sessions and their transcripts, written once for both
engines: it runs the statements the engine's ``session_sql`` builds (:class:`SessionSql`)
and decodes their rows with it. Deleting a session keeps the memories that came from it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from persistence.engine import Engine
from persistence.errors import InvalidInputError, SessionNotFoundError
from persistence.records import SessionState, TranscriptEntry, new_id
from persistence.statements import Statement, count, row, rows, run, run_all
from persistence.stores.config import StoreConfig
from persistence.stores.scope import Scope
from persistence.stores.stamped import StampedCache
from persistence.validation import require_int, require_str, validate_session, validate_transcript


class SessionSql(Protocol):
    """What each engine's ``session_sql`` module builds and decodes for the store."""

    def encode_row(self, session: SessionState) -> tuple[Any, ...]: ...
    def to_session(self, row: Sequence[Any]) -> SessionState: ...
    def to_entry(self, row: Sequence[Any]) -> TranscriptEntry: ...
    def upsert(self, row: tuple[Any, ...], scope: Scope = ...) -> Statement: ...
    def fetch(self, session_id: str, scope: Scope = ...) -> Statement: ...
    def is_active(self, session_id: str, scope: Scope = ...) -> Statement: ...
    def delete(self, session_id: str, scope: Scope = ...) -> Statement: ...
    def recent(self, limit: int | None, scope: Scope = ...) -> Statement: ...
    def active(self, scope: Scope = ...) -> Statement: ...
    def pending_compaction(self, scope: Scope = ...) -> Statement: ...
    def touch(self, session_id: str, at: int, scope: Scope = ...) -> Statement: ...
    def transcripts(self, session_id: str, scope: Scope = ...) -> Statement: ...
    def append_transcript(
        self, entry: TranscriptEntry, scope: Scope = ...
    ) -> tuple[Statement, ...]:
        """The line's statements: the first returns a row if the session is in scope
        (else it writes nothing), the rest run only then."""
        ...


class SessionStore:
    """Sessions and transcripts; the config's clock (epoch ms) stamps transcript lines.
    The config's scope goes with every statement: a scoped handle sees the sessions its
    agent started and their transcripts; a session id another agent holds is refused."""

    def __init__(self, engine: Engine, sql: SessionSql, config: StoreConfig) -> None:
        self.engine = engine
        self.sql = sql
        self.config = config
        self._rows: StampedCache[str, Sequence[Any]] = StampedCache(engine)

    def put_session(self, session: SessionState) -> None:
        """Insert or update a session (its transcript is kept)."""
        validate_session(session)
        upsert = self.sql.upsert(self.sql.encode_row(session), self.config.scope)
        with self.engine.transaction() as conn:
            if not count(conn, upsert):
                raise InvalidInputError(
                    f"session id {session.session_id!r} is taken in this file by another agent"
                )

    def get_session(self, session_id: str) -> SessionState | None:
        """The session, or ``None``. Its row is kept in RAM until something commits
        (:class:`~persistence.stores.stamped.StampedCache`): ``context()`` asks for each
        session it shows, call after call; each call gets a new ``SessionState``."""
        require_str(session_id, "session_id")
        found = self._rows.get_many([session_id], self._read_rows).get(session_id)
        if found is None:
            return None
        with self.engine.reading():  # a damaged row's errors are translated as a read's
            return self.sql.to_session(found)

    def _read_rows(self, session_ids: list[str]) -> dict[str, Sequence[Any]]:
        found: dict[str, Sequence[Any]] = {}
        with self.engine.reading() as conn:
            for session_id in session_ids:
                session = row(conn, self.sql.fetch(session_id, self.config.scope))
                if session is not None:
                    found[session_id] = session
        return found

    def session_is_active(self, session_id: str) -> bool | None:
        """Whether the session is active (not ended); ``None`` if there is none."""
        require_str(session_id, "session_id")
        with self.engine.reading() as conn:
            found = row(conn, self.sql.is_active(session_id, self.config.scope))
            return None if found is None else bool(found[0])

    def delete_session(self, session_id: str) -> bool:
        """Delete a session and its transcript; memories from it stay. True if it existed."""
        require_str(session_id, "session_id")
        with self.engine.transaction() as conn:
            return count(conn, self.sql.delete(session_id, self.config.scope)) > 0

    def get_sessions(self, limit: int | None = None) -> list[SessionState]:
        """All sessions, ended or not, most recently active first."""
        require_int(limit, "limit", allow_none=True, minimum=0)
        return self._sessions(self.sql.recent(limit, self.config.scope))

    def get_sessions_pending_compaction(self) -> list[SessionState]:
        """Sessions flagged for compaction, least recently active first."""
        return self._sessions(self.sql.pending_compaction(self.config.scope))

    def touch_session(self, session_id: str, at: int) -> None:
        """Move a session's ``last_active_at`` forward to ``at`` (never backward)."""
        require_str(session_id, "session_id")
        require_int(at, "at")
        with self.engine.transaction() as conn:
            run(conn, self.sql.touch(session_id, at, self.config.scope))

    def get_active_sessions(self) -> list[SessionState]:
        """Sessions not yet ended, most recently active first."""
        return self._sessions(self.sql.active(self.config.scope))

    def append_transcript(
        self, session_id: str, turn: int, role: str, content: str, *, speaker: str | None = None
    ) -> TranscriptEntry:
        """Add a transcript line; the session's turn and ``last_active_at`` move forward.
        Raises :class:`SessionNotFoundError` for a session not started."""
        entry = TranscriptEntry(
            new_id(), session_id, turn, role, content, self.config.clock(), speaker
        )
        validate_transcript(entry)
        first, *rest = self.sql.append_transcript(entry, self.config.scope)
        with self.engine.transaction() as conn:
            if not count(conn, first):
                raise SessionNotFoundError(f"no session {session_id}: start it first")
            run_all(conn, rest)
        return entry

    def get_transcripts(self, session_id: str) -> list[TranscriptEntry]:
        """A session's transcript in turn order."""
        require_str(session_id, "session_id")
        with self.engine.reading() as conn:
            found = rows(conn, self.sql.transcripts(session_id, self.config.scope))
            return [self.sql.to_entry(r) for r in found]

    def _sessions(self, statement: Statement) -> list[SessionState]:
        """The sessions ``statement`` reads, decoded."""
        with self.engine.reading() as conn:
            return [self.sql.to_session(r) for r in rows(conn, statement)]

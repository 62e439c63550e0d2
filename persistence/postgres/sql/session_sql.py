"""SQL of sessions and their transcripts (``tm_sessions``, ``tm_transcripts``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from persistence.codecs import decode_json
from persistence.records import SessionState, TranscriptEntry
from persistence.stores.rows import session_of, session_row

Connection = psycopg.Connection[Any]

_COLUMNS = (
    "session_id, started_at, last_active_at, turn_number, active_agents, scratchpad_state, "
    "metadata, is_active, pending_compaction, ended_at"
)
_SELECT = f"SELECT {_COLUMNS} FROM tm_sessions"
_UPSERT = (
    f"INSERT INTO tm_sessions ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (scope, session_id) DO UPDATE SET started_at = excluded.started_at, "
    "last_active_at = excluded.last_active_at, turn_number = excluded.turn_number, "
    "active_agents = excluded.active_agents, scratchpad_state = excluded.scratchpad_state, "
    "metadata = excluded.metadata, is_active = excluded.is_active, "
    "pending_compaction = excluded.pending_compaction, ended_at = excluded.ended_at"
)
_BY_ID = 'session_id COLLATE "C"'
_TRANSCRIPT_COLUMNS = "id, session_id, turn_number, role, content, timestamp, speaker"


def to_session(row: Sequence[Any]) -> SessionState:
    """The session a row of the session columns holds."""
    return session_of(
        row, tuple(decode_json(row[4])), tuple(decode_json(row[5])), decode_json(row[6])
    )


def encode_row(session: SessionState) -> tuple[Any, ...]:
    """Column values of ``session`` (validated) in insert order; JSON as SQLite writes it."""
    return session_row(session)


def upsert(conn: Connection, row: tuple[Any, ...]) -> bool:
    """Insert or update a session (its transcript is kept); True (row-level security, not
    this statement, keeps another agent's session out of reach)."""
    conn.execute(_UPSERT, row)
    return True


def fetch(conn: Connection, session_id: str) -> SessionState | None:
    """The session, or ``None``."""
    row = conn.execute(f"{_SELECT} WHERE session_id = %s", (session_id,)).fetchone()
    return None if row is None else to_session(row)


def is_active(conn: Connection, session_id: str) -> bool | None:
    """Whether the session is active; ``None`` if there is none (no decoding)."""
    row = conn.execute(
        "SELECT is_active FROM tm_sessions WHERE session_id = %s", (session_id,)
    ).fetchone()
    return None if row is None else bool(row[0])


def delete(conn: Connection, session_id: str) -> bool:
    """Delete a session; its transcript goes with it (ON DELETE CASCADE)."""
    return conn.execute("DELETE FROM tm_sessions WHERE session_id = %s", (session_id,)).rowcount > 0


def recent(conn: Connection, limit: int | None) -> list[SessionState]:
    """All sessions, ended or not, most recently active first."""
    rows = conn.execute(
        f"{_SELECT} ORDER BY last_active_at DESC, {_BY_ID} LIMIT %s", (limit,)
    ).fetchall()
    return [to_session(row) for row in rows]


def active(conn: Connection) -> list[SessionState]:
    """Active sessions, most recently active first."""
    rows = conn.execute(
        f"{_SELECT} WHERE is_active ORDER BY last_active_at DESC, {_BY_ID}"
    ).fetchall()
    return [to_session(row) for row in rows]


def pending_compaction(conn: Connection) -> list[SessionState]:
    """Sessions flagged for compaction, least recently active first."""
    rows = conn.execute(
        f"{_SELECT} WHERE pending_compaction ORDER BY last_active_at, {_BY_ID}"
    ).fetchall()
    return [to_session(row) for row in rows]


def touch(conn: Connection, session_id: str, at: int) -> None:
    """Move ``last_active_at`` forward (never back)."""
    conn.execute(
        "UPDATE tm_sessions SET last_active_at = greatest(last_active_at, %s) "
        "WHERE session_id = %s AND last_active_at < %s",
        (at, session_id, at),
    )


def append_transcript(conn: Connection, entry: TranscriptEntry) -> bool:
    """Insert a transcript line and bring its session's turn and activity forward, in one
    statement; False (nothing written) if there is no such session."""
    row = conn.execute(
        "WITH s AS (UPDATE tm_sessions SET turn_number = greatest(turn_number, %(turn)s), "
        "last_active_at = greatest(last_active_at, %(at)s) WHERE session_id = %(session)s "
        "RETURNING session_id) "
        f"INSERT INTO tm_transcripts ({_TRANSCRIPT_COLUMNS}) "
        "SELECT %(id)s, session_id, %(turn)s, %(role)s, %(content)s, %(at)s, %(speaker)s "
        "FROM s RETURNING 1",
        {
            "id": entry.id,
            "session": entry.session_id,
            "turn": entry.turn_number,
            "role": entry.role,
            "content": entry.content,
            "at": entry.timestamp,
            "speaker": entry.speaker,
        },  # fmt: skip
    ).fetchone()
    return row is not None


def transcripts(conn: Connection, session_id: str) -> list[TranscriptEntry]:
    """A session's transcript in turn order (insertion order within a turn)."""
    rows = conn.execute(
        f"SELECT {_TRANSCRIPT_COLUMNS} FROM tm_transcripts WHERE session_id = %s "
        "ORDER BY turn_number, seq",
        (session_id,),
    ).fetchall()
    return [TranscriptEntry(*row) for row in rows]

"""SQL of sessions and their transcripts (``tm_sessions``, ``tm_transcripts``).

A statement that reads or removes rows carries the handle's :class:`Scope` as
``scope = %s`` (the row's scope column); row-level security filters the same rows again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from persistence.codecs import decode_json
from persistence.records import SessionState, TranscriptEntry
from persistence.stores.rows import session_of, session_row
from persistence.stores.scope import WHOLE, Scope

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


def _mine(scope: Scope) -> tuple[str, tuple[str, ...]]:
    """The scope's condition on a row's ``scope`` column (``1 = 1`` unscoped)."""
    return scope.condition("scope", "%s")


def to_session(row: Sequence[Any]) -> SessionState:
    """The session a row of the session columns holds."""
    return session_of(
        row, tuple(decode_json(row[4])), tuple(decode_json(row[5])), decode_json(row[6])
    )


def encode_row(session: SessionState) -> tuple[Any, ...]:
    """Column values of ``session`` (validated) in insert order; JSON as SQLite writes it."""
    return session_row(session)


def upsert(conn: Connection, row: tuple[Any, ...], scope: Scope = WHOLE) -> bool:
    """Insert or update a session (its transcript is kept); True: the row's scope is the
    connection's (its key is ``(scope, session_id)``), so another agent's is never hit."""
    conn.execute(_UPSERT, row)
    return True


def fetch(conn: Connection, session_id: str, scope: Scope = WHOLE) -> SessionState | None:
    """The session in ``scope``, or ``None``."""
    mine, agent = _mine(scope)
    row = conn.execute(
        f"{_SELECT} WHERE session_id = %s AND {mine}", (session_id, *agent)
    ).fetchone()
    return None if row is None else to_session(row)


def is_active(conn: Connection, session_id: str, scope: Scope = WHOLE) -> bool | None:
    """Whether the session is active; ``None`` if ``scope`` has none (no decoding)."""
    mine, agent = _mine(scope)
    row = conn.execute(
        f"SELECT is_active FROM tm_sessions WHERE session_id = %s AND {mine}",
        (session_id, *agent),
    ).fetchone()
    return None if row is None else bool(row[0])


def delete(conn: Connection, session_id: str, scope: Scope = WHOLE) -> bool:
    """Delete a session in ``scope``; its transcript goes with it (ON DELETE CASCADE)."""
    mine, agent = _mine(scope)
    sql = f"DELETE FROM tm_sessions WHERE session_id = %s AND {mine}"
    return conn.execute(sql, (session_id, *agent)).rowcount > 0


def recent(conn: Connection, limit: int | None, scope: Scope = WHOLE) -> list[SessionState]:
    """All sessions in ``scope``, ended or not, most recently active first."""
    mine, agent = _mine(scope)
    rows = conn.execute(
        f"{_SELECT} WHERE {mine} ORDER BY last_active_at DESC, {_BY_ID} LIMIT %s",
        (*agent, limit),
    ).fetchall()
    return [to_session(row) for row in rows]


def active(conn: Connection, scope: Scope = WHOLE) -> list[SessionState]:
    """Active sessions in ``scope``, most recently active first."""
    mine, agent = _mine(scope)
    rows = conn.execute(
        f"{_SELECT} WHERE is_active AND {mine} ORDER BY last_active_at DESC, {_BY_ID}", agent
    ).fetchall()
    return [to_session(row) for row in rows]


def pending_compaction(conn: Connection, scope: Scope = WHOLE) -> list[SessionState]:
    """Sessions in ``scope`` flagged for compaction, least recently active first."""
    mine, agent = _mine(scope)
    rows = conn.execute(
        f"{_SELECT} WHERE pending_compaction AND {mine} ORDER BY last_active_at, {_BY_ID}",
        agent,
    ).fetchall()
    return [to_session(row) for row in rows]


def touch(conn: Connection, session_id: str, at: int, scope: Scope = WHOLE) -> None:
    """Move ``last_active_at`` forward (never back) of the session in ``scope``."""
    mine, agent = _mine(scope)
    conn.execute(
        "UPDATE tm_sessions SET last_active_at = greatest(last_active_at, %s) "
        f"WHERE session_id = %s AND last_active_at < %s AND {mine}",
        (at, session_id, at, *agent),
    )


def append_transcript(conn: Connection, entry: TranscriptEntry, scope: Scope = WHOLE) -> bool:
    """Insert a transcript line and bring its session's turn and activity forward, in one
    statement; False (nothing written) if ``scope`` has no such session."""
    mine, _ = scope.condition("scope", "%(scope)s")
    row = conn.execute(
        "WITH s AS (UPDATE tm_sessions SET turn_number = greatest(turn_number, %(turn)s), "
        f"last_active_at = greatest(last_active_at, %(at)s) WHERE session_id = %(session)s "
        f"AND {mine} "
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
            "scope": scope.agent_id,
        },  # fmt: skip
    ).fetchone()
    return row is not None


def transcripts(conn: Connection, session_id: str, scope: Scope = WHOLE) -> list[TranscriptEntry]:
    """A session's transcript in ``scope``, in turn order (insertion order within a turn)."""
    mine, agent = _mine(scope)
    rows = conn.execute(
        f"SELECT {_TRANSCRIPT_COLUMNS} FROM tm_transcripts WHERE session_id = %s AND {mine} "
        "ORDER BY turn_number, seq",
        (session_id, *agent),
    ).fetchall()
    return [TranscriptEntry(*row) for row in rows]

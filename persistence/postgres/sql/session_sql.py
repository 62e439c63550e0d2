"""SQL of sessions and their transcripts (``tm_sessions``, ``tm_transcripts``):
statements built (:class:`Statement`) and the rows they return decoded.

A statement that reads or removes rows carries the handle's :class:`Scope` as
``scope = %s`` (the row's scope column); row-level security filters the same rows again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from persistence.codecs import decode_json
from persistence.records import SessionState, TranscriptEntry
from persistence.statements import Statement
from persistence.stores.rows import session_of, session_row
from persistence.stores.scope import WHOLE, Scope

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
    "pending_compaction = excluded.pending_compaction, ended_at = excluded.ended_at "
    "RETURNING 1"
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


def to_entry(row: Sequence[Any]) -> TranscriptEntry:
    """The transcript line a row of the transcript columns holds."""
    return TranscriptEntry(*row)


def encode_row(session: SessionState) -> tuple[Any, ...]:
    """Column values of ``session`` (validated) in insert order; JSON as SQLite writes it."""
    return session_row(session)


def upsert(row: tuple[Any, ...], scope: Scope = WHOLE) -> Statement:
    """Insert or update a session (its transcript is kept); it always returns its row:
    the row's scope is the connection's (its key is ``(scope, session_id)``), so another
    agent's is never hit."""
    return Statement(_UPSERT, row)


def fetch(session_id: str, scope: Scope = WHOLE) -> Statement:
    """The session's row in ``scope``."""
    mine, agent = _mine(scope)
    return Statement(f"{_SELECT} WHERE session_id = %s AND {mine}", (session_id, *agent))


def is_active(session_id: str, scope: Scope = WHOLE) -> Statement:
    """The session's ``is_active`` (no row if ``scope`` has none; no decoding)."""
    mine, agent = _mine(scope)
    return Statement(
        f"SELECT is_active FROM tm_sessions WHERE session_id = %s AND {mine}",
        (session_id, *agent),
    )


def delete(session_id: str, scope: Scope = WHOLE) -> Statement:
    """Delete a session in ``scope`` (a row returned if it did); its transcript goes with
    it (ON DELETE CASCADE)."""
    mine, agent = _mine(scope)
    return Statement(
        f"DELETE FROM tm_sessions WHERE session_id = %s AND {mine} RETURNING 1",
        (session_id, *agent),
    )


def recent(limit: int | None, scope: Scope = WHOLE) -> Statement:
    """All sessions in ``scope``, ended or not, most recently active first."""
    mine, agent = _mine(scope)
    return Statement(
        f"{_SELECT} WHERE {mine} ORDER BY last_active_at DESC, {_BY_ID} LIMIT %s",
        (*agent, limit),
    )


def active(scope: Scope = WHOLE) -> Statement:
    """Active sessions in ``scope``, most recently active first."""
    mine, agent = _mine(scope)
    return Statement(
        f"{_SELECT} WHERE is_active AND {mine} ORDER BY last_active_at DESC, {_BY_ID}", agent
    )


def pending_compaction(scope: Scope = WHOLE) -> Statement:
    """Sessions in ``scope`` flagged for compaction, least recently active first."""
    mine, agent = _mine(scope)
    return Statement(
        f"{_SELECT} WHERE pending_compaction AND {mine} ORDER BY last_active_at, {_BY_ID}",
        agent,
    )


def touch(session_id: str, at: int, scope: Scope = WHOLE) -> Statement:
    """Move ``last_active_at`` forward (never back) of the session in ``scope``."""
    mine, agent = _mine(scope)
    return Statement(
        "UPDATE tm_sessions SET last_active_at = greatest(last_active_at, %s) "
        f"WHERE session_id = %s AND last_active_at < %s AND {mine}",
        (at, session_id, at, *agent),
    )


def append_transcript(entry: TranscriptEntry, scope: Scope = WHOLE) -> tuple[Statement, ...]:
    """A transcript line inserted and its session's turn and activity brought forward,
    in one statement: a row returned if ``scope`` has the session (else nothing written)."""
    mine, agent = _mine(scope)
    turn, at = entry.turn_number, entry.timestamp
    return (
        Statement(
            "WITH s AS (UPDATE tm_sessions SET turn_number = greatest(turn_number, %s), "
            f"last_active_at = greatest(last_active_at, %s) WHERE session_id = %s AND {mine} "
            "RETURNING session_id) "
            f"INSERT INTO tm_transcripts ({_TRANSCRIPT_COLUMNS}) "
            "SELECT %s, session_id, %s, %s, %s, %s, %s FROM s RETURNING 1",
            (turn, at, entry.session_id, *agent,
             entry.id, turn, entry.role, entry.content, at, entry.speaker),
        ),
    )  # fmt: skip


def transcripts(session_id: str, scope: Scope = WHOLE) -> Statement:
    """A session's transcript in ``scope``, in turn order (insertion order within a turn)."""
    mine, agent = _mine(scope)
    return Statement(
        f"SELECT {_TRANSCRIPT_COLUMNS} FROM tm_transcripts WHERE session_id = %s AND {mine} "
        "ORDER BY turn_number, seq",
        (session_id, *agent),
    )

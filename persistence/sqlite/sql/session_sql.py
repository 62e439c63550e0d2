"""SQL for sessions and their transcripts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from persistence.codecs import decode_json
from persistence.records import SessionState, TranscriptEntry
from persistence.sqlite.connection import query_all, query_one
from persistence.sqlite.row_checks import (
    INT,
    NULL_INT,
    NULL_TEXT,
    TEXT,
    check_row,
    json_object,
    json_texts,
)
from persistence.stores.rows import session_of, session_row
from persistence.stores.scope import WHOLE, Scope

_COLUMNS = (
    "session_id, started_at, last_active_at, turn_number, active_agents, scratchpad_state, "
    "metadata, is_active, pending_compaction, ended_at"
)


def _to_entry(row: Sequence[Any]) -> TranscriptEntry:
    """The transcript line a row holds (damage if a column's type is not its own)."""
    return TranscriptEntry(*check_row("session_transcripts", _TRANSCRIPT_NAMES,
                                      _TRANSCRIPT_KINDS, row))  # fmt: skip


_OWNED = "session_id IN (SELECT session_id FROM sessions WHERE agent_id = ?)"
"""A transcript line's session is the scope's (the agent's id the parameter)."""


_NAMES = tuple(c.strip() for c in _COLUMNS.split(","))
_KINDS = (TEXT, INT, INT, INT, TEXT, TEXT, TEXT, INT, INT, NULL_INT)
_TRANSCRIPT_NAMES = ("id", "session_id", "turn_number", "role", "content", "timestamp", "speaker")
_TRANSCRIPT_KINDS = (TEXT, TEXT, INT, TEXT, TEXT, INT, NULL_TEXT)


def _to_session(row: Sequence[Any]) -> SessionState:
    """The session a row holds (damage if a column's type is not its own)."""
    check_row("sessions", _NAMES, _KINDS, row)
    return session_of(
        row,
        json_texts("sessions", "active_agents", decode_json(row[4])),
        json_texts("sessions", "scratchpad_state", decode_json(row[5])),
        json_object("sessions", "metadata", decode_json(row[6])),
    )


def encode_row(session: SessionState) -> tuple[Any, ...]:
    """Column values for ``session`` in insert order."""
    return session_row(session)


def upsert(conn: apsw.Connection, row: tuple[Any, ...], scope: Scope = WHOLE) -> bool:
    """Insert or update a session (its transcripts are kept); an insert names the
    scope's agent as its owner. A scoped write updates only that agent's session:
    False if the id is another owner's (nothing written)."""
    columns, values, owner, agent_id = _COLUMNS, row, "", scope.agent_id
    if agent_id is not None:  # (an unscoped write names no owner column: any schema)
        columns, values = f"{_COLUMNS}, agent_id", (*row, agent_id)
        owner = " WHERE sessions.agent_id IS excluded.agent_id"
    marks = ", ".join("?" for _ in values)
    conn.execute(
        f"INSERT INTO sessions ({columns}) VALUES ({marks}) "
        "ON CONFLICT (session_id) DO UPDATE SET started_at = excluded.started_at, "
        "last_active_at = excluded.last_active_at, turn_number = excluded.turn_number, "
        "active_agents = excluded.active_agents, scratchpad_state = excluded.scratchpad_state, "
        "metadata = excluded.metadata, is_active = excluded.is_active, "
        "pending_compaction = excluded.pending_compaction, ended_at = excluded.ended_at" + owner,
        values,
    )
    return conn.changes() > 0


def fetch(conn: apsw.Connection, session_id: str, scope: Scope = WHOLE) -> SessionState | None:
    """The session (if in ``scope``), or ``None``."""
    mine, agent = scope.and_()
    row = query_one(
        conn, f"SELECT {_COLUMNS} FROM sessions WHERE session_id = ?{mine}", (session_id, *agent)
    )
    return None if row is None else _to_session(row)


def is_active(conn: apsw.Connection, session_id: str, scope: Scope = WHOLE) -> bool | None:
    """Whether the session is active; ``None`` if there is none in ``scope`` (one index
    probe, no decoding: the check every write into a session makes)."""
    mine, agent = scope.and_()
    row = query_one(
        conn, f"SELECT is_active FROM sessions WHERE session_id = ?{mine}", (session_id, *agent)
    )
    return None if row is None else bool(row[0])


def delete(conn: apsw.Connection, session_id: str, scope: Scope = WHOLE) -> bool:
    """Delete a session in ``scope``; its transcripts go with it (ON DELETE CASCADE)."""
    mine, agent = scope.and_()
    conn.execute(f"DELETE FROM sessions WHERE session_id = ?{mine}", (session_id, *agent))
    return conn.changes() > 0


def recent(conn: apsw.Connection, limit: int | None, scope: Scope = WHOLE) -> list[SessionState]:
    """All sessions in ``scope``, ended or not, most recently active first."""
    mine, agent = scope.condition()
    rows = query_all(
        conn,
        f"SELECT {_COLUMNS} FROM sessions WHERE {mine} "
        "ORDER BY last_active_at DESC, session_id LIMIT ?",
        (*agent, -1 if limit is None else limit),
    )
    return [_to_session(row) for row in rows]


def active(conn: apsw.Connection, scope: Scope = WHOLE) -> list[SessionState]:
    """Active sessions in ``scope``, most recently active first."""
    mine, agent = scope.and_()
    rows = query_all(
        conn,
        f"SELECT {_COLUMNS} FROM sessions WHERE is_active = 1{mine} "
        "ORDER BY last_active_at DESC, session_id",
        agent,
    )
    return [_to_session(row) for row in rows]


def pending_compaction(conn: apsw.Connection, scope: Scope = WHOLE) -> list[SessionState]:
    """Sessions in ``scope`` flagged for compaction, least recently active first."""
    mine, agent = scope.and_()
    rows = query_all(
        conn,
        f"SELECT {_COLUMNS} FROM sessions WHERE pending_compaction = 1{mine} "
        "ORDER BY last_active_at, session_id",
        agent,
    )
    return [_to_session(row) for row in rows]


def touch(conn: apsw.Connection, session_id: str, at: int, scope: Scope = WHOLE) -> None:
    """Move ``last_active_at`` forward (a session out of ``scope`` is left as it is)."""
    mine, agent = scope.and_()
    conn.execute(
        f"UPDATE sessions SET last_active_at = max(last_active_at, ?) WHERE session_id = ?{mine}",
        (at, session_id, *agent),
    )


def insert_transcript(conn: apsw.Connection, entry: TranscriptEntry) -> None:
    """Insert one transcript line as it is (the session row is not touched)."""
    conn.execute(
        "INSERT INTO session_transcripts "
        "(id, session_id, turn_number, role, content, timestamp, speaker) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            entry.id,
            entry.session_id,
            entry.turn_number,
            entry.role,
            entry.content,
            entry.timestamp,
            entry.speaker,
        ),  # fmt: skip
    )


def append_transcript(
    conn: apsw.Connection, entry: TranscriptEntry, scope: Scope = WHOLE
) -> bool:
    """Insert a transcript line and bring its session's turn and activity forward;
    False (nothing written) if ``scope`` holds no such session."""
    if is_active(conn, entry.session_id, scope) is None:
        return False
    insert_transcript(conn, entry)
    conn.execute(
        "UPDATE sessions SET turn_number = max(turn_number, ?), "
        "last_active_at = max(last_active_at, ?) WHERE session_id = ?",
        (entry.turn_number, entry.timestamp, entry.session_id),
    )
    return True


def transcripts(
    conn: apsw.Connection, session_id: str, scope: Scope = WHOLE
) -> list[TranscriptEntry]:
    """A session's transcript in turn order (insertion order within a turn); none for a
    session out of ``scope``."""
    mine, agent = scope.and_()
    rows = query_all(
        conn,
        "SELECT id, session_id, turn_number, role, content, timestamp, speaker "
        f"FROM session_transcripts WHERE session_id = ?{mine and ' AND ' + _OWNED} "
        "ORDER BY turn_number, rowid",
        (session_id, *agent),
    )
    return [_to_entry(row) for row in rows]


def page(
    conn: apsw.Connection, after_id: str, limit: int, agent_id: str | None = None
) -> list[SessionState]:
    """The next ``limit`` sessions (of ``agent_id``, if given) with id > ``after_id``."""
    mine, agent = Scope.of(agent_id).and_()
    rows = query_all(
        conn,
        f"SELECT {_COLUMNS} FROM sessions WHERE session_id > ?{mine} "
        "ORDER BY session_id LIMIT ?",
        (after_id, *agent, limit),
    )
    return [_to_session(row) for row in rows]


def transcript_page(
    conn: apsw.Connection, after_rowid: int, limit: int, agent_id: str | None = None
) -> list[tuple[int, TranscriptEntry]]:
    """The next ``limit`` transcript lines (of ``agent_id``'s sessions, if given) in
    insertion order, with their rowids."""
    mine, agent = Scope.of(agent_id).and_()
    rows = query_all(
        conn,
        "SELECT rowid, id, session_id, turn_number, role, content, timestamp, speaker "
        f"FROM session_transcripts WHERE rowid > ?{mine and ' AND ' + _OWNED} "
        "ORDER BY rowid LIMIT ?",
        (after_rowid, *agent, limit),
    )
    return [(row[0], _to_entry(row[1:])) for row in rows]


def transcript_ids(conn: apsw.Connection) -> set[str]:
    """Ids of every transcript line."""
    return {r[0] for r in query_all(conn, "SELECT id FROM session_transcripts")}


def session_ids(conn: apsw.Connection) -> set[str]:
    """Ids of every session."""
    return {r[0] for r in query_all(conn, "SELECT session_id FROM sessions")}


def delete_all(conn: apsw.Connection) -> None:
    """Delete every session and transcript line."""
    conn.execute("DELETE FROM session_transcripts")
    conn.execute("DELETE FROM sessions")

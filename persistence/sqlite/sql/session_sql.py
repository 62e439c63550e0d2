"""SQL of sessions and their transcripts: statements built (:class:`Statement`) and the
rows they return decoded, every value's type checked as it is read (the store runs them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from persistence.codecs import decode_json
from persistence.records import SessionState, TranscriptEntry
from persistence.sqlite.row_checks import (
    INT,
    NULL_INT,
    NULL_TEXT,
    TEXT,
    check_row,
    json_object,
    json_texts,
)
from persistence.statements import Statement
from persistence.stores.rows import session_of, session_row
from persistence.stores.scope import WHOLE, Scope

_COLUMNS = (
    "session_id, started_at, last_active_at, turn_number, active_agents, scratchpad_state, "
    "metadata, is_active, pending_compaction, ended_at"
)
_TRANSCRIPT_COLUMNS = "id, session_id, turn_number, role, content, timestamp, speaker"
_OWNED = "session_id IN (SELECT session_id FROM sessions WHERE agent_id = ?)"
"""A transcript line's session is the scope's (the agent's id the parameter)."""

_NAMES = tuple(c.strip() for c in _COLUMNS.split(","))
_KINDS = (TEXT, INT, INT, INT, TEXT, TEXT, TEXT, INT, INT, NULL_INT)
_TRANSCRIPT_NAMES = tuple(c.strip() for c in _TRANSCRIPT_COLUMNS.split(","))
_TRANSCRIPT_KINDS = (TEXT, TEXT, INT, TEXT, TEXT, INT, NULL_TEXT)


def to_entry(row: Sequence[Any]) -> TranscriptEntry:
    """The transcript line a row holds (damage if a column's type is not its own)."""
    return TranscriptEntry(*check_row("session_transcripts", _TRANSCRIPT_NAMES,
                                      _TRANSCRIPT_KINDS, row))  # fmt: skip


def to_session(row: Sequence[Any]) -> SessionState:
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


def upsert(row: tuple[Any, ...], scope: Scope = WHOLE) -> Statement:
    """Insert or update a session (its transcripts are kept); an insert names the
    scope's agent as its owner. A scoped write updates only that agent's session: no
    row returned if the id is another owner's (nothing written)."""
    columns, values, owner, agent_id = _COLUMNS, row, "", scope.agent_id
    if agent_id is not None:  # (an unscoped write names no owner column: any schema)
        columns, values = f"{_COLUMNS}, agent_id", (*row, agent_id)
        owner = " WHERE sessions.agent_id IS excluded.agent_id"
    marks = ", ".join("?" for _ in values)
    return Statement(
        f"INSERT INTO sessions ({columns}) VALUES ({marks}) "
        "ON CONFLICT (session_id) DO UPDATE SET started_at = excluded.started_at, "
        "last_active_at = excluded.last_active_at, turn_number = excluded.turn_number, "
        "active_agents = excluded.active_agents, scratchpad_state = excluded.scratchpad_state, "
        "metadata = excluded.metadata, is_active = excluded.is_active, "
        "pending_compaction = excluded.pending_compaction, ended_at = excluded.ended_at"
        f"{owner} RETURNING 1",
        values,
    )


def fetch(session_id: str, scope: Scope = WHOLE) -> Statement:
    """The session's row (if in ``scope``)."""
    mine, agent = scope.and_()
    return Statement(
        f"SELECT {_COLUMNS} FROM sessions WHERE session_id = ?{mine}", (session_id, *agent)
    )


def is_active(session_id: str, scope: Scope = WHOLE) -> Statement:
    """The session's ``is_active`` (no row if none in ``scope``): one index probe, no
    decoding, the check every write into a session makes."""
    mine, agent = scope.and_()
    return Statement(
        f"SELECT is_active FROM sessions WHERE session_id = ?{mine}", (session_id, *agent)
    )


def delete(session_id: str, scope: Scope = WHOLE) -> Statement:
    """Delete a session in ``scope`` (a row returned if it did); its transcripts go with
    it (ON DELETE CASCADE)."""
    mine, agent = scope.and_()
    return Statement(
        f"DELETE FROM sessions WHERE session_id = ?{mine} RETURNING 1", (session_id, *agent)
    )


def recent(limit: int | None, scope: Scope = WHOLE) -> Statement:
    """All sessions in ``scope``, ended or not, most recently active first."""
    mine, agent = scope.condition()
    return Statement(
        f"SELECT {_COLUMNS} FROM sessions WHERE {mine} "
        "ORDER BY last_active_at DESC, session_id LIMIT ?",
        (*agent, -1 if limit is None else limit),
    )


def active(scope: Scope = WHOLE) -> Statement:
    """Active sessions in ``scope``, most recently active first."""
    mine, agent = scope.and_()
    return Statement(
        f"SELECT {_COLUMNS} FROM sessions WHERE is_active = 1{mine} "
        "ORDER BY last_active_at DESC, session_id",
        agent,
    )


def pending_compaction(scope: Scope = WHOLE) -> Statement:
    """Sessions in ``scope`` flagged for compaction, least recently active first."""
    mine, agent = scope.and_()
    return Statement(
        f"SELECT {_COLUMNS} FROM sessions WHERE pending_compaction = 1{mine} "
        "ORDER BY last_active_at, session_id",
        agent,
    )


def touch(session_id: str, at: int, scope: Scope = WHOLE) -> Statement:
    """Move ``last_active_at`` forward (a session out of ``scope`` is left as it is)."""
    mine, agent = scope.and_()
    return Statement(
        f"UPDATE sessions SET last_active_at = max(last_active_at, ?) WHERE session_id = ?{mine}",
        (at, session_id, *agent),
    )


def insert_transcript(entry: TranscriptEntry) -> Statement:
    """Insert one transcript line as it is (the session row is not touched)."""
    return Statement(
        f"INSERT INTO session_transcripts ({_TRANSCRIPT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (entry.id, entry.session_id, entry.turn_number, entry.role, entry.content,
         entry.timestamp, entry.speaker),
    )  # fmt: skip


def append_transcript(entry: TranscriptEntry, scope: Scope = WHOLE) -> tuple[Statement, ...]:
    """A transcript line added: its session's turn and activity brought forward (a row
    returned if ``scope`` holds the session; the rest run only then), then the line."""
    mine, agent = scope.and_()
    return (
        Statement(
            "UPDATE sessions SET turn_number = max(turn_number, ?), "
            f"last_active_at = max(last_active_at, ?) WHERE session_id = ?{mine} RETURNING 1",
            (entry.turn_number, entry.timestamp, entry.session_id, *agent),
        ),
        insert_transcript(entry),
    )


def transcripts(session_id: str, scope: Scope = WHOLE) -> Statement:
    """A session's transcript in turn order (insertion order within a turn); none for a
    session out of ``scope``."""
    mine, agent = scope.and_()
    return Statement(
        f"SELECT {_TRANSCRIPT_COLUMNS} "
        f"FROM session_transcripts WHERE session_id = ?{mine and ' AND ' + _OWNED} "
        "ORDER BY turn_number, rowid",
        (session_id, *agent),
    )


def page(after_id: str, limit: int, agent_id: str | None = None) -> Statement:
    """The next ``limit`` sessions (of ``agent_id``, if given) with id > ``after_id``."""
    mine, agent = Scope.of(agent_id).and_()
    return Statement(
        f"SELECT {_COLUMNS} FROM sessions WHERE session_id > ?{mine} ORDER BY session_id LIMIT ?",
        (after_id, *agent, limit),
    )


def transcript_page(after_rowid: int, limit: int, agent_id: str | None = None) -> Statement:
    """The next ``limit`` transcript lines (of ``agent_id``'s sessions, if given) in
    insertion order, each row its rowid first (:func:`to_numbered_entry`)."""
    mine, agent = Scope.of(agent_id).and_()
    return Statement(
        f"SELECT rowid, {_TRANSCRIPT_COLUMNS} "
        f"FROM session_transcripts WHERE rowid > ?{mine and ' AND ' + _OWNED} "
        "ORDER BY rowid LIMIT ?",
        (after_rowid, *agent, limit),
    )


def to_numbered_entry(row: Sequence[Any]) -> tuple[int, TranscriptEntry]:
    """A :func:`transcript_page` row: the rowid and the line."""
    return row[0], to_entry(row[1:])


TRANSCRIPT_IDS = Statement("SELECT id FROM session_transcripts")
"""Ids of every transcript line."""
SESSION_IDS = Statement("SELECT session_id FROM sessions")
"""Ids of every session."""
DELETE_ALL = (Statement("DELETE FROM session_transcripts"), Statement("DELETE FROM sessions"))
"""Every session and transcript line deleted."""

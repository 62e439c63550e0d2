"""Sessions: the list, and one session's transcript in order with the memories each turn
produced.

A memory names its session but not its turn: it belongs to the turn given in its
metadata (``turn`` or ``turn_number``), else to the last turn written at or before it."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from starlette.requests import Request
from starlette.routing import BaseRoute

from persistence import Memory, SessionState, TranscriptEntry
from tiered_memory.inspector.context import (
    Inspector,
    NavItem,
    PageData,
    PageError,
    memory_row,
    page_routes,
)

NAV = NavItem("Sessions", "/sessions")
MAX_MEMORIES = 5000


def routes(inspector: Inspector) -> list[BaseRoute]:
    return [
        *page_routes(inspector, "/sessions", session_list),
        *page_routes(inspector, "/sessions/{session_id}", session_page),
    ]


def session_list(inspector: Inspector, request: Request) -> tuple[str, PageData]:
    found = inspector.memory.sessions.all()
    return "sessions.html", {"sessions": [_session_row(s) for s in found]}


def _session_row(s: SessionState) -> PageData:
    return {
        name: getattr(s, name)
        for name in ("session_id", "started_at", "last_active_at", "turn_number", "is_active",
                     "ended_at", "active_agents", "metadata")
    }  # fmt: skip


def session_page(inspector: Inspector, request: Request) -> tuple[str, PageData]:
    memory = inspector.memory
    session_id = request.path_params["session_id"]
    state = memory.get_session(session_id)
    if state is None:
        raise PageError(404, f"no session {session_id}")
    transcript = memory.get_transcript(session_id)
    memories = memory.query(None, session_id=session_id, order_by="created_at",
                            descending=False, limit=MAX_MEMORIES,
                            include_superseded=True)  # fmt: skip
    by_turn, unplaced = place(transcript, memories)
    data: PageData = {
        "session": _session_row(state),
        "turns": [
            {"id": t.id, "turn_number": t.turn_number, "role": t.role, "speaker": t.speaker,
             "content": t.content, "timestamp": t.timestamp,
             "memories": [memory_row(m) for m in by_turn.get(i, [])]}
            for i, t in enumerate(transcript)
        ],
        "memories_before_first_turn": [memory_row(m) for m in unplaced],
    }  # fmt: skip
    return "session.html", data


def place(
    transcript: Sequence[TranscriptEntry], memories: list[Memory]
) -> tuple[dict[int, list[Memory]], list[Memory]]:
    """Which transcript entry (by index) produced each memory; memories older than the
    first entry are returned apart."""
    by_turn: dict[int, list[Memory]] = {}
    unplaced: list[Memory] = []
    times = [t.timestamp for t in transcript]
    turns = {t.turn_number: i for i, t in enumerate(transcript)}
    for m in memories:
        named = m.metadata.get("turn", m.metadata.get("turn_number"))
        if isinstance(named, int) and named in turns:
            by_turn.setdefault(turns[named], []).append(m)
            continue
        at = bisect.bisect_right(times, m.created_at) - 1
        if at < 0:
            unplaced.append(m)
        else:
            by_turn.setdefault(at, []).append(m)
    return by_turn, unplaced

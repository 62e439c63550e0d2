"""Erasure in bulk: forget a list of memories, a session, or an agent, in one transaction.

Each memory goes through the manager's ``forget`` (audit row with id and reason, no
content; graph provenance, schedule and tags removed), so the storage's guarantees
hold for each: on SQLite no byte of the content or its vector stays in the file once
the manager closes (see the README's "Forget means forgotten"). A failure rolls the
whole erasure back: nothing is forgotten.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from persistence import require_str, require_str_tuple
from tiered_memory.memories import Memories
from tiered_memory.telemetry import (
    AGENT_ID,
    CONVERSATION_ID,
    DELETE_MEMORY,
    RECORD_COUNT,
    RECORD_ID,
    Telemetry,
)

AgentMemoryManager = Any
"""The manager these erase through (typed loosely: the manager imports this module)."""

DEFAULT_REASON = "forgotten on request"


@dataclass(frozen=True, slots=True)
class ErasureReport:
    """What an erasure removed: the memories forgotten and the sessions deleted (with
    their transcripts); ``missing`` are requested ids that were not there."""

    memories: tuple[str, ...]
    sessions: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, list[str]]:
        """A JSON-ready form (the CLI's ``--json``)."""
        return {
            "memories": list(self.memories),
            "sessions": list(self.sessions),
            "missing": list(self.missing),
        }


def forget_ids(
    manager: AgentMemoryManager, memory_ids: Sequence[str], reason: str = DEFAULT_REASON
) -> ErasureReport:
    """Forget each of ``memory_ids`` (all or none)."""
    require_str_tuple(memory_ids, "memory_ids")
    require_str(reason, "reason", allow_empty=False)
    ids = list(memory_ids)
    done: list[str] = []
    missing: list[str] = []
    with manager.transaction():
        for memory_id in dict.fromkeys(ids):
            (done if manager.forget(memory_id, reason) else missing).append(memory_id)
    return ErasureReport(tuple(done), (), tuple(missing))


def forget_session(
    manager: AgentMemoryManager, session_id: str, reason: str = DEFAULT_REASON
) -> ErasureReport:
    """Forget every memory of ``session_id``, then delete the session and its transcript."""
    require_str(session_id, "session_id", allow_empty=False)
    require_str(reason, "reason", allow_empty=False)
    with manager.transaction():
        ids = [
            m.id for m in manager.query(session_id=session_id, limit=None, include_superseded=True)
        ]
        report = forget_ids(manager, ids, reason)
        deleted = manager.sessions.delete(session_id)
    return ErasureReport(report.memories, (session_id,) if deleted else ())


def forget_agent(
    manager: AgentMemoryManager, agent_id: str, reason: str = DEFAULT_REASON
) -> ErasureReport:
    """Forget every memory of ``agent_id``; on a handle scoped to that agent
    (``open(..., agent_id=agent_id)``) also the sessions it started, with their
    transcripts (an unscoped handle cannot tell which sessions an agent started)."""
    require_str(agent_id, "agent_id", allow_empty=False)
    require_str(reason, "reason", allow_empty=False)
    with manager.transaction():
        ids = [m.id for m in manager.query(agent_id=agent_id, limit=None, include_superseded=True)]
        report = forget_ids(manager, ids, reason)
        sessions: list[str] = []
        if manager.agent_id == agent_id:
            for session in manager.sessions.all():
                for memory in manager.query(
                    session_id=session.session_id, limit=None, include_superseded=True
                ):
                    manager.forget(memory.id, reason)
                if manager.sessions.delete(session.session_id):
                    sessions.append(session.session_id)
    return ErasureReport(report.memories, tuple(sessions))


class ForgetCalls:
    """The manager's ``forget`` calls, each one ``delete_memory`` span (the erasures in
    bulk forget each memory through :meth:`forget`, inside their own span); the manager
    provides its memories and telemetry."""

    _memories: Memories
    _telemetry: Telemetry

    def forget(self, memory_id: str, reason: str = "forgotten on request") -> bool:
        """Delete a memory (with its schedule and tags) and write an audit row; its
        promotion history stays (forgetting removes content, never the audit)."""
        with self._telemetry.span(DELETE_MEMORY, {RECORD_ID: memory_id, RECORD_COUNT: 1}):
            return self._memories.forget(memory_id, reason)

    def forget_many(self, memory_ids: Sequence[str], reason: str = DEFAULT_REASON) -> ErasureReport:
        """Forget several memories in one transaction (all or none); see :mod:`.erasure`."""
        count = len(memory_ids) if isinstance(memory_ids, Sequence) else None
        with self._telemetry.span(DELETE_MEMORY, {RECORD_COUNT: count}):
            return forget_ids(self, memory_ids, reason)

    def forget_session(self, session_id: str, reason: str = DEFAULT_REASON) -> ErasureReport:
        """Forget a session's memories and delete the session with its transcript."""
        with self._telemetry.span(DELETE_MEMORY, {CONVERSATION_ID: session_id}) as span:
            report = forget_session(self, session_id, reason)
            span.set(RECORD_COUNT, len(report.memories))
            return report

    def forget_agent(self, agent_id: str, reason: str = DEFAULT_REASON) -> ErasureReport:
        """Forget an agent's memories (and, on a handle scoped to it, its sessions)."""
        with self._telemetry.span(DELETE_MEMORY, {AGENT_ID: agent_id}) as span:
            report = forget_agent(self, agent_id, reason)
            span.set(RECORD_COUNT, len(report.memories))
            return report

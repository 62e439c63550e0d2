"""Scope: which agent's rows a handle sees, built once for both engines.

An agent-scoped handle (``AgentMemoryManager.open(..., agent_id=...)``) sees only its
agent's memories, sessions and their transcripts, forgetting-log rows, notes and graph
provenance. Every shared store holds the handle's :class:`Scope` and hands it to the
engine's SQL, which adds :meth:`Scope.condition` to each statement that reads or removes
such rows: one predicate, built here, on both engines. The engine names the column
(``agent_id`` on a file, ``scope`` on a server) and its placeholder (``?``, ``%s``).
On PostgreSQL row-level security filters the same rows again (the second wall).

What a scope refuses is here too: the file operations that copy or replace a whole
file (:meth:`Scope.refuse_file_op`) and a scratchpad key or session id another agent
holds (one namespace per file).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from persistence.errors import InvalidInputError, UnsupportedOperationError

_FILE_OPS = (
    "an agent-scoped handle on a file cannot {what}: the file holds every agent's data; "
    "open it without agent_id (export_json and copy give this agent's data alone)"
)


@dataclass(frozen=True, slots=True)
class Scope:
    """The agent a handle is scoped to; ``agent_id=None``: the whole store."""

    agent_id: str | None = None

    @classmethod
    def of(cls, agent_id: str | None) -> Scope:
        """The scope for ``agent_id`` (``None`` or ``''``: the whole store)."""
        return cls(agent_id or None)

    @property
    def scoped(self) -> bool:
        """True on an agent-scoped handle."""
        return self.agent_id is not None

    def condition(self, column: str = "agent_id", mark: str = "?") -> tuple[str, tuple[str, ...]]:
        """The SQL condition keeping the scope's rows of ``column`` and its parameters:
        ``('agent_id = ?', (agent,))``; ``('1 = 1', ())`` for the whole store."""
        if self.agent_id is None:
            return "1 = 1", ()
        return f"{column} = {mark}", (self.agent_id,)

    def and_(self, column: str = "agent_id", mark: str = "?") -> tuple[str, tuple[str, ...]]:
        """:meth:`condition` to append after a ``WHERE`` clause (``''`` unscoped)."""
        if self.agent_id is None:
            return "", ()
        sql, params = self.condition(column, mark)
        return f" AND {sql}", params

    def admits(self, record: Any) -> bool:
        """True if ``record`` (a row read already, with an ``agent_id``) is in scope."""
        return self.agent_id is None or getattr(record, "agent_id", None) == self.agent_id

    def refuse_taken(self, what: str, held: Any) -> None:
        """Refuse a write under a name another agent's record ``held`` has
        (scratchpad keys and session ids are one namespace per file)."""
        if held is not None and not self.admits(held):
            raise InvalidInputError(f"{what} is taken in this file")

    def refuse_file_op(self, what: str) -> None:
        """Raise, on a scoped handle, for a file operation that copies or replaces the
        whole file (backup, restore, import, rekey)."""
        if self.agent_id is not None:
            raise UnsupportedOperationError(_FILE_OPS.format(what=what))


WHOLE = Scope()
"""The unscoped (operator's) handle: every row."""

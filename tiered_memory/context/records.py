"""What ``context()`` returns: :class:`Context`, the text an agent pastes into its prompt,
and one :class:`ContextEntry` per memory in it (its citation and why it is there)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ContextEntry:
    """One memory of a :class:`Context`: its id, the citation its line starts with
    (``m:<ref>``, unique in this context) and why it is there (the recall explanation,
    ``neighbour of <id>: ...`` or ``scratchpad``)."""

    memory_id: str
    ref: str
    reason: str
    session_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The entry as plain JSON values."""
        return {"memory_id": self.memory_id, "ref": self.ref, "reason": self.reason,
                "session_id": self.session_id}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Context:
    """The memories that answer a query, packed into a token budget.

    ``text`` is ready to paste: the scratchpad's entries first, then the memories
    grouped by session under one header each (date, who), in conversation order, each
    line starting with its citation (``[m:<ref>]``). ``memory_ids`` are in the order
    they appear; ``tokens`` is ``text`` counted by the manager's ``TokenCounter`` and
    never above ``max_tokens``; ``omitted`` counts the candidates that did not fit;
    ``entries`` says, per memory, why it is there.
    """

    query: str
    text: str
    memory_ids: tuple[str, ...]
    tokens: int
    max_tokens: int
    omitted: int
    entries: tuple[ContextEntry, ...]

    def __str__(self) -> str:
        return self.text

    def why(self, memory_id: str) -> str | None:
        """Why that memory is in the context, or ``None`` if it is not."""
        return next((e.reason for e in self.entries if e.memory_id == memory_id), None)

    def to_dict(self) -> dict[str, Any]:
        """The context as plain JSON values (the CLI's ``--json``, the MCP tool)."""
        return {
            "query": self.query,
            "text": self.text,
            "memory_ids": list(self.memory_ids),
            "tokens": self.tokens,
            "max_tokens": self.max_tokens,
            "omitted": self.omitted,
            "entries": [entry.to_dict() for entry in self.entries],
        }

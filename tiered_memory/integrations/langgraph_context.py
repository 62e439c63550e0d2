"""A LangGraph node that puts the memories answering the conversation into its state.

``builder.add_node("recall", context_node(memory, max_tokens=800))`` reads the query
from the state's last message (a ``BaseMessage``, a ``{"content": ...}`` mapping or a
string; ``query=`` picks it otherwise), calls :meth:`AgentMemoryManager.context` and
returns ``{"memory_context": text}`` (``key=`` renames it) for the next node's prompt. An
:class:`~tiered_memory.aio.AsyncAgentMemoryManager` gives an async node. A state with no
text to look for gets an empty context. Needs no LangGraph import: a node is a function
of the state.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from persistence import InvalidTypeError, require_str
from tiered_memory.aio import AsyncAgentMemoryManager
from tiered_memory.context import Context
from tiered_memory.context.assemble import check_request
from tiered_memory.manager import AgentMemoryManager

State = Mapping[str, Any]
Query = Callable[[State], str | None]


def last_message(state: State) -> str | None:
    """The text of the state's last message (``state["messages"][-1]``), or ``None``."""
    messages = state.get("messages") or ()
    if not messages:
        return None
    last = messages[-1]
    text = last.get("content") if isinstance(last, Mapping) else getattr(last, "content", last)
    return text if isinstance(text, str) else None


def context_node(
    memory: AgentMemoryManager | AsyncAgentMemoryManager,
    *,
    max_tokens: int = 1000,
    key: str = "memory_context",
    query: Query = last_message,
    **filters: Any,
) -> Callable[[State], dict[str, str]] | Callable[[State], Awaitable[dict[str, str]]]:
    """A node: ``state -> {key: memory.context(query(state), max_tokens, **filters).text}``
    (``filters``: :meth:`~AgentMemoryManager.context`'s)."""
    if not isinstance(memory, AgentMemoryManager | AsyncAgentMemoryManager):
        raise InvalidTypeError(
            f"memory must be an AgentMemoryManager or AsyncAgentMemoryManager, got "
            f"{type(memory).__name__}"
        )
    require_str(key, "key")
    check_request("a query", max_tokens)  # a bad budget fails now, not at the first turn
    if isinstance(memory, AsyncAgentMemoryManager):
        aio = memory

        async def async_node(state: State) -> dict[str, str]:
            text = query(state)
            if not text or not text.strip():
                return {key: ""}
            found: Context = await aio.context(text, max_tokens, **filters)
            return {key: found.text}

        return async_node
    manager = memory

    def node(state: State) -> dict[str, str]:
        text = query(state)
        if not text or not text.strip():
            return {key: ""}
        return {key: manager.context(text, max_tokens, **filters).text}

    return node

"""``context_node``: a LangGraph node that puts the memories answering the last message
into the graph's state, run in a real ``StateGraph`` on both engines."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from langgraph.graph import END, START, MessagesState, StateGraph

from tests.support.worker import HashEmbedder
from tiered_memory import AgentMemoryManager
from tiered_memory.aio import AsyncAgentMemoryManager
from tiered_memory.errors import InvalidBudgetError, InvalidTypeError
from tiered_memory.integrations.langgraph_context import context_node


class State(MessagesState):
    memory_context: str
    seen: str


def _graph(node: Any) -> Any:
    """recall (the node under test) -> answer (which sees what recall put in the state)."""

    def answer(state: State) -> dict[str, str]:
        return {"seen": state["memory_context"]}

    builder = StateGraph(State)
    builder.add_node("recall", node)
    builder.add_node("answer", answer)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "answer")
    builder.add_edge("answer", END)
    return builder.compile()


def _filled(make_memory: Callable[..., AgentMemoryManager]) -> tuple[AgentMemoryManager, str]:
    memory = make_memory(embedder=HashEmbedder("node-test", 16))
    session = memory.start_session("chat").session_id
    kept = memory.remember("Ann's flight to Lisbon leaves at 9", session_id=session, speaker="Ann")
    memory.remember("The office plant needs water", session_id=session, speaker="Bo")
    memory.flush()
    return memory, kept.id


def test_a_node_puts_the_context_of_the_last_message_in_the_state(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    memory, kept = _filled(make_memory)
    graph = _graph(context_node(memory, max_tokens=40))
    out = graph.invoke({"messages": [("user", "When does the Lisbon flight leave?")]})
    expected = memory.context("When does the Lisbon flight leave?", 40)
    assert out["seen"] == out["memory_context"] == expected.text
    assert kept in expected.memory_ids and "Ann: Ann's flight to Lisbon" in out["seen"]
    assert memory.config.token_counter.count(out["seen"]) <= 40
    empty = graph.invoke({"messages": [("user", "   ")]})
    assert empty["seen"] == ""


def test_an_async_manager_gives_an_async_node(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    memory, kept = _filled(make_memory)
    expected = memory.context("Lisbon flight", 60)
    aio = AsyncAgentMemoryManager(memory)

    async def main() -> Any:
        try:
            return await _graph(context_node(aio, max_tokens=60)).ainvoke(
                {"messages": [("user", "Lisbon flight")]}
            )
        finally:
            await aio.shutdown()

    out = asyncio.run(main())
    assert out["seen"] == expected.text and kept in expected.memory_ids


@pytest.mark.parametrize("bad", [0, -1, 2.5, "10"])
def test_a_bad_budget_fails_when_the_node_is_made(
    make_memory: Callable[..., AgentMemoryManager], bad: Any
) -> None:
    memory, _ = _filled(make_memory)
    with pytest.raises(InvalidBudgetError):
        context_node(memory, max_tokens=bad)
    with pytest.raises(InvalidTypeError):
        context_node("agent.db", max_tokens=100)  # type: ignore[arg-type]

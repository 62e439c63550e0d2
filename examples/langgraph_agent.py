"""A LangGraph graph whose long-term memory is a tiered-memory file.

What it shows: ``TieredMemoryStore`` passed where LangGraph takes a store
(``builder.compile(store=...)``). The graph has three nodes: ``recall`` searches the
user's namespace for what is relevant to the message (recall's explanation rides along
on each item), ``respond`` calls the "model" (``fake_llm``, a plain function: no network),
and ``remember`` keeps the user's statements as items. Items live in the user's
namespace, so two users never see each other's memories, and they stay in the file
for the next process (a ``put`` is committed before the node returns).

Needs the ``langgraph`` extra (``pip install 'tiered-memory[langgraph]'``):

    python examples/langgraph_agent.py                # writes langgraph-agent.db here
    python examples/langgraph_agent.py other.db
"""

from __future__ import annotations

import sys
import uuid
from typing import TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from tiered_memory.integrations.langgraph import TieredMemoryStore

MIN_SCORE = 0.2
"""Without an ``index``, an item's score is recall's fused score; under this it is noise."""


class State(TypedDict, total=False):
    message: str
    memories: list[str]
    answer: str


def fake_llm(message: str, memories: list[str]) -> str:
    """Stands in for a chat model: answers a question from the best memory."""
    if message.rstrip().endswith("?"):
        return f"You told me: {memories[0]}" if memories else "I don't know yet."
    return "Got it."


def namespace(config: RunnableConfig) -> tuple[str, str]:
    return (config["configurable"]["user_id"], "memories")


def recall(state: State, config: RunnableConfig, *, store: BaseStore) -> State:
    found = store.search(namespace(config), query=state["message"], limit=3)
    items = [item for item in found if (item.score or 0.0) >= MIN_SCORE]  # drop weak hits
    for item in items:
        print(f"  recalled {item.value['text']!r} -- {getattr(item, 'explanation', '')}")
    return {"memories": [item.value["text"] for item in items]}


def respond(state: State) -> State:
    return {"answer": fake_llm(state["message"], state.get("memories", []))}


def remember(state: State, config: RunnableConfig, *, store: BaseStore) -> State:
    if not state["message"].rstrip().endswith("?"):  # a statement: keep it
        store.put(namespace(config), uuid.uuid4().hex, {"text": state["message"]})
    return {}


def build() -> StateGraph:
    builder = StateGraph(State)
    builder.add_node("recall", recall)
    builder.add_node("respond", respond)
    builder.add_node("remember", remember)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "respond")
    builder.add_edge("respond", "remember")
    builder.add_edge("remember", END)
    return builder


def main(argv: list[str]) -> int:
    path = argv[1] if len(argv) > 1 else "langgraph-agent.db"
    with TieredMemoryStore.open(path) as store:
        graph = build().compile(store=store)
        turns = [
            ("ann", "I am allergic to peanuts."),
            ("bob", "My favourite editor is Emacs."),
            ("ann", "What am I allergic to?"),
            ("bob", "What am I allergic to?"),  # Bob's namespace holds no allergy
        ]
        for user, message in turns:
            config: RunnableConfig = {"configurable": {"user_id": user}}
            print(f"{user}: {message}")
            result = graph.invoke({"message": message}, config)
            print(f"agent: {result['answer']}")
        for user in ("ann", "bob"):
            print(f"{user} has {len(store.search((user, 'memories'), limit=100))} item(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))

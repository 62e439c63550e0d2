"""Supersession through every interface: the async API, ``query()``, the LangGraph
store's search (current only), the MCP tools and ``tiered-memory search --as-of``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import FakeClock
from tiered_memory import AgentMemoryManager, AsyncAgentMemoryManager
from tiered_memory.errors import InvalidSupersessionError

CLI = str(Path(sys.executable).with_name("tiered-memory"))


def test_query_leaves_superseded_memories_out_unless_asked(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    old = memory.remember("The user lives in Paris")
    clock.advance(1000)
    moment = clock.now
    clock.advance(1000)
    new = memory.remember("The user lives in Berlin", supersedes=old.id)
    assert [m.id for m in memory.query()] == [new.id]
    assert [m.id for m in memory.query(include_superseded=True)] == [new.id, old.id]
    assert [m.id for m in memory.query("episodic", as_of=moment)] == [old.id]
    with pytest.raises(ValueError):
        memory.query(include_superseded="yes")


def test_the_async_api_supersedes_recalls_as_of_and_gives_the_timeline(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    async def main() -> None:
        memory = AsyncAgentMemoryManager(make_memory(embedder=None))
        old = await memory.remember("Ana works at Acme")
        clock.advance(1000)
        new = await memory.remember("Ana works at Initech", supersedes=old.id)
        hits = await memory.recall("Ana works", 5)
        assert [h.memory.id for h in hits] == [new.id]
        then = await memory.recall("Ana works", 5, as_of=old.created_at)
        assert [h.memory.id for h in then] == [old.id]
        chain = await memory.timeline(new.id)
        assert [e.memory_id for e in chain] == [old.id, new.id]
        with pytest.raises(InvalidSupersessionError):
            await memory.remember("Ana works at Hooli", supersedes=old.id)

    asyncio.run(main())


def test_the_langgraph_store_searches_current_items(any_store: str) -> None:
    from tiered_memory.integrations.langgraph import TieredMemoryStore

    with TieredMemoryStore.open(any_store, embedder=None) as store:
        store.put(("docs",), "a", {"text": "Python tutorial for beginners"})
        store.put(("docs",), "b", {"text": "Python packaging notes"})
        item = store._find(("docs",), "a")
        assert item is not None
        store.memory.remember("Python tutorial, second edition", supersedes=item.id)
        assert [h.key for h in store.search(("docs",), query="python tutorial")] == ["b"]
        found = store.get(("docs",), "a")  # the item itself is still there
        assert found is not None and found.value["text"] == "Python tutorial for beginners"


def test_the_mcp_tools_supersede_and_recall_as_of(any_location: str) -> None:
    from mcp.types import CallToolResult

    from tiered_memory.integrations.mcp_server import serving

    def structured(result: object) -> dict[str, Any]:
        assert isinstance(result, CallToolResult) and isinstance(result.structured_content, dict)
        return result.structured_content

    async def main() -> None:
        async with serving(any_location, keywords_only=True) as server:
            old = structured(await server.call_tool("remember", {"content": "Bo lives in Oslo"}))
            new = structured(
                await server.call_tool(
                    "remember", {"content": "Bo lives in Bergen", "supersedes": [old["id"]]}
                )
            )
            now = structured(await server.call_tool("recall", {"query": "Bo lives"}))["hits"]
            assert [h["memory"]["id"] for h in now] == [new["id"]]
            assert f"supersedes {old['id']}" in now[0]["explanation"]
            then = structured(
                await server.call_tool("recall", {"query": "Bo lives", "as_of": old["created_at"]})
            )["hits"]
            assert [h["memory"]["id"] for h in then] == [old["id"]]
            both = structured(
                await server.call_tool("recall", {"query": "Bo lives", "include_superseded": True})
            )["hits"]
            assert {h["memory"]["id"] for h in both} == {old["id"], new["id"]}
            [was] = [h for h in both if h["memory"]["id"] == old["id"]]
            assert f"superseded by {new['id']} on " in was["explanation"]

    asyncio.run(main())


@pytest.mark.subprocess
def test_cli_search_as_of(any_location: str) -> None:
    db = any_location
    clock = FakeClock(1_714_521_600_000)  # 2024-05-01T00:00Z
    with AgentMemoryManager.open(db, clock=clock, embedder=None) as memory:
        old = memory.remember("The office is in Leeds")
        clock.advance(86_400_000 * 30)
        new = memory.remember("The office is in York", supersedes=old.id)

    def search(*options: str) -> list[str]:
        result = subprocess.run(
            [CLI, "search", str(db), "office", "--keywords-only", "--json", *options],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        return [h["memory"]["id"] for h in orjson.loads(result.stdout)]

    assert search() == [new.id]
    assert search("--as-of", "2024-05-10") == [old.id]
    assert search("--as-of", str(clock.now)) == [new.id]
    assert set(search("--include-superseded")) == {old.id, new.id}

    def listed(*options: str) -> list[str]:
        result = subprocess.run([CLI, "list", str(db), "--json", *options],
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        assert result.returncode == 0, result.stderr
        return [m["id"] for m in orjson.loads(result.stdout)]

    assert listed() == [new.id]  # as query(): current memories
    assert set(listed("--include-superseded")) == {old.id, new.id}
    bad = subprocess.run([CLI, "search", str(db), "office", "--as-of", "last spring"],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert bad.returncode == 2 and "ISO 8601" in bad.stderr


def test_the_inspector_shows_the_timeline_and_counts_superseded(any_location: str) -> None:
    from starlette.testclient import TestClient

    from tests.support.inspector_data import open_inspected
    from tiered_memory.inspector.app import create_app

    db = any_location
    clock = FakeClock()
    with AgentMemoryManager.open(db, clock=clock, embedder=None) as memory:
        a = memory.remember("Ana lives in Lisbon")
        clock.advance(86_400_000)
        b = memory.remember("Ana lives in Porto", supersedes=a.id)
        lone = memory.remember("unrelated")
    with open_inspected(db, embedder=None) as memory:
        client = TestClient(create_app(memory), base_url="http://127.0.0.1")
        assert client.get("/index.json").json()["superseded"] == 1
        assert 'id="superseded-count">1<' in client.get("/").text
        data = client.get(f"/memories/{a.id}.json").json()
        chain = data["timeline"]
        assert [e["id"] for e in chain] == [a.id, b.id]
        assert chain[0]["superseded_by"] == b.id and chain[0]["valid_to"] == b.created_at
        assert chain[0]["this"] and chain[1]["supersedes"] == [a.id]
        page = client.get(f"/memories/{b.id}").text
        assert 'id="timeline"' in page and f'href="/memories/{a.id}"' in page
        assert 'id="timeline"' not in client.get(f"/memories/{lone.id}").text
        listed = client.get("/memories.json").json()["memories"]
        assert {m["id"] for m in listed} == {a.id, b.id, lone.id}  # the inspector lists all

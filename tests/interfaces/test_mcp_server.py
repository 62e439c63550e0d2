"""`tiered-memory mcp DB` end to end: the MCP SDK's own stdio client against a real server
process, every tool and resource, bad arguments, and SIGKILL after acknowledged writes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from persistence import TieredMemoryError
from persistence.locations import is_server_url
from tests.conftest import file_digest
from tiered_memory import AgentMemoryManager, Tier

pytestmark = pytest.mark.subprocess

NOTE_TOOLS = {"create_note", "get_note", "list_notes", "update_note", "note_history",
              "delete_note"}  # fmt: skip
READ_ONLY_SERVER_TOOLS = {"recall", "context", "get", "statistics", "get_note", "list_notes",
                          "note_history"}  # fmt: skip
TOOLS = READ_ONLY_SERVER_TOOLS | NOTE_TOOLS | {
    "remember", "forget", "promote", "start_session", "end_session", "append_transcript",
    "forget_session", "forget_agent",
}  # fmt: skip
COMMAND = sys.executable
CLI = ["-c", "from tiered_memory.cli import main; main()"]
"""The command line of this checkout (run from its root), not whichever ``tiered-memory``
the environment installed."""
ROOT = Path(__file__).resolve().parents[2]


@contextlib.asynccontextmanager
async def connected(db: Path | str, errlog: Path, *options: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=COMMAND, args=[*CLI, "mcp", str(db), "--keywords-only", *options], cwd=ROOT
    )
    with errlog.open("a") as err:
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def refused(session: ClientSession, tool: str, **arguments: Any) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert isinstance(text, str)
    return text


def python_message(call: Any) -> str:
    """The message the Python API raises for the same bad call."""
    with (
        AgentMemoryManager.in_memory(embedder=None) as memory,
        pytest.raises(TieredMemoryError) as raised,
    ):
        call(memory)
    return str(raised.value)


@pytest.mark.slow
def test_every_tool_and_resource_over_stdio(tmp_path: Path, any_location: str) -> None:
    db = any_location

    async def main() -> None:
        async with connected(db, tmp_path / "server.log") as session:
            assert {t.name for t in (await session.list_tools()).tools} == TOOLS
            templates = (await session.list_resource_templates()).resource_templates
            assert {t.uri_template for t in templates} == {
                "memory://{memory_id}", "session://{session_id}/transcript"
            }  # fmt: skip
            started = await call(session, "start_session")
            sid = started["session_id"]
            m = await call(session, "remember", content="The user prefers dark mode",
                           session_id=sid, tags=["ui"], importance=0.8)  # fmt: skip
            assert m["tier"] == "episodic" and m["tags"] == ["ui"]
            turn = await call(session, "append_transcript", session_id=sid, role="user",
                              content="Switch to dark mode please")  # fmt: skip
            assert turn["turn_number"] == 1
            hits = (await call(session, "recall", query="which theme? dark mode", k=3))["hits"]
            assert hits[0]["memory"]["id"] == m["id"]
            assert "keyword" in hits[0]["explanation"] and hits[0]["signals"]
            packed = await call(session, "context", query="which theme? dark mode",
                                max_tokens=60)  # fmt: skip
            assert packed["memory_ids"] == [m["id"]] and packed["tokens"] <= 60
            assert "The user prefers dark mode" in packed["text"]
            got = await call(session, "get", memory_id=m["id"])
            assert got["found"] and got["memory"]["content"] == "The user prefers dark mode"
            promoted = await call(session, "promote", memory_id=m["id"], to_tier="semantic",
                                  reason="confirmed")  # fmt: skip
            assert (promoted["from_tier"], promoted["to_tier"]) == ("episodic", "semantic")
            resource = await session.read_resource(f"memory://{m['id']}")
            as_json = orjson.loads(resource.contents[0].text)  # type: ignore[union-attr]
            assert as_json["tier"] == "semantic"
            transcript = await session.read_resource(f"session://{sid}/transcript")
            lines = orjson.loads(transcript.contents[0].text)  # type: ignore[union-attr]
            assert [(t["role"], t["content"]) for t in lines] == [
                ("user", "Switch to dark mode please")
            ]
            with pytest.raises(MCPError, match="no memory"):
                await session.read_resource("memory://nothing-here")
            stats = await call(session, "statistics")
            assert stats["storage"]["promotion_count"] == 1
            backend = "postgresql" if is_server_url(str(db)) else "sqlite"
            assert stats["storage"]["backend"] == backend and stats["storage"]["size_bytes"] > 0
            details = stats["storage"]["backend_details"]
            assert details and (backend != "sqlite" or details["page_count"] > 0)
            ended = await call(session, "end_session", session_id=sid)
            assert ended["ended_at"] is not None
            assert (await call(session, "forget", memory_id=m["id"]))["forgotten"] is True
            assert (await call(session, "get", memory_id=m["id"]))["found"] is False

    asyncio.run(main())
    with AgentMemoryManager.open(db, embedder=None, embed_in_background=False) as memory:
        assert memory.statistics().storage.forgotten_count == 1


@pytest.mark.slow
def test_bad_arguments_are_tool_errors_with_the_librarys_message(
    tmp_path: Path, any_location: str
) -> None:
    cases: list[tuple[str, dict[str, Any], Any]] = [
        ("remember", {"content": "x", "importance": 2.0},
         lambda m: m.remember("x", importance=2.0)),
        ("remember", {"content": "x", "tier": "attic"}, lambda m: m.remember("x", tier="attic")),
        ("remember", {"content": "x", "session_id": "no-such-session"},
         lambda m: m.remember("x", session_id="no-such-session")),
        ("recall", {"query": "x", "k": 0}, lambda m: m.recall("x", k=0)),
        ("context", {"query": "x", "max_tokens": 0}, lambda m: m.context("x", max_tokens=0)),
        ("promote", {"memory_id": "missing", "to_tier": "semantic"},
         lambda m: m.promote("missing", Tier.SEMANTIC)),
        ("end_session", {"session_id": "missing"}, lambda m: m.end_session("missing")),
        ("remember", {"content": " \n\t"}, lambda m: m.remember(" \n\t")),
    ]  # fmt: skip

    async def main() -> None:
        async with connected(any_location, tmp_path / "server.log") as session:
            for tool, arguments, same_call in cases:
                text = await refused(session, tool, **arguments)
                assert python_message(same_call) in text, (tool, text)
            # still serving, and nothing was written
            stats = await call(session, "statistics")
            tiers = ("scratchpad", "episodic", "semantic")
            counts = [stats["storage"][f"{t}_count"] for t in tiers]
            assert counts == [0, 0, 0]

    asyncio.run(main())


@pytest.mark.slow
def test_notes_tools_over_stdio(tmp_path: Path, any_location: str) -> None:
    db = any_location
    with AgentMemoryManager.open(db, embedder=None, embed_in_background=False) as memory:
        fact = memory.remember("The Lisbon office opens in June", relations=[
            ("Lisbon office", "opens_in", "June")])  # fmt: skip

    async def main() -> tuple[str, str]:
        async with connected(db, tmp_path / "server.log") as session:
            made = await call(
                session, "create_note", title="Move checklist", tags=["move"], author="ana",
                content="Find a flat near the office", memories=[fact.id],
                entities=["Lisbon office"],
            )  # fmt: skip
            assert (made["version"], made["created_by"], made["tags"]) == (1, "ana", ["move"])
            assert {link["kind"] for link in made["links"]} == {"memory", "entity"}
            other = await call(session, "create_note", title="Groceries", content="bread")
            edited = await call(session, "update_note", note_id=made["id"],
                                content="Find a flat near the river", author="bo")  # fmt: skip
            assert (edited["version"], edited["updated_by"]) == (2, "bo")
            history = (await call(session, "note_history", note_id=made["id"]))["versions"]
            assert [(v["version"], v["author"], v["changed"]) for v in history] == [
                (1, "ana", ["title", "content", "tags"]), (2, "bo", ["content"])
            ]  # fmt: skip
            got = await call(session, "get_note", note_id=made["id"])
            assert got["found"] and got["note"]["content"] == "Find a flat near the river"
            listed = (await call(session, "list_notes", tag="move"))["notes"]
            assert [n["id"] for n in listed] == [made["id"]]
            every = (await call(session, "list_notes"))["notes"]
            assert {n["id"] for n in every} == {made["id"], other["id"]}
            hits = (await call(session, "recall", query="flat near the river", notes=True))["hits"]
            assert hits[0]["kind"] == "note" and hits[0]["note"]["id"] == made["id"]
            assert "written on purpose" in hits[0]["explanation"]
            memories_only = (await call(session, "recall", query="flat river"))["hits"]
            assert all(h["kind"] == "memory" for h in memories_only)
            bad: list[tuple[str, dict[str, Any], Any]] = [
                ("create_note", {"title": "  "}, lambda m: m.notes.create("  ")),
                ("update_note", {"note_id": "missing", "title": "x"},
                 lambda m: m.notes.update("missing", title="x")),
                ("create_note", {"title": "t", "memories": ["no-such-memory"]},
                 lambda m: m.notes.create("t", memories=["no-such-memory"])),
                ("note_history", {"note_id": "missing"}, lambda m: m.notes.history("missing")),
            ]  # fmt: skip
            for tool, arguments, same_call in bad:
                text = await refused(session, tool, **arguments)
                assert python_message(same_call) in text, (tool, text)
            assert (await call(session, "delete_note", note_id=other["id"]))["deleted"] is True
            assert (await call(session, "delete_note", note_id=other["id"]))["deleted"] is False
            assert (await call(session, "get_note", note_id=other["id"]))["found"] is False
            return made["id"], other["id"]

    kept, deleted = asyncio.run(main())
    with AgentMemoryManager.open(db, embedder=None, embed_in_background=False) as memory:
        assert memory.notes.count() == 1 and memory.notes.get(deleted) is None
        note = memory.notes.get(kept)
        assert note is not None and note.version == 2
        assert [n.id for n in memory.notes.about(memory=fact.id)] == [kept]


def _server_pid(db: Path) -> int:
    """The server process: a child of this one serving ``db``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            if ppid == os.getpid() and str(db).encode() in cmdline:
                return int(entry.name)
    raise AssertionError("server process not found")


@pytest.mark.slow
@pytest.mark.crash
def test_sigkill_after_acknowledged_remembers_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    acknowledged: list[str] = []

    async def main() -> None:
        with contextlib.suppress(Exception):  # the client notices its server died
            async with connected(db, tmp_path / "server.log") as session:
                for n in range(25):
                    stored = await call(session, "remember", content=f"fact number {n}")
                    acknowledged.append(stored["id"])
                os.kill(_server_pid(db), signal.SIGKILL)
                await asyncio.sleep(0.2)

    asyncio.run(main())
    assert len(acknowledged) == 25
    with AgentMemoryManager.open(db, embedder=None, embed_in_background=False) as memory:
        assert all(memory.get(memory_id) is not None for memory_id in acknowledged)
        assert memory.check_integrity().ok

    async def read_only() -> None:  # the same file served --read-only: no byte changes
        async with connected(db, tmp_path / "server.log", "--read-only") as session:
            hits = (await call(session, "recall", query="fact number 7", k=1))["hits"]
            assert hits[0]["memory"]["content"] == "fact number 7"
            text = await refused(session, "remember", content="not written")
            assert "unknown tool" in text.lower()  # not offered at all on a read-only server
            assert {t.name for t in (await session.list_tools()).tools} == READ_ONLY_SERVER_TOOLS

    before = file_digest(db)
    asyncio.run(read_only())
    assert file_digest(db) == before


def test_a_read_only_server_lists_only_tools_that_work(tmp_path: Path) -> None:
    """Every tool a --read-only server lists answers without an error, and no byte of the
    file changes (the write tools are not offered: a model would only see them fail)."""
    db = tmp_path / "agent.db"
    with AgentMemoryManager.open(db, embedder=None, embed_in_background=False) as memory:
        memory_id = memory.remember("The spare key is under the red pot").id
        note_id = memory.notes.create("Keys", content="spare key: red pot").id
    arguments: dict[str, dict[str, Any]] = {
        "recall": {"query": "spare key"}, "get": {"memory_id": memory_id}, "statistics": {},
        "context": {"query": "spare key", "max_tokens": 50},
        "get_note": {"note_id": note_id}, "list_notes": {}, "note_history": {"note_id": note_id},
    }  # fmt: skip

    async def main() -> set[str]:
        async with connected(db, tmp_path / "server.log", "--read-only") as session:
            listed = {t.name for t in (await session.list_tools()).tools}
            for name in sorted(listed):
                await call(session, name, **arguments[name])  # asserts no tool error
            return listed

    before = file_digest(db)
    assert asyncio.run(main()) == READ_ONLY_SERVER_TOOLS
    assert file_digest(db) == before


@pytest.mark.slow  # 8.7 s measured on a busy machine
def test_an_encrypted_file_is_served_with_the_key_file(tmp_path: Path) -> None:
    db, key_file = tmp_path / "secret.db", tmp_path / "key"
    key_file.write_text("mcp test key\n")
    with AgentMemoryManager.open(db, key="mcp test key", embedder=None) as memory:
        memory.remember("The vault code is kept in the blue folder")
    params = StdioServerParameters(
        command=COMMAND,
        args=[*CLI, "--key-file", str(key_file), "mcp", str(db), "--keywords-only", "--read-only"],
        cwd=ROOT,
    )

    async def main() -> str:
        with (tmp_path / "server.log").open("a") as err:
            async with (
                stdio_client(params, errlog=err) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                hits = (await call(session, "recall", query="vault code", k=1))["hits"]
                content = hits[0]["memory"]["content"]
                assert isinstance(content, str)
                return content

    assert asyncio.run(main()) == "The vault code is kept in the blue folder"


def test_blank_content_is_a_tool_error_and_recall_cuts_weak_hits(tmp_path: Path) -> None:
    """In process (this checkout's code): the tools refuse blank content, writing nothing,
    and recall's cuts reach the library."""
    from mcp.server.mcpserver.exceptions import ToolError

    from tiered_memory.integrations.mcp_server import serving

    async def main() -> None:
        async with serving(tmp_path / "tools.db", keywords_only=True) as server:
            for blank in ("", "   ", "\n\t"):
                with pytest.raises(ToolError, match="empty or only whitespace"):
                    await server.call_tool("remember", {"content": blank})
            for text in ("the lighthouse trip", "a lighthouse", "trip notes", "unrelated"):
                await server.call_tool("remember", {"content": text})
            every = await server.call_tool("recall", {"query": "lighthouse trip", "k": 10})
            cut = await server.call_tool(
                "recall", {"query": "lighthouse trip", "k": 10, "relative_cut": 0.9}
            )
            everything, kept = _structured(every)["hits"], _structured(cut)["hits"]
            assert 0 < len(kept) < len(everything)
            assert [h["memory"]["id"] for h in kept] == [
                h["memory"]["id"] for h in everything[: len(kept)]
            ]
            assert all(h["score"] >= 0.9 * kept[0]["score"] for h in kept)
            stats = _structured(await server.call_tool("statistics", {}))
            assert stats["storage"]["episodic_count"] == 4

    asyncio.run(main())


def _structured(result: object) -> dict[str, Any]:
    from mcp.types import CallToolResult

    assert isinstance(result, CallToolResult) and isinstance(result.structured_content, dict)
    return result.structured_content

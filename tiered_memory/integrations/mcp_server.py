"""The memory served over the Model Context Protocol (stdio), with the official ``mcp`` SDK.

``pip install 'tiered-memory[mcp]'``; run ``tiered-memory mcp agent.db``. Tools:
``remember``, ``recall`` (hits with their explanation), ``context`` (the memories that
answer a query as prompt text within a token budget), ``get``, ``forget``, ``promote``,
``start_session``, ``end_session``, ``append_transcript``, ``statistics``, the notes'
(``create_note``, ``get_note``, ``list_notes``, ``update_note``, ``note_history``,
``delete_note``: :mod:`~tiered_memory.integrations.mcp_notes`); on a writable
server also ``forget_session`` and ``forget_agent`` (erasure: see the README's "Forget
means forgotten"). A read-only server (``--read-only``) lists only the tools that work
there (``recall``, ``context``, ``get``, ``statistics``, ``get_note``, ``list_notes``,
``note_history``): a model is never offered a tool that always fails. Read-only
resources: ``memory://{memory_id}`` (a memory as JSON) and
``session://{session_id}/transcript`` (a session's transcript as JSON).

Each tool is one call of :class:`~tiered_memory.AsyncAgentMemoryManager`, so it is
durable when its result is sent (a killed server loses no acknowledged write), and runs
off the event loop. Arguments are checked by the library's own rules: a bad one comes
back as a tool error (``isError``) carrying the message the Python API raises, and the
server keeps serving.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from persistence import Memory, TieredMemoryError, memory_to_json
from tiered_memory import __version__
from tiered_memory.aio import AsyncAgentMemoryManager
from tiered_memory.integrations.mcp_notes import add_note_tools, note_json
from tiered_memory.integrations.mcp_values import plain as _plain
from tiered_memory.integrations.mcp_values import tool_call as _tool
from tiered_memory.recall import NoteHit, RecallHit

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "A durable three-tier memory (scratchpad, episodic, semantic) in one SQLite file. "
    "remember() what is worth keeping, recall() with a question to get the best "
    "memories and why each came back, promote() what proved true to the semantic tier, "
    "and keep a session's transcript with start_session/append_transcript/end_session."
)


def _memory(memory: Memory) -> dict[str, Any]:
    row: dict[str, Any] = {"tier": memory.tier.value, **_plain(memory_to_json(memory))}
    del row["embedding"]  # 1.5 kB of base64 no model wants to read
    row["embedded"] = memory.embedding is not None
    return row


def _hit(hit: RecallHit | NoteHit) -> dict[str, Any]:
    row = {
        "kind": hit.kind,
        "score": hit.score,
        "explanation": str(hit.explanation),
        "signals": _plain(hit.explanation.signals),
    }
    if isinstance(hit, NoteHit):
        row["note"] = note_json(hit.note)
    else:
        row["memory"] = _memory(hit.memory)
    return row


WRITE_TOOLS = (
    "remember", "forget", "promote", "start_session", "end_session", "append_transcript",
    "create_note", "update_note", "delete_note",
)  # fmt: skip
"""The tools that write: a read-only server does not offer them."""


def _erasure_tools(server: MCPServer[Any], memory: AsyncAgentMemoryManager) -> None:
    """The bulk erasure tools, offered only where the server can write."""

    @server.tool()
    async def forget_session(
        session_id: str, reason: str = "forgotten on request"
    ) -> dict[str, Any]:
        """Forget every memory of a session and delete it with its transcript, for good:
        no byte of the content stays in the file. Returns the ids forgotten."""
        return (await _tool(memory.forget_session(session_id, reason))).to_dict()

    @server.tool()
    async def forget_agent(agent_id: str, reason: str = "forgotten on request") -> dict[str, Any]:
        """Forget every memory of an agent for good (on a server scoped to that agent,
        also its sessions and transcripts). Returns the ids forgotten."""
        return (await _tool(memory.forget_agent(agent_id, reason))).to_dict()


def build_server(memory: AsyncAgentMemoryManager) -> MCPServer[Any]:
    """An MCP server whose tools and resources call ``memory`` (not yet running)."""
    server: MCPServer[Any] = MCPServer(
        "tiered-memory", version=__version__, instructions=INSTRUCTIONS
    )

    @server.tool()
    async def remember(
        content: str,
        tier: str = "episodic",
        session_id: str | None = None,
        agent_id: str | None = None,
        importance: float = 0.5,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        source: str | None = None,
        category: str | None = None,
        supersedes: list[str] | None = None,
    ) -> dict[str, Any]:
        """Store a memory (tier: scratchpad, episodic or semantic; importance 0-1); it is
        durable when this returns. Returns the memory with its id. supersedes: ids of
        memories this one replaces (a fact that changed): recall then answers with the
        new one."""
        stored = await _tool(
            memory.remember(
                content, tier, session_id=session_id, agent_id=agent_id,
                importance=importance, tags=tags or (), metadata=metadata, source=source,
                category=category, supersedes=supersedes or None,
            )
        )  # fmt: skip
        return _memory(stored)

    @server.tool()
    async def recall(
        query: str,
        k: int = 5,
        tier: str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        tags: list[str] | None = None,
        min_score: float | None = None,
        relative_cut: float | None = None,
        notes: bool = False,
        as_of: int | None = None,
        include_superseded: bool = False,
    ) -> dict[str, Any]:
        """The k memories that best answer the query, best first, each with its score and
        an explanation of which signals (keywords, meaning) matched and how much, and
        whether a keyword match came from the turns around a memory. min_score drops hits
        scoring below it, relative_cut (0-1) those under that share of the best score.
        notes: notes compete too, as hits of kind "note" (memories' hits: "memory").
        Only current memories answer (one superseded by a newer memory is left out);
        as_of (epoch ms) answers as of that moment; include_superseded: they compete too,
        each saying what superseded it."""
        hits = await _tool(
            memory.recall(query, k, tier=tier, session_id=session_id, agent_id=agent_id,
                          tags=tags or (), min_score=min_score, relative_cut=relative_cut,
                          notes=notes, as_of=as_of, include_superseded=include_superseded)
        )  # fmt: skip
        return {"hits": [_hit(h) for h in hits]}

    @server.tool()
    async def context(
        query: str,
        max_tokens: int = 1000,
        tier: str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        tags: list[str] | None = None,
        as_of: int | None = None,
        include_superseded: bool = False,
    ) -> dict[str, Any]:
        """The memories that answer the query as text ready for a prompt, within
        max_tokens: the scratchpad first, then memories grouped by session under one
        header (date, who), in conversation order, each line cited as [m:<ref>]. Also
        memory_ids (in order), tokens (never above max_tokens), omitted (candidates
        that did not fit) and, per memory, why it is there. Writes nothing."""
        found = await _tool(
            memory.context(query, max_tokens, tier=tier, session_id=session_id,
                           agent_id=agent_id, tags=tags or (), as_of=as_of,
                           include_superseded=include_superseded)
        )  # fmt: skip
        return found.to_dict()

    @server.tool()
    async def get(memory_id: str) -> dict[str, Any]:
        """One memory by id (``found`` false when there is none)."""
        found = await _tool(memory.get(memory_id))
        return {"found": found is not None, "memory": _memory(found) if found else None}

    @server.tool()
    async def forget(memory_id: str, reason: str = "forgotten on request") -> dict[str, Any]:
        """Delete a memory (an audit row keeps that it was forgotten, and why)."""
        return {"forgotten": await _tool(memory.forget(memory_id, reason))}

    if not memory.read_only:
        _erasure_tools(server, memory)
    add_note_tools(server, memory)

    @server.tool()
    async def promote(memory_id: str, to_tier: str, reason: str | None = None) -> dict[str, Any]:
        """Move a memory forward (scratchpad -> episodic -> semantic), logged."""
        record = await _tool(memory.promote(memory_id, to_tier, reason))
        return dict(_plain(record))

    @server.tool()
    async def start_session(
        session_id: str | None = None, metadata: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Start a session (a new id unless one is given); returns it."""
        return dict(_plain(await _tool(memory.start_session(session_id, metadata))))

    @server.tool()
    async def end_session(session_id: str) -> dict[str, Any]:
        """End a session."""
        return dict(_plain(await _tool(memory.end_session(session_id))))

    @server.tool()
    async def append_transcript(session_id: str, role: str, content: str) -> dict[str, Any]:
        """Add a line to a session's transcript as its next turn."""
        return dict(_plain(await _tool(memory.append_transcript(session_id, role, content))))

    @server.tool()
    async def statistics() -> dict[str, Any]:
        """Counts per tier, sessions, transcripts, promotions, size (SQLite: file and WAL)."""
        return dict(_plain(await _tool(memory.statistics())))

    @server.resource("memory://{memory_id}", mime_type="application/json")
    async def memory_resource(memory_id: str) -> str:
        """A memory as JSON."""
        try:
            found = await memory.get(memory_id)
        except TieredMemoryError as exc:
            raise ResourceError(str(exc)) from exc
        if found is None:
            raise ResourceNotFoundError(f"no memory {memory_id}")
        return orjson.dumps(_memory(found)).decode()

    @server.resource("session://{session_id}/transcript", mime_type="application/json")
    async def transcript_resource(session_id: str) -> str:
        """A session's transcript as JSON, in turn order."""
        try:
            if await memory.get_session(session_id) is None:
                raise ResourceNotFoundError(f"no session {session_id}")
            entries = await memory.get_transcript(session_id)
        except TieredMemoryError as exc:
            raise ResourceError(str(exc)) from exc
        return orjson.dumps(_plain(entries)).decode()

    if memory.read_only:
        for name in WRITE_TOOLS:
            server.remove_tool(name)
    return server


@asynccontextmanager
async def serving(
    db: str | os.PathLike[str],
    *,
    read_only: bool = False,
    keywords_only: bool = False,
    key: str | bytes | None = None,
    agent_id: str | None = None,
) -> AsyncIterator[MCPServer[Any]]:
    """Open ``db`` (with ``key`` if it is encrypted; scoped to ``agent_id`` if given) and
    yield a server over it; the memory is shut down on the way out."""
    config: dict[str, Any] = {"embedder": None} if keywords_only else {}
    memory = await AsyncAgentMemoryManager.open(
        db, read_only=read_only, key=key, agent_id=agent_id, **config
    )
    try:
        yield build_server(memory)
    finally:
        await memory.shutdown()


def serve(
    db: str | os.PathLike[str],
    *,
    read_only: bool = False,
    keywords_only: bool = False,
    key: str | bytes | None = None,
    agent_id: str | None = None,
) -> None:
    """Serve ``db`` over stdio until the client closes the connection (scoped to
    ``agent_id`` if given)."""

    async def main() -> None:
        async with serving(
            db, read_only=read_only, keywords_only=keywords_only, key=key, agent_id=agent_id
        ) as server:
            await server.run_stdio_async()

    asyncio.run(main())

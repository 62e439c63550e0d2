"""An MCP client session against ``tiered-memory mcp``, with the official ``mcp`` SDK.

What it shows: what an MCP host (a desktop assistant, an agent framework) does with the
memory server: start ``tiered-memory mcp DB`` as a subprocess on stdio, list its tools,
then call them: start a session, remember, append to the transcript, recall (each hit
with the explanation of why it came back), read a memory as a resource
(``memory://{id}``), forget, and read the statistics. A bad argument comes back as a
tool error carrying the library's message; the server keeps serving.

Needs the ``mcp`` extra (``pip install 'tiered-memory[mcp]'``):

    python examples/mcp_client.py                 # serves mcp-agent.db in this folder
    python examples/mcp_client.py other.db
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client


def server_for(db: str) -> StdioServerParameters:
    """``tiered-memory mcp DB`` with this Python (``python -m tiered_memory`` is the same
    command), in this process's environment (where ``TIERED_MEMORY_KEY`` would go)."""
    return StdioServerParameters(
        command=sys.executable, args=["-m", "tiered_memory", "mcp", db], env=dict(os.environ)
    )


async def call(session: ClientSession, tool: str, **arguments: Any) -> Any:
    """A tool's structured result; a tool error raises with the server's message."""
    result = await session.call_tool(tool, arguments)
    if result.is_error:
        raise RuntimeError(f"{tool}: {result.content[0].text}")  # type: ignore[union-attr]
    return result.structured_content


async def main(db: str) -> None:
    async with stdio_client(server_for(db)) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        tools = sorted(tool.name for tool in (await s.list_tools()).tools)
        print(f"{len(tools)} tools: {', '.join(tools)}")

        chat = (await call(s, "start_session", metadata={"client": "example"}))["session_id"]
        cat = await call(s, "remember", content="The user's cat is called Miso",
                         session_id=chat, importance=0.8, tags=["pets"])  # fmt: skip
        await call(s, "remember", content="The user works night shifts", session_id=chat)
        await call(s, "append_transcript", session_id=chat, role="user",
                   content="My cat Miso hates the vacuum")  # fmt: skip
        print(f"remembered {cat['id']} in {cat['tier']}")

        for hit in (await call(s, "recall", query="what is the cat's name?", k=2))["hits"]:
            print(f"hit {hit['memory']['content']!r} score {hit['score']:.3f}")
            print(f"  why: {hit['explanation']}")

        resource = await s.read_resource(f"memory://{cat['id']}")
        print("resource:", json.loads(resource.contents[0].text)["content"])  # type: ignore[union-attr]

        try:
            await call(s, "remember", content="too important", importance=2.0)
        except RuntimeError as exc:
            print(f"refused: {exc}")

        print("forgotten:", (await call(s, "forget", memory_id=cat["id"]))["forgotten"])
        stats = await call(s, "statistics")
        print(f"statistics: {stats['storage']['episodic_count']} episodic, "
              f"{stats['storage']['forgotten_count']} forgotten")  # fmt: skip
        await call(s, "end_session", session_id=chat)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "mcp-agent.db"))

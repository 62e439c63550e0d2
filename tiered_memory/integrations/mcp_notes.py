"""The MCP server's notes tools: ``create_note``, ``get_note``, ``list_notes``,
``update_note``, ``note_history`` and ``delete_note``, each one call of the async manager's
:class:`~tiered_memory.aio_notes.AsyncNotes` (durable when its result is sent; a bad
argument is a tool error with the library's message). A read-only server offers them too
and refuses the writes, as it refuses ``remember``."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

from persistence import Note, NoteVersion
from tiered_memory.aio import AsyncAgentMemoryManager
from tiered_memory.integrations.mcp_values import plain, tool_call


def note_json(note: Note) -> dict[str, Any]:
    """A note as plain JSON (tags and links as lists)."""
    return dict(plain(note))


def version_json(version: NoteVersion) -> dict[str, Any]:
    return dict(plain(version))


def add_note_tools(server: MCPServer[Any], memory: AsyncAgentMemoryManager) -> None:
    """Register the notes tools on ``server``."""
    notes = memory.notes

    @server.tool()
    async def create_note(
        title: str,
        content: str = "",
        tags: list[str] | None = None,
        author: str | None = None,
        memories: list[str] | None = None,
        entities: list[str] | None = None,
    ) -> dict[str, Any]:
        """Write a note: something written down on purpose, with a title and tags, kept
        beside the memories and never forgotten by decay. author says who wrote it;
        memories (ids) and entities (ids or names) are linked to it. Returns the note."""
        note = await tool_call(notes.create(
            title, content, tags=tags or (), author=author, memories=memories or (),
            entities=entities or (),
        ))  # fmt: skip
        return note_json(note)

    @server.tool()
    async def get_note(note_id: str) -> dict[str, Any]:
        """One note by id, with its links (``found`` false when there is none)."""
        note = await tool_call(notes.get(note_id))
        return {"found": note is not None, "note": None if note is None else note_json(note)}

    @server.tool()
    async def list_notes(tag: str | None = None, limit: int = 100) -> dict[str, Any]:
        """Notes, most recently edited first; with tag, only those carrying it."""
        found = await tool_call(notes.list(tag=tag, limit=limit))
        return {"notes": [note_json(n) for n in found]}

    @server.tool()
    async def update_note(
        note_id: str,
        title: str | None = None,
        content: str | None = None,
        tags: list[str] | None = None,
        author: str | None = None,
    ) -> dict[str, Any]:
        """Change a note's title, content or tags (those given); the edit is kept as the
        note's next version with who made it. Returns the note as it is now."""
        note = await tool_call(
            notes.update(note_id, title=title, content=content, tags=tags, author=author)
        )
        return note_json(note)

    @server.tool()
    async def note_history(note_id: str) -> dict[str, Any]:
        """Every version of a note, oldest first: what it held, who wrote it, when, and
        which fields the edit changed."""
        versions = await tool_call(notes.history(note_id))
        return {"versions": [version_json(v) for v in versions]}

    @server.tool()
    async def delete_note(note_id: str) -> dict[str, Any]:
        """Delete a note and every version of it."""
        return {"deleted": await tool_call(notes.delete(note_id))}

"""Records of notes: things a person or the agent writes down on purpose.

A note has a title, content and tags, and is edited over time: every write is kept as a
:class:`NoteVersion` (who, when, which fields changed), until the note is deleted, which
deletes every version with it. A note may be linked to memories and to entities of the
knowledge graph (:class:`NoteLink`). Memories keep the same kind of history of their
content (:class:`MemoryVersion`). Timestamps are epoch milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_TITLE_CHARS = 500
MAX_TAGS = 64
LINK_KINDS = ("memory", "entity")
"""What a note can be linked to."""
NOTE_FIELDS = ("title", "content", "tags")
"""The fields of a note that an edit changes (a version names those it changed)."""


@dataclass(frozen=True, slots=True)
class NoteLink:
    """A note's link to a memory (``kind="memory"``, a memory id) or an entity
    (``kind="entity"``, an entity id)."""

    kind: str
    target: str


@dataclass(frozen=True, slots=True)
class Note:
    """A note as it is now. ``version`` counts its writes (1: as created);
    ``created_by``/``updated_by`` name who wrote it (free text: a person, an agent, a
    tool; ``None``: not said). ``agent_id`` is the agent whose scoped handle wrote it
    (``None``: the whole store's). ``links`` are its links, oldest first (made together:
    by kind and target)."""

    id: str
    title: str
    content: str
    tags: tuple[str, ...]
    version: int
    created_at: int
    updated_at: int
    created_by: str | None = None
    updated_by: str | None = None
    agent_id: str | None = None
    links: tuple[NoteLink, ...] = ()


@dataclass(frozen=True, slots=True)
class NoteVersion:
    """One write of a note: what it held after the write, who wrote it and when, and
    which of :data:`NOTE_FIELDS` it changed (all three for version 1)."""

    note_id: str
    version: int
    title: str
    content: str
    tags: tuple[str, ...]
    author: str | None
    at: int
    changed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MemoryVersion:
    """One content of a memory: version 1 is what it was first remembered with, each
    ``update(content=...)`` adds the next; ``author`` is who changed it (``None``: not
    said), ``at`` when."""

    memory_id: str
    version: int
    content: str
    author: str | None
    at: int

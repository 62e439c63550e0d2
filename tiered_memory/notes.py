"""Notes: things a person (or the agent) writes down on purpose -- ``memory.notes``.

A note has a title, content and tags and is edited over time; every write is kept as a
:class:`~persistence.NoteVersion` (who, when, which fields changed) until the note is
deleted, which deletes every version with it. Notes are linked to memories and to
entities of the knowledge graph, found by ``recall(..., notes=True)`` as hits of their
own kind (:class:`~tiered_memory.recall.NoteHit`), and travel with JSON exports, imports
and copies. An agent-scoped handle sees only its agent's notes.

Unlike memories, notes are never promoted, reviewed or forgotten by the curve: they stay
as written until someone changes or deletes them. Every argument is checked before
anything is written (bad input raises a specific :class:`~persistence.TieredMemoryError`
and changes nothing); each call is one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from persistence import (
    Entity,
    InvalidInputError,
    InvalidTypeError,
    MemoryNotFoundError,
    MemoryStorage,
    Note,
    NoteNotFoundError,
    NoteStorage,
    NoteVersion,
    new_id,
    note_records,
    require_int,
    require_str,
)
from tiered_memory.arguments import typed_arguments
from tiered_memory.redaction import Redactor, count_in_file, redact_text

MAX_TAG_CHARS = 200


def _title(title: object) -> str:
    require_str(title, "title")
    assert isinstance(title, str)
    text = title.strip()
    if not text:
        raise InvalidInputError("title must not be empty: give the note a title")
    if len(text) > note_records.MAX_TITLE_CHARS:
        raise InvalidInputError(
            f"title has {len(text)} characters; at most {note_records.MAX_TITLE_CHARS}"
        )
    return text


def _tags(tags: object) -> tuple[str, ...]:
    if isinstance(tags, str) or not isinstance(tags, Sequence):
        raise InvalidTypeError(f"tags must be a sequence of str, got {type(tags).__name__}")
    out: list[str] = []
    for tag in tags:
        require_str(tag, "tag")
        assert isinstance(tag, str)
        text = tag.strip()
        if not text or len(text) > MAX_TAG_CHARS:
            raise InvalidInputError(f"tag {tag!r}: tags are 1 to {MAX_TAG_CHARS} characters")
        if text not in out:
            out.append(text)
    if len(out) > note_records.MAX_TAGS:
        raise InvalidInputError(f"{len(out)} tags; a note carries at most {note_records.MAX_TAGS}")
    return tuple(out)


def _author(author: object) -> str | None:
    require_str(author, "author", allow_none=True)
    assert author is None or isinstance(author, str)
    return author


@typed_arguments
class Notes:
    """The notes of one manager (``memory.notes``).

    ``notebook`` is the store's :class:`~persistence.NoteStorage`; ``store`` its memory
    storage (transactions, content limits, redaction count); ``memory_exists`` and
    ``entity`` check link targets (the entity found by id or name); ``agent_id`` is the
    scoped handle's agent, stamped on the notes it writes.
    """

    def __init__(
        self,
        notebook: NoteStorage,
        store: MemoryStorage,
        clock: Callable[[], int],
        *,
        require_open: Callable[[], None],
        memory_exists: Callable[[str], bool],
        entity: Callable[[str], Entity | None],
        agent_id: str | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.notebook = notebook
        self._store = store
        self._clock = clock
        self._require_open = require_open
        self._memory_exists = memory_exists
        self._entity = entity
        self._agent_id = agent_id
        self._redactor = redactor

    def _content(self, content: object) -> tuple[str, int]:
        require_str(content, "content")
        assert isinstance(content, str)
        self._store.memories.check_content_size(content)
        return redact_text(self._redactor, content)

    def _require(self, note_id: object) -> Note:
        require_str(note_id, "note_id")
        assert isinstance(note_id, str)
        note = self.notebook.get_note(note_id)
        if note is None:
            raise NoteNotFoundError(f"no note {note_id!r}: list them with notes.list()")
        return note

    # --- writing ------------------------------------------------------------------------

    def create(
        self,
        title: str,
        content: str = "",
        *,
        tags: Sequence[str] = (),
        author: str | None = None,
        memories: Sequence[str] = (),
        entities: Sequence[str] = (),
    ) -> Note:
        """Write a new note (version 1) and return it; ``author`` says who wrote it.
        ``memories`` and ``entities`` (ids, or entity names) are linked at once."""
        self._require_open()
        self._store.engine.require_writable()
        title = _title(title)
        text, redacted = self._content(content)
        title, in_title = redact_text(self._redactor, title)
        chosen = _tags(tags)
        who = _author(author)
        now = self._clock()
        note = Note(new_id(), title, text, chosen, 1, now, now, who, who, self._agent_id)
        version = NoteVersion(note.id, 1, title, text, chosen, who, now,
                              ("title", "content", "tags"))  # fmt: skip
        with self._store.transaction():
            targets = self._targets(memories, entities)
            self.notebook.save_note(note, version)
            for kind, target in targets:
                self.notebook.link_note(note.id, kind, target, now)
            count_in_file(self._store, redacted + in_title)
            stored = self.notebook.get_note(note.id)
        assert stored is not None
        return stored

    def update(
        self,
        note_id: str,
        *,
        title: str | None = None,
        content: str | None = None,
        tags: Sequence[str] | None = None,
        author: str | None = None,
    ) -> Note:
        """Change a note's title, content or tags; the write is kept as the next version
        (who, when, which fields changed). Changing nothing writes nothing."""
        self._require_open()
        self._store.engine.require_writable()
        new_title = None if title is None else _title(title)
        new_content, redacted = (None, 0) if content is None else self._content(content)
        new_tags = None if tags is None else _tags(tags)
        who = _author(author)
        with self._store.transaction():
            note = self._require(note_id)
            in_title = 0
            if new_title is not None:
                new_title, in_title = redact_text(self._redactor, new_title)
            changed = tuple(
                name
                for name, value in (("title", new_title), ("content", new_content),
                                    ("tags", new_tags))
                if value is not None and value != getattr(note, name)
            )  # fmt: skip
            if not changed:
                return note
            now = max(self._clock(), note.updated_at)
            after = replace(
                note,
                title=new_title if new_title is not None else note.title,
                content=new_content if new_content is not None else note.content,
                tags=new_tags if new_tags is not None else note.tags,
                version=note.version + 1,
                updated_at=now,
                updated_by=who,
            )
            self.notebook.save_note(after, NoteVersion(after.id, after.version, after.title,
                                   after.content, after.tags, who, now, changed))  # fmt: skip
            count_in_file(self._store, redacted + in_title)
        return after

    def delete(self, note_id: str) -> bool:
        """Delete a note and every version of it (nothing of its text stays); True if
        there was one."""
        self._require_open()
        require_str(note_id, "note_id")
        self._store.engine.require_writable()
        return self.notebook.delete_note(note_id)

    def link(self, note_id: str, *, memory: str | None = None, entity: str | None = None) -> bool:
        """Link a note to a memory (its id) or an entity (its id or name); False if it
        was linked already."""
        self._require_open()
        self._store.engine.require_writable()
        if (memory is None) == (entity is None):
            raise InvalidInputError("link to one thing: give memory= or entity=")
        with self._store.transaction():
            self._require(note_id)
            kind, target = self._targets(
                () if memory is None else (memory,), () if entity is None else (entity,)
            )[0]
            return self.notebook.link_note(note_id, kind, target, self._clock())

    def unlink(self, note_id: str, *, memory: str | None = None, entity: str | None = None) -> bool:
        """Remove a note's link to a memory or entity; True if there was one."""
        self._require_open()
        self._store.engine.require_writable()
        if (memory is None) == (entity is None):
            raise InvalidInputError("unlink one thing: give memory= or entity=")
        require_str(note_id, "note_id")
        if memory is not None:
            require_str(memory, "memory")
            return self.notebook.unlink_note(note_id, "memory", memory)
        assert entity is not None
        require_str(entity, "entity")
        found = self._entity(entity)
        return self.notebook.unlink_note(note_id, "entity", found.id if found else entity)

    def _targets(self, memories: Sequence[str], entities: Sequence[str]) -> list[tuple[str, str]]:
        """``(kind, id)`` of each link target, checked to exist."""
        for what, value in (("memories", memories), ("entities", entities)):
            if isinstance(value, str) or not isinstance(value, Sequence):
                got = type(value).__name__
                raise InvalidTypeError(f"{what} must be a sequence of str, got {got}")
        out: list[tuple[str, str]] = []
        for memory_id in memories:
            require_str(memory_id, "memory id")
            if not self._memory_exists(memory_id):
                raise MemoryNotFoundError(f"no memory {memory_id!r} to link the note to")
            out.append(("memory", memory_id))
        for ref in entities:
            require_str(ref, "entity")
            found = self._entity(ref)
            if found is None:
                raise InvalidInputError(
                    f"no entity {ref!r} to link the note to: add it with graph.add_entity()"
                )
            out.append(("entity", found.id))
        return out

    # --- reading ------------------------------------------------------------------------

    def get(self, note_id: str) -> Note | None:
        """The note (with its links), or ``None``."""
        self._require_open()
        require_str(note_id, "note_id")
        return self.notebook.get_note(note_id)

    def history(self, note_id: str) -> list[NoteVersion]:
        """Every version of a note, oldest first: what it held after each write, who
        wrote it, when, and which fields changed. Raises :class:`NoteNotFoundError` for
        a note that is not there (a deleted note has no history left)."""
        self._require_open()
        self._require(note_id)
        return self.notebook.note_versions(note_id)

    def list_notes(self, *, tag: str | None = None, limit: int | None = None) -> list[Note]:
        """Notes, most recently updated first (with ``tag``: those carrying it)."""
        self._require_open()
        require_str(tag, "tag", allow_none=True)
        require_int(limit, "limit", allow_none=True, minimum=0)
        return self.notebook.list_notes(tag, limit)

    def about(self, *, memory: str | None = None, entity: str | None = None) -> list[Note]:
        """The notes linked to a memory (its id) or an entity (its id or name)."""
        self._require_open()
        if (memory is None) == (entity is None):
            raise InvalidInputError("give memory= or entity=")
        if memory is not None:
            require_str(memory, "memory")
            ids = self.notebook.notes_linked_to("memory", memory)
        else:
            assert entity is not None
            require_str(entity, "entity")
            found = self._entity(entity)
            ids = [] if found is None else self.notebook.notes_linked_to("entity", found.id)
        notes = (self.notebook.get_note(i) for i in ids)
        return [n for n in notes if n is not None]

    def count(self) -> int:
        """How many notes this handle sees."""
        self._require_open()
        return self.notebook.note_count()

    list = list_notes  # memory.notes.list(tag=...): the name the issue asks for

"""Notes (``memory.notes``) and memories' content history, on a file, in memory and on
PostgreSQL: create, update (each edit a version: who, when, what changed), get,
history, list, delete (every version gone), links to memories and entities, recall's
note hits (their own kind, with their explanation), bad input refused with nothing
written, and an agent's handle seeing only its agent's notes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from persistence import (
    InvalidInputError,
    InvalidTypeError,
    MemoryNotFoundError,
    NoteNotFoundError,
    ReadOnlyError,
)
from tests.conftest import FakeClock
from tiered_memory import AgentMemoryManager
from tiered_memory.recall import NoteHit, RecallHit

Make = Callable[..., AgentMemoryManager]


def test_create_update_history_keep_every_version(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    note = memory.notes.create("Deploy checklist", "Run the migrations first",
                               tags=["ops", "deploy", "ops"], author="ana")  # fmt: skip
    assert (note.version, note.tags, note.created_by) == (1, ("ops", "deploy"), "ana")
    clock.advance(1000)
    edited = memory.notes.update(note.id, content="Run the migrations, then restart", author="bo")
    clock.advance(1000)
    retitled = memory.notes.update(note.id, title="Release checklist", tags=["ops"])
    assert (edited.version, retitled.version) == (2, 3)
    assert memory.notes.get(note.id) == retitled
    assert retitled.content == "Run the migrations, then restart"
    assert (retitled.updated_by, retitled.created_by) == (None, "ana")
    history = memory.notes.history(note.id)
    assert [(v.version, v.author, v.changed) for v in history] == [
        (1, "ana", ("title", "content", "tags")),
        (2, "bo", ("content",)),
        (3, None, ("title", "tags")),
    ]
    assert [v.at for v in history] == [note.created_at, note.created_at + 1000,
                                       note.created_at + 2000]  # fmt: skip
    assert history[0].content == "Run the migrations first"
    assert history[1].title == "Deploy checklist" and history[2].tags == ("ops",)
    # an edit that changes nothing writes no version
    assert memory.notes.update(note.id, title="Release checklist") == retitled
    assert len(memory.notes.history(note.id)) == 3


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_list_by_recency_and_tag_and_delete_forgets_every_version(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    first = memory.notes.create("one", "alpha", tags=["x"])
    clock.advance(10)
    second = memory.notes.create("two", "beta", tags=["y"])
    clock.advance(10)
    memory.notes.update(first.id, content="alpha edited")
    assert [n.id for n in memory.notes.list()] == [first.id, second.id]
    assert [n.id for n in memory.notes.list(tag="y")] == [second.id]
    assert [n.id for n in memory.notes.list(limit=1)] == [first.id]
    assert memory.notes.count() == 2
    assert memory.notes.delete(first.id) is True
    assert memory.notes.delete(first.id) is False
    assert memory.notes.get(first.id) is None
    with pytest.raises(NoteNotFoundError):
        memory.notes.history(first.id)
    assert memory.notes.notebook.note_versions(first.id) == []
    assert memory.recall("alpha edited", notes=True) == []
    assert [n.id for n in memory.notes.list()] == [second.id]


def test_links_to_memories_and_entities(memory: AgentMemoryManager) -> None:
    fact = memory.remember("Oslo office moves in May")
    memory.graph.add_entity("Oslo", "place")
    note = memory.notes.create("Move", "Book the van", memories=[fact.id], entities=["Oslo"])
    oslo = memory.graph.entity("Oslo")
    assert oslo is not None
    assert [(link.kind, link.target) for link in note.links] == [  # made together: by kind
        ("entity", oslo.id), ("memory", fact.id)
    ]  # fmt: skip
    assert [n.id for n in memory.notes.about(memory=fact.id)] == [note.id]
    assert [n.id for n in memory.notes.about(entity="Oslo")] == [note.id]
    other = memory.notes.create("Other", "nothing linked")
    assert memory.notes.link(other.id, memory=fact.id) is True
    assert memory.notes.link(other.id, memory=fact.id) is False
    assert sorted(n.id for n in memory.notes.about(memory=fact.id)) == sorted([note.id, other.id])
    assert memory.notes.unlink(other.id, memory=fact.id) is True
    assert memory.notes.get(other.id).links == ()  # type: ignore[union-attr]
    with pytest.raises(MemoryNotFoundError):
        memory.notes.link(other.id, memory="no-such-memory")
    assert memory.forget(fact.id)  # a forgotten memory's links no longer count
    assert memory.notes.about(memory=fact.id) == []
    assert [link.kind for link in memory.notes.get(note.id).links] == ["entity"]  # type: ignore[union-attr]
    with pytest.raises(InvalidInputError, match="no entity"):
        memory.notes.create("x", "y", entities=["Atlantis"])
    assert memory.notes.count() == 2  # the refused create wrote nothing


@pytest.mark.slow  # 1.3 s measured on a busy machine
def test_recall_finds_notes_as_their_own_kind(memory: AgentMemoryManager) -> None:
    memory.remember("The quarterly budget review is on Monday")
    note = memory.notes.create("Budget", "The quarterly budget needs sign-off from finance")
    plain = memory.recall("quarterly budget", k=5)
    assert plain and all(isinstance(h, RecallHit) and h.kind == "memory" for h in plain)
    mixed = memory.recall("quarterly budget", k=5, notes=True)
    notes = [h for h in mixed if isinstance(h, NoteHit)]
    assert [h.note.id for h in notes] == [note.id] and notes[0].kind == "note"
    assert "a note" in str(notes[0].explanation)
    assert notes[0].explanation.signals[0].signal == "keyword"
    # the memory hits are the same hits, with the same scores, as without notes
    memories = [h for h in mixed if isinstance(h, RecallHit)]
    assert [(h.memory.id, h.score) for h in memories] == [(h.memory.id, h.score) for h in plain]
    assert [h.score for h in mixed] == sorted((h.score for h in mixed), reverse=True)
    # filters that concern memories alone leave notes out; tags apply to notes' tags
    assert not any(isinstance(h, NoteHit) for h in memory.recall("budget", tier="episodic",
                                                                   notes=True))  # fmt: skip
    assert not any(isinstance(h, NoteHit) for h in memory.recall("budget", tags=["nope"],
                                                                   notes=True))  # fmt: skip


def test_bad_input_is_refused_and_changes_nothing(memory: AgentMemoryManager) -> None:
    note = memory.notes.create("kept", "as it is")
    for call, error in (
        (lambda: memory.notes.create("", "x"), InvalidInputError),
        (lambda: memory.notes.create("t" * 501, "x"), InvalidInputError),
        (lambda: memory.notes.create(3, "x"), InvalidTypeError),  # type: ignore[arg-type]
        (lambda: memory.notes.create("t", "x", tags="ops"), InvalidTypeError),
        (lambda: memory.notes.create("t", "x", tags=[""]), InvalidInputError),
        (lambda: memory.notes.update(note.id, title="  "), InvalidInputError),
        (lambda: memory.notes.update("missing", content="x"), NoteNotFoundError),
        (lambda: memory.notes.link(note.id), InvalidInputError),
        (lambda: memory.recall("kept", notes="yes"), InvalidTypeError),  # type: ignore[arg-type]
    ):
        with pytest.raises(error):
            call()
    assert memory.notes.count() == 1
    assert memory.notes.history(note.id)[-1].version == 1


def test_memory_content_history(memory: AgentMemoryManager, clock: FakeClock) -> None:
    fact = memory.remember("The meeting is on Tuesday")
    assert memory.history(fact.id) == []
    memory.update(fact.id, tags=["work"])  # no content change: no history
    assert memory.history(fact.id) == []
    clock.advance(500)
    memory.update(fact.id, content="The meeting is on Wednesday", author="ana")
    clock.advance(500)
    memory.update(fact.id, content="The meeting is on Thursday")
    history = memory.history(fact.id)
    assert [(v.version, v.content, v.author) for v in history] == [
        (1, "The meeting is on Tuesday", None),
        (2, "The meeting is on Wednesday", "ana"),
        (3, "The meeting is on Thursday", None),
    ]
    assert history[0].at == fact.created_at and history[2].at == fact.created_at + 1000
    assert memory.forget(fact.id)
    assert memory.history(fact.id) == []
    assert memory.notes.notebook.memory_versions(fact.id) == []


# SQLite only: read_only opens an existing file
def test_read_only_handle_reads_notes_and_writes_none(db_path: Path) -> None:
    with AgentMemoryManager.open(db_path, embedder=None) as memory:
        note = memory.notes.create("kept", "text")
    with AgentMemoryManager.open(db_path, read_only=True, embedder=None) as memory:
        assert memory.notes.get(note.id) == note
        with pytest.raises(ReadOnlyError):
            memory.notes.update(note.id, content="changed")
        with pytest.raises(ReadOnlyError):
            memory.notes.delete(note.id)


def test_the_domain_calls_only_what_the_note_protocol_lists() -> None:
    """The domain holds the notes' storage as ``notebook`` and calls only what
    :class:`~persistence.NoteStorage` lists (as for the memory and graph Protocols)."""
    from persistence import NoteStorage
    from tests.storage.test_storage_protocol import _domain_modules, _members, _store_attributes

    allowed = set(_members(NoteStorage))
    used = {
        (path.name, name)
        for path in _domain_modules()
        for name in _store_attributes(path.read_text(), {"notebook", "_notebook"})
    }
    assert {name for _, name in used} >= {"save_note", "search_notes", "memory_versions"}
    assert {f"{module}: {name}" for module, name in used if name not in allowed} == set()


def test_every_backend_s_notes_keep_the_protocol(memory: AgentMemoryManager) -> None:
    from persistence import NoteStorage
    from tests.storage.test_storage_protocol import _signature_problems

    notebook = memory.notes.notebook
    assert isinstance(notebook, NoteStorage)
    assert _signature_problems(NoteStorage, notebook, type(notebook)) == []


def test_the_async_manager_exposes_notes_and_history(tmp_path: Path) -> None:
    import asyncio

    from tiered_memory import AsyncAgentMemoryManager

    async def main() -> None:
        async with await AsyncAgentMemoryManager.open(tmp_path / "a.db", embedder=None) as memory:
            note = await memory.notes.create("Async", "written from a coroutine", author="ana")
            await memory.notes.update(note.id, content="edited from a coroutine")
            assert [v.version for v in await memory.notes.history(note.id)] == [1, 2]
            assert [n.id for n in await memory.notes.list()] == [note.id]
            hits = await memory.recall("coroutine", notes=True)
            assert [h.kind for h in hits] == ["note"]
            fact = await memory.remember("first words")
            await memory.update(fact.id, content="second words")
            assert [v.content for v in await memory.history(fact.id)] == [
                "first words", "second words"
            ]  # fmt: skip
            assert await memory.notes.delete(note.id) and await memory.notes.count() == 0

    asyncio.run(main())

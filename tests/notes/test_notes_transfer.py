"""Notes in JSON exports, imports and copies, losslessly: every note with every version
and link, and memories' content history, from a file to JSON and back, from a file to a
server and back (``copy_memory``), merged, scoped to an agent; a broken note table in a
document is refused with nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from persistence import InvalidImportError, SecretsFoundError
from tests.conftest import FakeClock
from tiered_memory import AgentMemoryManager
from tiered_memory.copying import copy_memory

NOTE_TABLES = ("notes", "note_versions", "note_links", "memory_versions")


def _open(location: Path | str, clock: FakeClock, **config: Any) -> AgentMemoryManager:
    return AgentMemoryManager.open(location, clock=clock, embedder=None,
                                   embed_in_background=False, **config)  # fmt: skip


def _exported(location: Path | str, tmp_path: Path, clock: FakeClock) -> dict[str, Any]:
    out = tmp_path / f"export-{len(list(tmp_path.iterdir()))}.json"
    with _open(location, clock, read_only=True) as memory:
        memory.export_json(out)
    doc: dict[str, Any] = orjson.loads(out.read_bytes())
    doc.pop("exported_at")
    return doc


def _fill(memory: AgentMemoryManager, clock: FakeClock) -> dict[str, str]:
    """Two notes (one edited twice, linked to a memory and an entity), a deleted note,
    and a memory whose content changed."""
    fact = memory.remember("Lisbon office opens in June", relations=[("Ana", "works_in", "Lisbon")])
    memory.update(fact.id, content="Lisbon office opens in July", author="ana")
    note = memory.notes.create("Lisbon", "Find a flat", tags=["move"], author="ana",
                               memories=[fact.id], entities=["Ana"])  # fmt: skip
    clock.advance(1000)
    memory.notes.update(note.id, content="Find a flat near the office", author="bo")
    clock.advance(1000)
    memory.notes.update(note.id, tags=["move", "home"])
    other = memory.notes.create("Groceries", "milk, bread")
    gone = memory.notes.create("Secret plan", "surprise party for Ana")
    memory.notes.delete(gone.id)
    return {"fact": fact.id, "note": note.id, "other": other.id}


def test_export_import_round_trip_keeps_every_version_and_link(
    tmp_path: Path, clock: FakeClock
) -> None:
    with _open(tmp_path / "a.db", clock) as memory:
        made = _fill(memory, clock)
        history = memory.notes.history(made["note"])
        note = memory.notes.get(made["note"])
        memory_history = memory.history(made["fact"])
        out = memory.export_json(tmp_path / "a.json")
    doc = orjson.loads(out.read_bytes())
    tables = doc["tables"]
    assert [len(tables[t]) for t in NOTE_TABLES] == [2, 4, 2, 2]
    assert b"surprise party" not in out.read_bytes()  # the deleted note left nothing
    with _open(tmp_path / "b.db", clock) as copy:
        result = copy.import_json(out)
        assert result.tables["note_versions"].inserted == 4
        assert copy.notes.get(made["note"]) == note
        assert copy.notes.history(made["note"]) == history
        assert copy.history(made["fact"]) == memory_history
        assert [h.note.id for h in copy.recall("flat office", notes=True) if h.kind == "note"] == [
            made["note"]
        ]
    one = _exported(tmp_path / "a.db", tmp_path, clock)
    assert _exported(tmp_path / "b.db", tmp_path, clock) == one


@pytest.mark.slow  # 1.4 s measured on a busy machine
def test_copy_to_any_location_and_back_keeps_the_notes(
    any_location: str, tmp_path: Path, clock: FakeClock
) -> None:
    with _open(tmp_path / "a.db", clock) as memory:
        made = _fill(memory, clock)
    there = copy_memory(tmp_path / "a.db", any_location)
    back = copy_memory(any_location, tmp_path / "back.db")
    one = _exported(tmp_path / "a.db", tmp_path, clock)
    assert _exported(any_location, tmp_path, clock) == one
    assert _exported(tmp_path / "back.db", tmp_path, clock) == one
    assert there.tables["notes"] == back.tables["notes"] == 2
    with _open(any_location, clock) as copy:
        assert len(copy.notes.history(made["note"])) == 3
        assert [n.id for n in copy.notes.about(memory=made["fact"])] == [made["note"]]
        edited = copy.notes.update(made["other"], content="milk, bread, eggs", author="cy")
        assert edited.version == 2  # the copy goes on counting where the source stopped


def test_merge_replaces_a_note_with_the_documents(tmp_path: Path, clock: FakeClock) -> None:
    with _open(tmp_path / "a.db", clock) as memory:
        made = _fill(memory, clock)
        out = memory.export_json(tmp_path / "a.json")
        memory.notes.update(made["note"], content="changed after the export")
        mine = memory.notes.create("Only here", "kept by a merge")
        memory.import_json(out, mode="merge")
        assert memory.notes.get(made["note"]).content == "Find a flat near the office"  # type: ignore[union-attr]
        assert len(memory.notes.history(made["note"])) == 3
        search = memory.notes.notebook.search_notes  # the note's keywords are the document's
        assert search(["changed"], 10) == []
        assert [found for found, _ in search(["flat"], 10)] == [made["note"]]
        assert memory.notes.get(mine.id) is not None
        memory.import_json(out)  # replace: exactly the document's notes
        assert memory.notes.get(mine.id) is None
        assert memory.notes.count() == 2


@pytest.mark.parametrize(
    ("table", "row", "problem"),
    [
        ("note_versions", {"note_id": "nope"}, "names note"),
        ("note_links", {"kind": "session"}, "must be one of"),
        ("notes", {"tags": "move"}, "list of non-empty strings"),
        ("memory_versions", {"memory_id": "nope"}, "names memory"),
    ],
)
def test_a_broken_note_table_is_refused_and_nothing_changes(
    tmp_path: Path, clock: FakeClock, table: str, row: dict[str, Any], problem: str
) -> None:
    with _open(tmp_path / "a.db", clock) as memory:
        _fill(memory, clock)
        out = memory.export_json(tmp_path / "a.json")
    doc = orjson.loads(out.read_bytes())
    doc["tables"][table][0].update(row)
    bad = tmp_path / "bad.json"
    bad.write_bytes(orjson.dumps(doc))
    with _open(tmp_path / "b.db", clock) as other:
        kept = other.notes.create("kept", "as it was")
        with pytest.raises(InvalidImportError, match=problem):
            other.import_json(bad)
        del doc["tables"]["note_links"]
        bad.write_bytes(orjson.dumps(doc))
        with pytest.raises(InvalidImportError, match="part of the notes"):
            other.import_json(bad)
        assert other.notes.list() == [kept] and other.query() == []


def test_an_export_without_notes_imports_as_before(tmp_path: Path, clock: FakeClock) -> None:
    with _open(tmp_path / "a.db", clock) as memory:
        memory.remember("just a memory")
        out = memory.export_json(tmp_path / "a.json")
    doc = orjson.loads(out.read_bytes())
    for table in NOTE_TABLES:
        del doc["tables"][table]
    old = tmp_path / "old.json"
    old.write_bytes(orjson.dumps(doc))
    with _open(tmp_path / "b.db", clock) as other:
        other.notes.create("mine", "text")
        other.import_json(old)
        assert other.notes.count() == 0  # replace: the store holds exactly the document
        assert [m.content for m in other.query()] == ["just a memory"]


def test_an_import_redacts_secrets_in_notes_or_refuses_them(
    tmp_path: Path, clock: FakeClock
) -> None:
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    with _open(tmp_path / "a.db", clock, redactor=None) as memory:
        note = memory.notes.create("Deploy", f"the token is {token}")
        out = memory.export_json(tmp_path / "a.json")
    assert token.encode() in out.read_bytes()  # written without a redactor
    with _open(tmp_path / "b.db", clock) as other:
        with pytest.raises(SecretsFoundError, match=r"tables\.notes\[0\]"):
            other.import_json(out, refuse_secrets=True)
        assert other.notes.count() == 0
        other.import_json(out)
        kept = other.notes.get(note.id)
        assert kept is not None and token not in kept.content
        assert all(token not in v.content for v in other.notes.history(note.id))

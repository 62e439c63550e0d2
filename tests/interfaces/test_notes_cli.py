"""``tiered-memory notes ...``: add, edit (text from stdin), list, show, history, link,
unlink and delete through the command line; reading commands leave the file's bytes as
they were; a missing note exits 1 with one line on stderr."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from tests.engines.sqlite.test_read_only import fingerprint as file_digest
from tiered_memory import AgentMemoryManager
from tiered_memory.cli import main


def _run(*args: str, input: str | None = None) -> tuple[int, str, str]:  # noqa: A002
    result = CliRunner().invoke(main, list(args), input=input)
    return result.exit_code, result.stdout, result.stderr


def test_notes_commands_write_read_and_delete(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    with AgentMemoryManager.open(db, embedder=None) as memory:
        fact = memory.remember("The Lisbon office opens in June")
    code, out, _ = _run("notes", "add", str(db), "Lisbon move", "--content", "Find a flat",
                        "--tag", "move", "--author", "ana", "--memory", fact.id)  # fmt: skip
    assert code == 0
    note_id = out.strip()
    code, out, _ = _run("notes", "edit", str(db), note_id, "--content", "-", "--author", "bo",
                        input="Find a flat near the river")  # fmt: skip
    assert code == 0 and "v2 by bo" in out
    before = file_digest(db)
    code, out, _ = _run("notes", "list", str(db), "--tag", "move", "--json")
    [listed] = orjson.loads(out)
    assert (listed["id"], listed["version"], listed["tags"]) == (note_id, 2, ["move"])
    assert listed["links"] == [{"kind": "memory", "target": fact.id}]
    code, out, _ = _run("notes", "history", str(db), note_id, "--json")
    assert [(v["version"], v["author"], v["changed"]) for v in orjson.loads(out)] == [
        (1, "ana", ["title", "content", "tags"]), (2, "bo", ["content"])
    ]  # fmt: skip
    code, out, _ = _run("notes", "show", str(db), note_id)
    assert code == 0 and "Find a flat near the river" in out and f"memory {fact.id}" in out
    assert file_digest(db) == before  # reading commands write nothing
    assert _run("notes", "unlink", str(db), note_id, "--memory", fact.id)[1].strip() == "unlinked"
    assert _run("notes", "link", str(db), note_id, "--memory", fact.id)[1].strip() == "linked"
    assert _run("notes", "delete", str(db), note_id)[0] == 0
    code, _, err = _run("notes", "show", str(db), note_id)
    assert code == 1 and err.startswith("error: no note")
    code, _, err = _run("notes", "history", str(db), note_id)
    assert code == 1 and "no note" in err
    with AgentMemoryManager.open(db, embedder=None, read_only=True) as memory:
        assert memory.notes.count() == 0


def test_bad_note_input_exits_1_and_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    with AgentMemoryManager.open(db, embedder=None):
        pass
    code, _, err = _run("notes", "add", str(db), "  ")
    assert code == 1 and "title must not be empty" in err
    code, _, err = _run("notes", "add", str(db), "t", "--memory", "no-such-memory")
    assert code == 1 and "no memory" in err
    with AgentMemoryManager.open(db, embedder=None, read_only=True) as memory:
        assert memory.notes.count() == 0


def test_search_with_notes_shows_notes_as_their_own_kind_of_hit(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    with AgentMemoryManager.open(db, embedder=None) as memory:
        fact = memory.remember("The Lisbon office opens in June")
        note = memory.notes.create("Flat hunting", "Find a flat in Lisbon near the river")
    before = file_digest(db)
    code, out, _ = _run("search", str(db), "flat Lisbon river", "--notes", "--keywords-only",
                        "--json")  # fmt: skip
    assert code == 0
    hits = orjson.loads(out)
    with AgentMemoryManager.open(db, embedder=None, read_only=True) as memory:
        same = memory.recall("flat Lisbon river", notes=True)
    assert [h["kind"] for h in hits] == [h.kind for h in same]
    # (recency moves with the clock between the two calls)
    assert [h["score"] for h in hits] == pytest.approx([h.score for h in same], rel=1e-6)
    assert sorted(h["kind"] for h in hits) == ["memory", "note"]
    [found] = [h for h in hits if h["kind"] == "note"]
    assert found["note"]["id"] == note.id and found["note"]["title"] == "Flat hunting"
    assert "written on purpose" in found["explanation"]
    assert [h["memory"]["id"] for h in hits if h["kind"] == "memory"] == [fact.id]
    code, out, _ = _run("search", str(db), "flat Lisbon river", "--notes", "--keywords-only")
    assert code == 0 and f"{note.id}  [note]  Flat hunting" in out
    code, out, _ = _run("search", str(db), "flat Lisbon river", "--keywords-only", "--json")
    assert [h["kind"] for h in orjson.loads(out)] == ["memory"]  # without --notes: memories
    assert file_digest(db) == before  # searching writes nothing

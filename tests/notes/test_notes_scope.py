"""Notes under agent-scoped handles, on a file and on PostgreSQL (row-level security):
each agent's handle sees, finds, edits and exports only its agent's notes; the
operator's handle sees every note. Deleting a note leaves none of its text in the file."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from migrations.postgres.v009_notes import SCOPED_TABLES
from persistence import NoteNotFoundError
from tests.support.backends import open_as

SECRET = {"a": "harbour cipher alpha", "b": "harbour cipher bravo"}


def test_an_agent_sees_only_its_notes(any_location: str, tmp_path: Path) -> None:
    ids = {}
    for agent in ("a", "b"):
        with open_as(any_location, agent) as memory:
            note = memory.notes.create(f"plan {agent}", SECRET[agent], tags=["harbour"])
            memory.notes.update(note.id, title=f"plan {agent} v2", author=agent)
            ids[agent] = note.id
            assert note.agent_id == agent
    with open_as(any_location, "a") as memory:
        assert [n.id for n in memory.notes.list()] == [ids["a"]]
        assert memory.notes.get(ids["b"]) is None
        assert memory.notes.count() == 1
        with pytest.raises(NoteNotFoundError):
            memory.notes.history(ids["b"])
        with pytest.raises(NoteNotFoundError):
            memory.notes.update(ids["b"], content="overwritten by a")
        assert memory.notes.delete(ids["b"]) is False
        hits = memory.recall("harbour cipher", notes=True)
        assert [h.note.id for h in hits if h.kind == "note"] == [ids["a"]]  # type: ignore[union-attr]
        out = memory.export_json(tmp_path / "a.json")
    text = out.read_bytes()
    assert SECRET["a"].encode() in text and SECRET["b"].encode() not in text
    assert [n["id"] for n in orjson.loads(text)["tables"]["notes"]] == [ids["a"]]
    with open_as(any_location, None) as operator:
        assert {n.id for n in operator.notes.list()} == {ids["a"], ids["b"]}
        b_note = operator.notes.get(ids["b"])
        assert b_note is not None and b_note.content == SECRET["b"]
        assert len(operator.notes.history(ids["b"])) == 2


@pytest.mark.postgres
def test_note_tables_are_under_row_level_security(pg_server: object, pg_url: str) -> None:
    """Every note table has a scope column and a forced policy, as the other tables of
    agent data (migration v4)."""
    with open_as(pg_url, None):
        pass
    import psycopg

    with psycopg.connect(pg_url) as conn:
        for table in SCOPED_TABLES:
            forced = conn.execute(
                "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE relname = %s",
                (table,),
            ).fetchone()
            assert forced == (True, True), table
            column = conn.execute(
                "SELECT 1 FROM information_schema.columns WHERE table_name = %s "
                "AND column_name = 'scope'",
                (table,),
            ).fetchone()
            assert column is not None, table


def test_deleting_a_note_leaves_none_of_its_text_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    secret = "zanzibar-quokka-7731"
    with open_as(str(path), None) as memory:
        kept = memory.notes.create("kept", "an ordinary note")
        note = memory.notes.create(f"title {secret}", f"first {secret}", tags=[secret])
        for n in range(3):
            memory.notes.update(note.id, content=f"edit {n} {secret} " + "x" * 2000)
        memory.maintain()  # the WAL into the file
        assert secret.encode() in path.read_bytes()  # it was there
        assert memory.notes.delete(note.id)
        memory.maintain()  # the WAL into the file
    raw = path.read_bytes()
    wal = path.with_name(path.name + "-wal")
    assert secret.encode() not in raw
    assert not wal.exists() or secret.encode() not in wal.read_bytes()
    with open_as(str(path), None) as memory:
        assert memory.notes.list() == [kept]
        assert memory.recall("zanzibar quokka", notes=True) == []


def test_a_memory_s_history_is_in_its_agent_s_scope(any_location: str) -> None:
    """The operator edits a memory it wrote for agent a: a's handle reads the history,
    b's reads none; moving the memory to b (an import would) moves its history too."""
    with open_as(any_location, None) as operator:
        fact = operator.remember("the harbour opens at six", agent_id="a")
        operator.update(fact.id, content="the harbour opens at seven", author="operator")
    with open_as(any_location, "a") as memory:
        assert [v.content for v in memory.history(fact.id)] == [
            "the harbour opens at six", "the harbour opens at seven"
        ]  # fmt: skip
    with open_as(any_location, "b") as memory:
        assert memory.history(fact.id) == []
    if not any_location.startswith("postgresql"):
        return
    import psycopg

    with psycopg.connect(any_location) as conn:  # the owner: tm.scope unset, sees all
        conn.execute("UPDATE tm_memories SET agent_id = 'b' WHERE id = %s", (fact.id,))
    with open_as(any_location, "b") as memory:
        assert len(memory.history(fact.id)) == 2

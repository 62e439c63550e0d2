"""A damaged page can leave NULL in a NOT NULL column, or a value of another type; the
row decoders report it as :class:`CorruptDatabaseError` naming the table and column, and
the call changes nothing (found by ``benchmarks/fuzz.py --seed 41``: promote, decay() and
forget raised ``TypeError`` from the domain's arithmetic and sorting)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest

from persistence import CorruptDatabaseError
from tests.support import data_checks
from tiered_memory import AgentMemoryManager, Tier

NO_MODEL: dict[str, Any] = {"embedder": None}


def _damage(path: Path, table: str, column: str, value: object, where: str = "1") -> None:
    """Write ``value`` into ``table.column`` with raw SQL, as a damaged record would hold
    it: a NOT NULL constraint is lifted for the write (``writable_schema``) and put back,
    so the file's schema is as before and only the value is wrong."""
    conn = apsw.Connection(str(path))
    sql = str(conn.execute("SELECT sql FROM sqlite_schema WHERE name = ?", (table,)).get)
    loose = re.sub(rf"(\b{column}\s+[A-Z]+)\s+NOT NULL", r"\1", sql)
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("UPDATE sqlite_schema SET sql = ? WHERE name = ?", (loose, table))
    conn.close()
    conn = apsw.Connection(str(path))
    conn.execute(f"UPDATE {table} SET {column} = ? WHERE {where}", (value,))
    assert conn.changes() > 0
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("UPDATE sqlite_schema SET sql = ? WHERE name = ?", (sql, table))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def _value(path: Path, sql: str, *params: object) -> Any:
    conn = apsw.Connection(str(path))
    try:
        return conn.execute(sql, params).get
    finally:
        conn.close()


def _refused(path: Path, call: Callable[[AgentMemoryManager], object], names: str) -> None:
    """``call`` raises CorruptDatabaseError naming ``names`` and leaves every row as it was."""
    before = data_checks.data_checksum(path, fts_segments=False)
    with (
        AgentMemoryManager.open(path, **NO_MODEL) as memory,
        pytest.raises(CorruptDatabaseError, match=re.escape(names)) as raised,
    ):
        call(memory)
    assert "damaged" in str(raised.value) and "tiered-memory salvage" in str(raised.value)
    assert data_checks.data_checksum(path, fts_segments=False) == before


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, list[str]]:
    path = tmp_path / "damaged.db"
    with AgentMemoryManager.open(path, **NO_MODEL) as memory:
        session = memory.start_session(session_id="s1")
        ids = [
            memory.remember(f"Alice met Bob in Paris, note {k}", "episodic",
                            session_id=session.session_id, tags=("t",),
                            relations=[("Alice", "met", "Bob")]).id
            for k in range(3)
        ]  # fmt: skip
        memory.review(ids[0], 4)
        memory.append_transcript(session.session_id, "user", "hello")
        memory.promote(ids[1], Tier.SEMANTIC)
        memory.forget(ids[2])
        memory.maintain()
    return path, ids


def test_promote_with_a_null_created_at(store: tuple[Path, list[str]]) -> None:
    path, ids = store
    _damage(path, "episodic", "created_at", None)
    _refused(path, lambda m: m.promote(ids[0], Tier.SEMANTIC), "episodic.created_at found NULL")
    _refused(path, lambda m: m.get(ids[0]), "episodic.created_at")
    _refused(path, lambda m: m.query(Tier.EPISODIC, limit=None), "episodic.created_at")


def test_a_value_of_another_type_in_a_memory(store: tuple[Path, list[str]]) -> None:
    path, ids = store
    _damage(path, "semantic", "importance", "high")
    _refused(path, lambda m: m.get(ids[1]), "semantic.importance found TEXT")


def test_decay_with_a_null_created_at(store: tuple[Path, list[str]]) -> None:
    path, _ = store
    _damage(path, "episodic", "created_at", None, "id IN (SELECT id FROM episodic LIMIT 1)")
    _refused(path, lambda m: m.decay(), "episodic.created_at found NULL")


def test_decay_with_a_schedule_time_of_another_type(store: tuple[Path, list[str]]) -> None:
    path, ids = store
    _damage(path, "repetition_schedules", "last_reviewed_at", "yesterday", "memory_id IS NOT NULL")
    _refused(path, lambda m: m.decay(), "repetition_schedules.last_reviewed_at found TEXT")


def test_a_schedule_with_a_null_review_time(store: tuple[Path, list[str]]) -> None:
    path, ids = store
    _damage(path, "repetition_schedules", "next_review_at", None)
    _refused(path, lambda m: m.review(ids[0], 3), "repetition_schedules.next_review_at")


def test_forget_with_damaged_graph_provenance(store: tuple[Path, list[str]]) -> None:
    """The forget's commit collects the graph's garbage: an entity id that is not text
    (a WITHOUT ROWID key cannot be NULL; a blob is as wrong) made ``sorted`` fail."""
    path, ids = store
    assert _value(path, "SELECT count(*) FROM memory_entities WHERE memory_id = ?", ids[0]) > 0
    one = f"memory_id = '{ids[0]}' AND entity_id = (SELECT min(entity_id) FROM memory_entities)"
    _damage(path, "memory_entities", "entity_id", b"\x07", one)
    _refused(path, lambda m: m.forget(ids[0]), "memory_entities.entity_id found BLOB")


def test_damaged_graph_rows_on_read(store: tuple[Path, list[str]]) -> None:
    path, ids = store
    _damage(path, "entities", "created_at", None)
    _refused(path, lambda m: m.graph.entities(), "entities.created_at found NULL")
    _refused(path, lambda m: m.graph.facts_of(ids[0]), "entities.created_at")


def test_a_damaged_relation(store: tuple[Path, list[str]]) -> None:
    path, ids = store
    assert _value(path, "SELECT count(*) FROM relations") > 0
    subject = str(_value(path, "SELECT subject_id FROM relations LIMIT 1"))
    _damage(path, "relations", "weight", "heavy")
    _refused(path, lambda m: m.graph.neighbors(subject), "relations.weight found TEXT")


def test_a_session_with_a_null_time(store: tuple[Path, list[str]]) -> None:
    path, _ = store
    _damage(path, "sessions", "started_at", None)
    _refused(path, lambda m: m.get_session("s1"), "sessions.started_at found NULL")
    _refused(path, lambda m: m.active_sessions(), "sessions.started_at found NULL")


def test_a_transcript_line_with_a_null_time(store: tuple[Path, list[str]]) -> None:
    path, _ = store
    _damage(path, "session_transcripts", "timestamp", None)
    _refused(path, lambda m: m.get_transcript("s1"), "session_transcripts.timestamp found NULL")


def test_the_audit_logs_with_a_tier_that_is_none(store: tuple[Path, list[str]]) -> None:
    """``Tier(value)`` raised ValueError for a damaged tier name."""
    path, ids = store
    _damage(path, "promotion_log", "to_tier", "nowhere")
    _damage(path, "forgetting_log", "tier", None)
    _refused(path, lambda m: m.promotion_history(ids[1]), "promotion_log.to_tier found 'nowhere'")
    _refused(path, lambda m: m.forgetting_log(), "forgetting_log.tier found NULL")


def test_a_note_with_a_null_version(store: tuple[Path, list[str]]) -> None:
    path, _ = store
    with AgentMemoryManager.open(path, **NO_MODEL) as memory:
        note = memory.notes.create("Plan", "the plan", tags=("a",))
        memory.notes.update(note.id, content="the plan, revised")
    _damage(path, "note_versions", "at", "noon")
    _refused(path, lambda m: m.notes.history(note.id), "note_versions.at found TEXT")
    _damage(path, "notes", "version", None)
    _refused(path, lambda m: m.notes.get(note.id), "notes.version found NULL")
    _refused(path, lambda m: m.notes.list_notes(), "notes.version")

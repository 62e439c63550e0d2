"""Versioned migrations: the v001 schema, the runner's transactions, and refusing newer files."""

from __future__ import annotations

import types
from pathlib import Path

import apsw
import pytest

import migrations
from migrations import v001_initial
from persistence import Memory, MigrationError, SchemaTooNewError, Tier
from persistence.sqlite import SQLiteStore
from persistence.sqlite.connection import ConnectionOptions, connect
from tests.conftest import file_digest, old_schema_store

REFERENCE_TABLES = {
    "schema_version", "scratchpad", "episodic", "semantic", "repetition_schedules",
    "sessions", "session_transcripts", "promotion_log",
}  # fmt: skip
REFERENCE_INDEXES = {
    "idx_scratchpad_key", "idx_scratchpad_updated", "idx_episodic_session",
    "idx_episodic_created", "idx_episodic_updated", "idx_semantic_category",
    "idx_semantic_created", "idx_semantic_updated", "idx_sessions_active",
    "idx_sessions_last_active", "idx_transcripts_session", "idx_transcripts_timestamp",
    "idx_promotion_memory", "idx_promotion_time", "idx_repetition_review",
}  # fmt: skip


def _names(conn: apsw.Connection, kind: str) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_schema WHERE type = ?", (kind,)).fetchall()
    return {r[0] for r in rows}


def _fill(store: SQLiteStore, n: int) -> list[Memory]:
    stored = []
    with store.transaction():
        for i in range(n):
            tier = (Tier.EPISODIC, Tier.SEMANTIC)[i % 2]
            memory = Memory.create(f"memory {i}", tier, tags=(f"t{i % 3}",), embedding=[i, 1.0])
            put = store.put_episodic if tier is Tier.EPISODIC else store.put_semantic
            stored.append(put(memory))
    return stored


NEXT = migrations.LATEST_VERSION + 1


def _next(up: object) -> types.SimpleNamespace:
    """A test-only migration one version past the shipped ones."""
    return types.SimpleNamespace(VERSION=NEXT, DESCRIPTION="test-only next version", up=up)


def test_v001_creates_every_reference_table_and_index(file_store: SQLiteStore) -> None:
    with file_store.transaction() as conn:
        assert _names(conn, "table") >= REFERENCE_TABLES
        assert _names(conn, "index") >= REFERENCE_INDEXES
        columns = {r[1]: r[2] for r in conn.execute("PRAGMA table_info(episodic)").fetchall()}
        assert columns["embedding"] == "BLOB"
        rows = conn.execute("SELECT version, description FROM schema_version").fetchall()
        assert rows[0] == (1, v001_initial.DESCRIPTION)
        assert [r[0] for r in rows] == list(range(1, migrations.LATEST_VERSION + 1))


def test_shipped_migrations_are_contiguous_and_latest_matches() -> None:
    shipped = migrations.available_migrations()
    assert [m.VERSION for m in shipped] == list(range(1, len(shipped) + 1))
    assert migrations.LATEST_VERSION == shipped[-1].VERSION


def test_reopening_applies_nothing_twice(db_path: Path) -> None:
    SQLiteStore(db_path).open().close()
    conn = connect(str(db_path), ConnectionOptions())
    assert migrations.apply_migrations(conn) == []
    count = conn.execute("SELECT count(*) FROM schema_version").fetchone()[0]
    assert count == migrations.LATEST_VERSION
    conn.close()


def test_full_file_upgraded_by_a_new_migration_keeps_every_row(db_path: Path) -> None:
    with SQLiteStore(db_path) as store:
        before = _fill(store, 300)

    def up(conn: apsw.Connection) -> None:
        conn.execute("ALTER TABLE episodic ADD COLUMN mood TEXT")
        conn.execute("CREATE TABLE future_table (id INTEGER PRIMARY KEY, body TEXT)")

    shipped = migrations.available_migrations()
    with SQLiteStore(db_path, migrations=[*shipped, _next(up)]) as store:
        assert store.schema_version == NEXT
        for memory in before:
            again = store.get_memory(memory.id)
            assert again == memory
            assert again is not None and again.embedding is not None
            assert list(again.embedding) == list(memory.embedding)  # type: ignore[arg-type]
        with store.transaction() as conn:
            assert "mood" in {r[1] for r in conn.execute("PRAGMA table_info(episodic)")}


def test_failing_migration_leaves_the_file_at_its_old_version(db_path: Path) -> None:
    with SQLiteStore(db_path) as store:
        before = _fill(store, 50)

    def up(conn: apsw.Connection) -> None:
        conn.execute("CREATE TABLE half_done (x)")
        conn.execute("DELETE FROM episodic")
        raise RuntimeError("disk on fire")

    shipped = migrations.available_migrations()
    with pytest.raises(MigrationError, match="disk on fire"):
        SQLiteStore(db_path, migrations=[*shipped, _next(up)]).open()

    with SQLiteStore(db_path) as store:
        assert store.schema_version == migrations.LATEST_VERSION
        assert [store.get_memory(m.id) for m in before] == before
        with store.transaction() as conn:
            assert "half_done" not in _names(conn, "table")


def test_newer_schema_is_refused_and_untouched(db_path: Path) -> None:
    shipped = migrations.available_migrations()
    with SQLiteStore(db_path, migrations=[*shipped, _next(lambda conn: None)]) as store:
        _fill(store, 10)
    before = file_digest(db_path)
    with pytest.raises(SchemaTooNewError, match=f"schema version {NEXT}") as caught:
        SQLiteStore(db_path).open()
    assert caught.value.found == NEXT and caught.value.supported == migrations.LATEST_VERSION
    assert file_digest(db_path) == before


def test_a_v1_file_with_rows_is_migrated_to_latest_without_loss(db_path: Path) -> None:
    with old_schema_store(db_path, 1) as store:
        assert store.schema_version == 1
        before = _fill(store, 100)
    with SQLiteStore(db_path) as store:
        assert store.schema_version == migrations.LATEST_VERSION
        assert [store.get_memory(m.id) for m in before] == before


def test_runner_refuses_too_new_before_writing(db_path: Path) -> None:
    SQLiteStore(db_path).open().close()
    conn = connect(str(db_path), ConnectionOptions())
    conn.execute("INSERT INTO schema_version VALUES (99, 0, 'future')")
    with pytest.raises(migrations.SchemaTooNew):
        migrations.apply_migrations(conn)
    conn.close()


def test_a_v7_file_is_migrated_to_v8_with_the_same_keyword_index(db_path: Path) -> None:
    from persistence import SessionState
    from tests.engines.sqlite.test_keyword_context import rebuilt_scores_and_size, scores_and_size

    words = [f"w{i}" for i in range(12)] + ["memory"]
    with old_schema_store(db_path, 7) as old:
        for name in ("a", "b", "c"):
            old.put_session(SessionState(name, started_at=1, last_active_at=1))
        before = [
            old.put_episodic(Memory.create(f"memory w{i}", session_id="abc"[i % 3]))
            for i in range(12)
        ]
        old.forget_memory(before[4].id, reason="test")
        scores = scores_and_size(old, words)
    with SQLiteStore(db_path) as store:
        assert store.schema_version == migrations.LATEST_VERSION
        assert [store.get_memory(m.id) for m in before if m is not before[4]] == [
            m for m in before if m is not before[4]
        ]
        assert scores_and_size(store, words) == scores
        store.put_episodic(Memory.create("memory w12", session_id="a"))
        words.append("w12")
        assert scores_and_size(store, words) == rebuilt_scores_and_size(store, words)


def test_rows_written_without_the_store_are_indexed_when_it_opens(db_path: Path) -> None:
    from tests.engines.sqlite.test_keyword_context import rebuilt_scores_and_size, scores_and_size

    with SQLiteStore(db_path) as store:
        store.put_episodic(Memory.create("first words"))
    conn = connect(str(db_path), ConnectionOptions())
    conn.execute(
        "INSERT INTO episodic (id, content, created_at, updated_at) "
        "VALUES ('raw', 'second words', 1, 1)"
    )  # committed with its keyword row still waiting in keyword_dirty
    assert conn.execute("SELECT count(*) FROM keyword_dirty").fetchone() == (1,)
    conn.close()
    with SQLiteStore(db_path) as store:
        assert [m for m, _ in store.keyword_search(["second"], 5)] == ["raw"]
        words = ["first", "second", "words"]
        assert scores_and_size(store, words) == rebuilt_scores_and_size(store, words)
    conn = connect(str(db_path), ConnectionOptions())
    assert conn.execute("SELECT count(*) FROM keyword_dirty").fetchone() == (0,)
    conn.close()


def test_a_v8_file_gains_speakers_and_keeps_every_row(db_path: Path) -> None:
    """Version 9 adds ``speaker`` to memories and transcript lines: rows written before
    read ``None``, and new ones keep their speaker through the store and a reopen."""
    from persistence import SessionState

    with old_schema_store(db_path, 8) as old:
        old.put_session(SessionState("s", started_at=1, last_active_at=1))
        before = _fill(old, 6)
        line = old.append_transcript("s", 1, "user", "hello")
    with SQLiteStore(db_path) as store:
        assert 9 <= store.schema_version == migrations.LATEST_VERSION
        assert [store.get_memory(m.id) for m in before] == before
        assert all(store.get_memory(m.id).speaker is None for m in before)  # type: ignore[union-attr]
        assert store.get_transcripts("s") == [line] and line.speaker is None
        said = store.put_episodic(Memory.create("I moved to Lisbon", speaker="Caroline"))
        store.append_transcript("s", 2, "user", "hi", speaker="Melanie")
    with SQLiteStore(db_path) as store:
        assert store.get_memory(said.id).speaker == "Caroline"  # type: ignore[union-attr]
        assert [e.speaker for e in store.get_transcripts("s")] == [None, "Melanie"]


def test_a_v10_file_gets_covering_relation_indexes_and_walks_the_same(db_path: Path) -> None:
    """Version 11 widens the two relation indexes a graph walk reads so that they cover
    every column it asks for: the walk then reads no table row, and finds what it found
    through the version-10 indexes."""
    from persistence.sqlite.graph_store import GraphStore
    from persistence.sqlite.sql import graph_sql

    v10 = migrations.available_migrations()[:10]
    sql = "EXPLAIN QUERY PLAN " + graph_sql.hop_sql(True)
    params = {"node": "x", "at": 0, "fanout": 5, "predicates": "[]"}
    with SQLiteStore(db_path, migrations=v10) as old:
        graph = GraphStore(old)
        for n, (s, p, o) in enumerate(
            [("Ana", "knows", "Bo"), ("Bo", "likes", "Cy"), ("Cy", "knows", "Ana"),
             ("Cy", "owns", "Dee"), ("Eve", "knows", "Bo")]
        ):  # fmt: skip
            graph.relate(s, p, o, 1, confidence=0.5 + n / 10, valid_to=None if n else 5)
        before = [graph.neighbors("Ana", 3, None, 10, 10, at) for at in (1, 9)]
        with old.read_connection() as conn:
            plan = " ".join(str(row[3]) for row in conn.execute(sql, params))
        assert "COVERING INDEX" not in plan
    with SQLiteStore(db_path) as store:
        assert store.schema_version == migrations.LATEST_VERSION >= 11
        graph = GraphStore(store)
        assert [graph.neighbors("Ana", 3, None, 10, 10, at) for at in (1, 9)] == before
        assert before[0] != before[1]  # the invalidated relation counts at one time only
        with store.read_connection() as conn:
            plan = " ".join(str(row[3]) for row in conn.execute(sql, params))
            assert graph_sql.check(conn) == []
        assert "COVERING INDEX idx_relations_subject" in plan
        assert "COVERING INDEX idx_relations_object" in plan


def test_a_v11_file_keeps_its_sessions_and_log_store_wide(db_path: Path) -> None:
    """Version 12 names the agent of sessions and forgetting-log rows; rows already in
    the file name none: the operator's handle sees them, an agent-scoped one does not."""
    from persistence import SessionState
    from persistence.sqlite.session_store import SessionStore

    with SQLiteStore(db_path, migrations=migrations.available_migrations()[:11]) as old:
        old.put_session(SessionState("old", 1, 1))
        kept = old.put_episodic(Memory.create("old fact", Tier.EPISODIC))
        old.forget_memory(kept.id, "test")
    with SQLiteStore(db_path) as store:
        assert store.schema_version == migrations.LATEST_VERSION >= 12
        assert [s.session_id for s in store.get_sessions()] == ["old"]
        assert SessionStore(store.db, store.clock, "a").get_sessions() == []
        assert len(store.get_forgetting_log()) == 1
        assert store.schedules.get_forgetting_log(agent_id="a") == []
        assert store.schedules.get_forgetting_log(agent_id="") == []

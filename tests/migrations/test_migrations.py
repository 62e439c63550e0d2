"""Versioned migrations: the v001 schema, the runner's transactions, and refusing newer files."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import apsw
import pytest

import migrations.postgres as postgres_chain
import migrations.sqlite as sqlite_chain
from migrations import MigrationFailed, SchemaTooNew, apply_chain
from migrations.sqlite import v001_initial
from persistence import Memory, MigrationError, SchemaTooNewError, SessionState, Tier
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


NEXT = sqlite_chain.LATEST_VERSION + 1


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
        assert [r[0] for r in rows] == list(range(1, sqlite_chain.LATEST_VERSION + 1))


def test_shipped_migrations_are_contiguous_and_latest_matches() -> None:
    shipped = sqlite_chain.available_migrations()
    assert [m.VERSION for m in shipped] == list(range(1, len(shipped) + 1))
    assert sqlite_chain.LATEST_VERSION == shipped[-1].VERSION


def test_reopening_applies_nothing_twice(db_path: Path) -> None:
    SQLiteStore(db_path).open().close()
    conn = connect(str(db_path), ConnectionOptions())
    assert sqlite_chain.apply_migrations(conn) == []
    count = conn.execute("SELECT count(*) FROM schema_version").fetchone()[0]
    assert count == sqlite_chain.LATEST_VERSION
    conn.close()


def test_full_file_upgraded_by_a_new_migration_keeps_every_row(db_path: Path) -> None:
    with SQLiteStore(db_path) as store:
        before = _fill(store, 300)

    def up(conn: apsw.Connection) -> None:
        conn.execute("ALTER TABLE episodic ADD COLUMN mood TEXT")
        conn.execute("CREATE TABLE future_table (id INTEGER PRIMARY KEY, body TEXT)")

    shipped = sqlite_chain.available_migrations()
    with SQLiteStore(db_path, migrations=[*shipped, _next(up)]) as store:
        assert store.schema_version == NEXT
        for memory in before:
            again = store.memories.get_memory(memory.id)
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

    shipped = sqlite_chain.available_migrations()
    with pytest.raises(MigrationError, match="disk on fire"):
        SQLiteStore(db_path, migrations=[*shipped, _next(up)]).open()

    with SQLiteStore(db_path) as store:
        assert store.schema_version == sqlite_chain.LATEST_VERSION
        assert [store.memories.get_memory(m.id) for m in before] == before
        with store.transaction() as conn:
            assert "half_done" not in _names(conn, "table")


def test_newer_schema_is_refused_and_untouched(db_path: Path) -> None:
    shipped = sqlite_chain.available_migrations()
    with SQLiteStore(db_path, migrations=[*shipped, _next(lambda conn: None)]) as store:
        _fill(store, 10)
    before = file_digest(db_path)
    with pytest.raises(SchemaTooNewError, match=f"schema version {NEXT}") as caught:
        SQLiteStore(db_path).open()
    assert caught.value.found == NEXT and caught.value.supported == sqlite_chain.LATEST_VERSION
    assert file_digest(db_path) == before


def test_a_v1_file_with_rows_is_migrated_to_latest_without_loss(db_path: Path) -> None:
    with old_schema_store(db_path, 1) as store:
        assert store.schema_version == 1
        before = _fill(store, 100)
    with SQLiteStore(db_path) as store:
        assert store.schema_version == sqlite_chain.LATEST_VERSION
        assert [store.memories.get_memory(m.id) for m in before] == before


def test_runner_refuses_too_new_before_writing(db_path: Path) -> None:
    SQLiteStore(db_path).open().close()
    conn = connect(str(db_path), ConnectionOptions())
    conn.execute("INSERT INTO schema_version VALUES (99, 0, 'future')")
    with pytest.raises(sqlite_chain.SchemaTooNew):
        sqlite_chain.apply_migrations(conn)
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
        old.memories.forget_memory(before[4].id, reason="test")
        scores = scores_and_size(old, words)
    with SQLiteStore(db_path) as store:
        assert store.schema_version == sqlite_chain.LATEST_VERSION
        assert [store.memories.get_memory(m.id) for m in before if m is not before[4]] == [
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
        assert [m for m, _ in store.indexes.keyword_search(["second"], 5)] == ["raw"]
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
        assert 9 <= store.schema_version == sqlite_chain.LATEST_VERSION
        assert [store.memories.get_memory(m.id) for m in before] == before
        assert all(store.memories.get_memory(m.id).speaker is None for m in before)  # type: ignore[union-attr]
        assert store.get_transcripts("s") == [line] and line.speaker is None
        said = store.put_episodic(Memory.create("I moved to Lisbon", speaker="Caroline"))
        store.append_transcript("s", 2, "user", "hi", speaker="Melanie")
    with SQLiteStore(db_path) as store:
        assert store.memories.get_memory(said.id).speaker == "Caroline"  # type: ignore[union-attr]
        assert [e.speaker for e in store.get_transcripts("s")] == [None, "Melanie"]


def test_a_v10_file_gets_covering_relation_indexes_and_walks_the_same(db_path: Path) -> None:
    """Version 11 widens the two relation indexes a graph walk reads so that they cover
    every column it asks for: the walk then reads no table row, and finds what it found
    through the version-10 indexes."""
    from persistence.sqlite import graph_steps
    from persistence.sqlite.graph_store import sqlite_graph_store
    from persistence.sqlite.sql import graph_sql

    v10 = sqlite_chain.available_migrations()[:10]
    sql = "EXPLAIN QUERY PLAN " + graph_sql.hop_sql(True)
    params = ("x", 0, 5, "[]")  # node, time, fanout, predicates
    with SQLiteStore(db_path, migrations=v10, vector_index="ram") as old:  # no cells at v10
        graph = sqlite_graph_store(old.engine)
        for n, (s, p, o) in enumerate(
            [("Ana", "knows", "Bo"), ("Bo", "likes", "Cy"), ("Cy", "knows", "Ana"),
             ("Cy", "owns", "Dee"), ("Eve", "knows", "Bo")]
        ):  # fmt: skip
            graph.relate(s, p, o, 1, confidence=0.5 + n / 10, valid_to=None if n else 5)
        before = [graph.neighbors("Ana", 3, None, 10, 10, at) for at in (1, 9)]
        with old.engine.reading() as conn:
            plan = " ".join(str(row[3]) for row in conn.execute(sql, params))
        assert "COVERING INDEX" not in plan
    with SQLiteStore(db_path) as store:
        assert store.schema_version == sqlite_chain.LATEST_VERSION >= 11
        graph = sqlite_graph_store(store.engine)
        assert [graph.neighbors("Ana", 3, None, 10, 10, at) for at in (1, 9)] == before
        assert before[0] != before[1]  # the invalidated relation counts at one time only
        with store.engine.reading() as conn:
            plan = " ".join(str(row[3]) for row in conn.execute(sql, params))
            assert graph_steps.check(conn) == []
        assert "COVERING INDEX idx_relations_subject" in plan
        assert "COVERING INDEX idx_relations_object" in plan


def test_a_v11_file_keeps_its_sessions_and_log_store_wide(db_path: Path) -> None:
    """Version 12 names the agent of sessions and forgetting-log rows; rows already in
    the file name none: the operator's handle sees them, an agent-scoped one does not."""
    from persistence import SessionState
    from persistence.sqlite.session_store import SessionStore

    with old_schema_store(db_path, 11) as old:
        old.put_session(SessionState("old", 1, 1))
        kept = old.put_episodic(Memory.create("old fact", Tier.EPISODIC))
        old.memories.forget_memory(kept.id, "test")
    with SQLiteStore(db_path) as store:
        assert store.schema_version == sqlite_chain.LATEST_VERSION >= 12
        assert [s.session_id for s in store.sessions.get_sessions()] == ["old"]
        assert SessionStore(store.engine, store.clock, "a").get_sessions() == []
        assert len(store.schedules.get_forgetting_log()) == 1
        assert store.schedules.get_forgetting_log(agent_id="a") == []
        assert store.schedules.get_forgetting_log(agent_id="") == []


# --- the chain per engine, the runner core without a driver ---------------------------


def _raw_contents(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every schema row and every row of every table of the file, read without the store
    (but the planner's statistics, which ``PRAGMA optimize`` refreshes at open and close)."""
    conn = connect(str(path), ConnectionOptions())
    try:
        schema = conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_stat%'"
        ).fetchall()
        tables = [
            str(name)
            for kind, name, _, sql in schema
            if kind == "table"
            and not str(sql or "").upper().startswith("CREATE VIRTUAL")
            and not str(name).startswith("sqlite_stat")
        ]
        found = {"sqlite_schema": sorted(map(tuple, schema), key=repr)}
        for table in tables:
            rows = conn.execute(f'SELECT * FROM "{table}"').fetchall()
            found[table] = sorted(map(tuple, rows), key=repr)
        return found
    finally:
        conn.close()


def test_a_v17_file_with_memories_migrates_to_v18_all_current(db_path: Path) -> None:
    """A file made by the SQLite chain at version 17 (memories, a session, its
    transcript, the forgetting log) migrates to 18: every memory reads back as it was and
    current (no ``superseded_by``, ``valid_to`` or reason), every other row unchanged."""
    with old_schema_store(db_path, 17) as old:
        stored = _fill(old, 40)
        old.sessions.put_session(SessionState("s1", 1, 1))
        old.sessions.append_transcript("s1", 1, "user", "hello there", speaker="Ana")
        old.memories.forget_memory(stored[0].id, "test")
    before = _raw_contents(db_path)
    assert max(row[0] for row in before["schema_version"]) == 17

    with SQLiteStore(db_path) as store:
        assert store.schema_version == sqlite_chain.LATEST_VERSION >= 18
        found = [store.memories.get_memory(m.id) for m in stored[1:]]
        assert found == stored[1:]
        assert all(m is not None and m.current and m.valid_to is None for m in found)
        assert not store.memories.has_superseded()
    after = _raw_contents(db_path)
    for table in ("session_transcripts", "sessions", "forgetting_log", "memory_tags"):
        assert after[table] == before[table]
    for tier in ("episodic", "semantic"):  # the same rows, three NULL columns more
        assert after[tier] == sorted(((*row, None, None, None) for row in before[tier]), key=repr)


def test_the_chains_heads_match_their_modules() -> None:
    """``LATEST_VERSION`` of each chain is read from its file names (no module loaded)."""
    for chain in (sqlite_chain, postgres_chain):
        shipped = chain.available_migrations()
        assert [m.VERSION for m in shipped] == list(range(1, len(shipped) + 1))
        assert chain.LATEST_VERSION == shipped[-1].VERSION


def test_importing_the_migrations_loads_no_driver() -> None:
    """A PostgreSQL user's process reaches the migrations without apsw: the package, the
    runner core and both chains' glue import no driver (a SQLite chain's modules load
    apsw only when they are listed or applied)."""
    probe = (
        "import sys, migrations, migrations.core, migrations.postgres, migrations.sqlite;"
        "migrations.postgres.available_migrations();"
        "print(migrations.sqlite.LATEST_VERSION, migrations.postgres.LATEST_VERSION,"
        " sorted(d for d in ('apsw', 'psycopg', 'sqlite3') if d in sys.modules))"
    )
    root = Path(__file__).resolve().parents[2]  # the checkout (not tests/): its own chains
    env = {**os.environ, "PYTHONPATH": str(root)}
    run = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env, cwd=root
    )
    latest = f"{sqlite_chain.LATEST_VERSION} {postgres_chain.LATEST_VERSION}"
    assert run.stdout.strip() == f"{latest} []"


class _Book:
    """A version book in memory: what the core asks of an engine, written down."""

    def __init__(self, version: int = 0, raced_to: int | None = None) -> None:
        self.version = version
        self.raced_to = raced_to  # another runner's version, seen once the lock is held
        self.calls: list[str] = []
        self._pending: int | None = None

    def read_version(self) -> int:
        return self.version

    def begin(self) -> None:
        self.calls.append("begin")
        if self.raced_to is not None:
            self.version, self.raced_to = self.raced_to, None

    def commit(self) -> None:
        self.calls.append("commit")
        if self._pending is not None:
            self.version, self._pending = self._pending, None

    def rollback(self) -> None:
        self.calls.append("rollback")
        self._pending = None

    def run(self, migration: types.SimpleNamespace) -> None:
        self.calls.append(f"run {migration.VERSION}")
        migration.up()

    def record(self, version: int, applied_at: int, description: str) -> None:
        self.calls.append(f"record {version} at {applied_at}")
        self._pending = version


def _chain(*ups: object) -> list[types.SimpleNamespace]:
    return [
        types.SimpleNamespace(VERSION=n, DESCRIPTION=f"v{n}", up=up)
        for n, up in enumerate(ups, start=1)
    ]


def test_the_core_applies_each_missing_version_in_its_own_transaction() -> None:
    book = _Book(version=1)
    chain = _chain(lambda: None, lambda: None, lambda: None)
    assert apply_chain(book, list(reversed(chain)), clock=lambda: 5) == [2, 3]
    assert book.version == 3
    assert book.calls == [
        "begin", "run 2", "record 2 at 5", "commit",
        "begin", "run 3", "record 3 at 5", "commit",
    ]  # fmt: skip
    assert apply_chain(book, chain) == []


def test_the_core_rolls_a_failing_version_back_and_names_it() -> None:
    def fail() -> None:
        raise ValueError("no")

    book = _Book()
    with pytest.raises(MigrationFailed, match="migration 2 failed") as caught:
        apply_chain(book, _chain(lambda: None, fail, lambda: None), clock=lambda: 0)
    assert caught.value.version == 2 and isinstance(caught.value.__cause__, ValueError)
    assert book.version == 1
    assert book.calls[-3:] == ["begin", "run 2", "rollback"]


def test_the_core_refuses_a_newer_schema_before_and_under_the_lock() -> None:
    book = _Book(version=4)
    with pytest.raises(SchemaTooNew):
        apply_chain(book, _chain(lambda: None, lambda: None))
    assert book.calls == []  # nothing begun

    raced = _Book(version=0, raced_to=4)  # a newer runner got there first
    with pytest.raises(SchemaTooNew) as caught:
        apply_chain(raced, _chain(lambda: None, lambda: None))
    assert (caught.value.found, caught.value.supported) == (4, 2)
    assert raced.calls == ["begin", "rollback"]

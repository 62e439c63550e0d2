"""Caches kept "until something commits" (issue 44) never serve rows of a snapshot that
began before a commit (review): a read snapshot pins the stamp it began at, and its
reads are kept only while no later commit was seen (SQLite and PostgreSQL); a reopened
in-memory store never repeats an old stamp."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from persistence import Memory, Tier
from persistence.postgres import PostgresStore
from persistence.records import SessionState
from persistence.sqlite import SQLiteStore


def test_snapshot_thread_poisons_session_cache(tmp_path: Path) -> None:
    path = str(tmp_path / "a.db")
    with SQLiteStore(path) as store:
        store.sessions.put_session(SessionState("s", 1, 1, turn_number=1))
        opened, committed, loaded = threading.Event(), threading.Event(), threading.Event()

        def old_snapshot() -> None:
            with store.engine.snapshot() as conn:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchall()  # snapshot taken
                opened.set()
                committed.wait(10)
                store.sessions.get_session("s")  # reads the snapshot (turn 1), keeps it
            loaded.set()

        worker = threading.Thread(target=old_snapshot)
        worker.start()
        opened.wait(10)
        store.sessions.put_session(SessionState("s", 1, 2, turn_number=2))  # committed
        assert store.sessions.get_session("nothing") is None  # this thread's look: stamp moves
        committed.set()
        loaded.wait(10)
        worker.join()
        fresh = store.sessions.get_session("s")
        assert fresh is not None and fresh.turn_number == 2, fresh


def _search(store: SQLiteStore, searched: list[object]) -> None:
    """A vector search on its own thread (as recall's), its outcome kept for the test."""
    try:
        searched.append(store.indexes.vector_search([1.0, 0.0, 0.0, 0.0], 5))
    except Exception as exc:  # the test says what failed
        searched.append(exc)


def test_search_snapshot_poisons_vector_cache(tmp_path: Path) -> None:
    with SQLiteStore(str(tmp_path / "a.db"), vector_index="ram") as store:  # first_stage
        a, b = Memory.create("a", Tier.EPISODIC), Memory.create("b", Tier.EPISODIC)
        store.memories.put_memory(a)
        store.memories.put_memory(b)
        store.indexes.set_embeddings([(Tier.EPISODIC, a.id, [1.0, 0.0, 0.0, 0.0])])
        vectors = store.indexes.vectors
        original = vectors.first_stage
        in_search, committed = threading.Event(), threading.Event()

        def paused(conn, query, count, tier):  # type: ignore[no-untyped-def]
            ranked, extras = original(conn, query, count, tier)
            in_search.set()
            committed.wait(10)  # the search's snapshot is older than the commit
            return [*ranked, (b.id, Tier.EPISODIC)], extras

        vectors.first_stage = paused
        searched: list[object] = []
        worker = threading.Thread(target=_search, args=(store, searched))
        worker.start()
        in_search.wait(10)
        store.indexes.set_embeddings([(Tier.EPISODIC, b.id, [0.0, 1.0, 0.0, 0.0])])
        assert set(store.indexes.vector_distances([1.0, 0, 0, 0], [a.id])) == {a.id}
        committed.set()
        worker.join()
        vectors.first_stage = original
        assert searched and isinstance(searched[0], list), searched  # the search ran whole
        # b's embedding is committed (this very thread wrote it): its distance is 1.0
        assert store.indexes.vector_distances([1.0, 0, 0, 0], [a.id, b.id]).get(b.id) == 1.0


def test_search_snapshot_keeps_a_forgotten_memorys_vector(tmp_path: Path) -> None:
    """No candidate invented: the search's own first stage, paused before its re-rank."""
    with SQLiteStore(str(tmp_path / "a.db"), vector_index="ram") as store:  # first_stage
        a, c = Memory.create("a", Tier.EPISODIC), Memory.create("c", Tier.EPISODIC)
        store.memories.put_memory(a)
        store.memories.put_memory(c)
        store.indexes.set_embeddings(
            [
                (Tier.EPISODIC, a.id, [1.0, 0.0, 0.0, 0.0]),
                (Tier.EPISODIC, c.id, [0.0, 1.0, 0.0, 0.0]),
            ]
        )
        vectors = store.indexes.vectors
        original = vectors.first_stage
        in_search, committed = threading.Event(), threading.Event()

        def paused(conn, query, count, tier):  # type: ignore[no-untyped-def]
            found = original(conn, query, count, tier)
            in_search.set()
            committed.wait(10)
            return found

        vectors.first_stage = paused
        searched: list[object] = []
        worker = threading.Thread(target=_search, args=(store, searched))
        worker.start()
        in_search.wait(10)
        store.memories.forget_memory(a.id, "test")
        assert set(store.indexes.vector_distances([1.0, 0, 0, 0], [c.id])) == {c.id}
        committed.set()
        worker.join()
        vectors.first_stage = original
        assert searched and isinstance(searched[0], list), searched  # the search ran whole
        assert a.id not in store.indexes.vector_distances([1.0, 0, 0, 0], [a.id, c.id])


@pytest.mark.postgres
def test_pg_snapshot_thread_poisons_session_cache(pg_url: str) -> None:
    with PostgresStore(pg_url) as store:
        store.sessions.put_session(SessionState("s", 1, 1, turn_number=1))
        opened, committed, loaded = threading.Event(), threading.Event(), threading.Event()

        def old_snapshot() -> None:
            with store.engine.snapshot() as conn:
                conn.execute("SELECT 1").fetchall()  # REPEATABLE READ: snapshot taken
                opened.set()
                committed.wait(10)
                store.sessions.get_session("s")  # the snapshot's turn 1, kept
            loaded.set()

        worker = threading.Thread(target=old_snapshot)
        worker.start()
        opened.wait(10)
        store.sessions.put_session(SessionState("s", 1, 2, turn_number=2))  # committed
        committed.set()
        loaded.wait(10)
        worker.join()
        fresh = store.sessions.get_session("s")
        assert fresh is not None and fresh.turn_number == 2, fresh


def test_reopened_in_memory_store_serves_the_old_databases_row() -> None:
    store = SQLiteStore(":memory:")
    store.open()
    store.sessions.put_session(SessionState("s", 1, 1))
    assert store.sessions.get_session("s") is not None  # kept
    store.close()
    store.open()  # a new, empty in-memory database
    store.sessions.put_session(SessionState("t", 1, 1))  # as many changes as before
    try:
        assert store.sessions.get_session("s") is None
    finally:
        store.close()

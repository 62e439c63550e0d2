"""SQLiteStore.transaction(): commit, rollback, savepoints, and commit/rollback hooks."""

from __future__ import annotations

import pytest

from persistence import Memory, Tier
from persistence.sqlite import SQLiteStore


class Boom(Exception):
    pass


def test_exception_rolls_back_every_write(store: SQLiteStore) -> None:
    kept = store.put_episodic(Memory.create("kept"))
    with pytest.raises(Boom), store.transaction():
        store.put_episodic(Memory.create("lost"))
        store.promote_memory(kept.id, Tier.EPISODIC, Tier.SEMANTIC)
        raise Boom
    assert [m.content for m in store.query_episodic()] == ["kept"]
    assert store.get_semantic(kept.id) is None
    assert store.memories.get_promotion_history(kept.id) == []


def test_grouped_writes_commit_together(store: SQLiteStore) -> None:
    with store.transaction():
        a = store.put_episodic(Memory.create("a"))
        store.promote_memory(a.id, Tier.EPISODIC, Tier.SEMANTIC)
        assert store.get_semantic(a.id) is not None  # reads see uncommitted work
    assert store.get_semantic(a.id) is not None


def test_nested_transaction_is_a_savepoint(store: SQLiteStore) -> None:
    with store.transaction():
        store.put_episodic(Memory.create("outer"))
        with pytest.raises(Boom), store.transaction():
            store.put_episodic(Memory.create("inner"))
            raise Boom
        store.put_episodic(Memory.create("after"))
    assert sorted(m.content for m in store.query_episodic()) == ["after", "outer"]


def test_hooks_run_after_commit_or_on_rollback(store: SQLiteStore) -> None:
    events: list[str] = []
    with store.transaction() as conn:
        store.engine.after_commit(lambda: events.append(f"commit in_tx={conn.in_transaction}"))
        store.engine.after_rollback(lambda: events.append("rollback"))
        assert events == []
    assert events == ["commit in_tx=False"]

    events.clear()
    with pytest.raises(Boom), store.transaction():
        store.engine.after_commit(lambda: events.append("commit"))
        store.engine.after_rollback(lambda: events.append("rollback"))
        raise Boom
    assert events == ["rollback"]


def test_savepoint_rollback_runs_only_its_own_hooks(store: SQLiteStore) -> None:
    events: list[str] = []
    with store.transaction():
        store.engine.after_commit(lambda: events.append("outer commit"))
        with pytest.raises(Boom), store.transaction():
            store.engine.after_commit(lambda: events.append("inner commit"))
            store.engine.after_rollback(lambda: events.append("inner rollback"))
            raise Boom
        assert events == ["inner rollback"]
    assert events == ["inner rollback", "outer commit"]


def test_after_commit_outside_a_transaction_runs_now(store: SQLiteStore) -> None:
    events: list[str] = []
    store.engine.after_commit(lambda: events.append("now"))
    store.engine.after_rollback(lambda: events.append("never"))
    assert events == ["now"]


def test_failed_commit_rolls_back_and_runs_rollback_hooks(store: SQLiteStore) -> None:
    events: list[str] = []
    with store.transaction() as conn:
        conn.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
        conn.execute(
            "CREATE TABLE child (pid INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)"
        )
    with pytest.raises(Exception, match="FOREIGN KEY"), store.transaction() as conn:
        store.engine.after_rollback(lambda: events.append("rollback"))
        conn.execute("INSERT INTO child VALUES (42)")
        store.put_episodic(Memory.create("doomed"))
    assert events == ["rollback"]
    assert store.query_episodic() == []
    assert not store.in_transaction
    store.put_episodic(Memory.create("store still works"))


def test_rollback_hooks_run_newest_first_like_an_undo_log(store: SQLiteStore) -> None:
    events: list[int] = []
    with pytest.raises(Boom), store.transaction():
        for n in range(3):
            with store.transaction():
                store.engine.after_rollback(lambda n=n: events.append(n))  # type: ignore[misc]
        raise Boom
    assert events == [2, 1, 0]


def test_an_inner_error_that_ends_the_whole_transaction_is_reported(store: SQLiteStore) -> None:
    """If SQLite drops the whole transaction, later writes must not autocommit."""
    events: list[str] = []
    with pytest.raises(Exception), store.transaction() as conn:  # noqa: B017
        store.engine.after_rollback(lambda: events.append("outer rollback"))
        with pytest.raises(Boom), store.transaction():
            conn.execute("ROLLBACK")  # what SQLite does itself on disk-full or I/O errors
            raise Boom
        store.put_episodic(Memory.create("would autocommit"))
    assert events == ["outer rollback"]
    assert store.query_episodic() == [] and not store.in_transaction
    store.put_episodic(Memory.create("fine again"))
    assert len(store.query_episodic()) == 1


def test_commit_of_a_transaction_sqlite_dropped_raises(store: SQLiteStore) -> None:
    from persistence import TransactionAbortedError

    with pytest.raises(TransactionAbortedError), store.transaction() as conn:
        store.put_episodic(Memory.create("lost"))
        conn.execute("ROLLBACK")
    assert store.query_episodic() == []

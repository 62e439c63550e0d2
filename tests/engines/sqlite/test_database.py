"""The engine on its own (persistence.database.Database): transactions, savepoints,
hooks, read-only opens and per-thread readers, over a plain table of its own."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from persistence import ReadOnlyError, StoreClosedError, TransactionAbortedError
from persistence.sqlite.connection import MEMORY_PATH, ConnectionOptions, connection_wal, query_all
from persistence.sqlite.database import Database


class Boom(Exception):
    pass


def _prepare(conn: apsw.Connection) -> None:
    connection_wal(conn)
    conn.execute("CREATE TABLE IF NOT EXISTS t (v TEXT PRIMARY KEY)")


def _rows(db: Database) -> list[str]:
    with db.reading() as conn:
        return [row[0] for row in query_all(conn, "SELECT v FROM t ORDER BY v")]


def _opened(request: pytest.FixtureRequest, tmp_path: Path, **tunables: int) -> Iterator[Database]:
    path = str(tmp_path / "engine.db") if request.param == "file" else MEMORY_PATH
    database = Database(path, ConnectionOptions(), **tunables)
    assert database.open(_prepare)
    assert not database.open(_prepare)  # a second open does nothing
    yield database
    database.close()
    database.close()  # twice is harmless


@pytest.fixture(params=["file", "memory"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    yield from _opened(request, tmp_path)


@pytest.fixture(params=["file", "memory"])
def resets_after_ten(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A database that resets its writer's schema after a transaction of 10 rows."""
    yield from _opened(request, tmp_path, reset_after_changes=10)


def test_nested_savepoints_roll_back_alone(db: Database) -> None:
    with db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES ('outer')")
        with db.transaction() as inner:
            inner.execute("INSERT INTO t VALUES ('kept')")
            with pytest.raises(Boom), db.transaction() as innermost:
                innermost.execute("INSERT INTO t VALUES ('lost')")
                raise Boom
            inner.execute("INSERT INTO t VALUES ('after')")
    assert _rows(db) == ["after", "kept", "outer"]


def test_hooks_fire_exactly_once_per_commit_and_rollback(db: Database) -> None:
    events: list[str] = []
    with db.transaction():
        db.after_commit(lambda: events.append("outer commit"))
        with db.transaction():
            db.after_commit(lambda: events.append("savepoint commit"))
            db.after_rollback(lambda: events.append("never"))
        with pytest.raises(Boom), db.transaction():
            db.after_commit(lambda: events.append("never"))
            db.after_rollback(lambda: events.append("savepoint rollback"))
            raise Boom
        with db.transaction(join=True):
            db.after_commit(lambda: events.append("joined commit"))
        assert events == ["savepoint rollback"]
    assert events == ["savepoint rollback", "outer commit", "savepoint commit", "joined commit"]

    events.clear()
    with pytest.raises(Boom), db.transaction():
        db.after_rollback(lambda: events.append("first"))
        with db.transaction():
            db.after_rollback(lambda: events.append("second"))
        db.after_commit(lambda: events.append("never"))
        raise Boom
    assert events == ["second", "first"]  # newest first, once each

    events.clear()
    db.after_commit(lambda: events.append("now"))  # outside a transaction: runs at once
    db.after_rollback(lambda: events.append("never"))  # ...and this is dropped
    assert events == ["now"]


def test_a_joined_block_that_wrote_then_raised_aborts_the_transaction(db: Database) -> None:
    events: list[str] = []
    with pytest.raises(TransactionAbortedError), db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES ('first')")
        db.after_rollback(lambda: events.append("rolled back"))
        with pytest.raises(Boom), db.transaction(join=True) as joined:
            joined.execute("INSERT INTO t VALUES ('half')")
            raise Boom
        with pytest.raises(TransactionAbortedError), db.transaction():
            pass  # nothing more may start inside an aborted transaction
    assert _rows(db) == []
    assert events == ["rolled back"]
    with db.transaction() as conn:  # the engine is usable again
        conn.execute("INSERT INTO t VALUES ('again')")
    assert _rows(db) == ["again"]


def test_a_joined_block_that_raised_before_writing_leaves_it_usable(db: Database) -> None:
    with db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES ('a')")
        with pytest.raises(Boom), db.transaction(join=True):
            raise Boom
        conn.execute("INSERT INTO t VALUES ('b')")
    assert _rows(db) == ["a", "b"]


def test_before_commit_runs_inside_the_outermost_transaction_only(db: Database) -> None:
    seen: list[bool] = []
    db.before_commit(lambda conn: seen.append(conn.in_transaction))
    with db.transaction():
        with db.transaction():
            pass
        assert seen == []
    assert seen == [True]
    with pytest.raises(Boom), db.transaction():
        raise Boom
    assert seen == [True]


def test_readers_on_several_threads_have_their_own_connections(tmp_path: Path) -> None:
    db = Database(str(tmp_path / "engine.db"), ConnectionOptions())
    db.open(_prepare)
    with db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES ('committed')")
    barrier = threading.Barrier(4)
    seen: dict[int, tuple[int, list[str]]] = {}
    release = threading.Event()

    def read(n: int) -> None:
        with db.reading() as conn:
            barrier.wait()  # all four hold a read connection at once
            seen[n] = (id(conn), [r[0] for r in query_all(conn, "SELECT v FROM t")])
        release.wait()

    with db.transaction() as writer:  # an open write does not block the readers
        writer.execute("INSERT INTO t VALUES ('uncommitted')")
        threads = [threading.Thread(target=read, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        while len(seen) < 4 and any(t.is_alive() for t in threads):
            threading.Event().wait(0.01)
    assert len({conn for conn, _ in seen.values()}) == 4
    assert all(rows == ["committed"] for _, rows in seen.values())
    assert len(db.readers) == 4
    assert db.writer is not None and all(r is not db.writer for r in db.readers)
    release.set()
    for thread in threads:
        thread.join()
    db.close()
    assert db.readers == []
    with pytest.raises(StoreClosedError):
        db.reading().__enter__()


def test_a_read_only_open_refuses_writes_and_leaves_no_files(tmp_path: Path) -> None:
    path = tmp_path / "engine.db"
    writable = Database(str(path), ConnectionOptions())
    writable.open(_prepare)
    with writable.transaction() as conn:
        conn.execute("INSERT INTO t VALUES ('x')")
    writable.close()
    before = path.read_bytes()
    db = Database(str(path), ConnectionOptions(), read_only=True)
    db.open(lambda conn: None)
    with pytest.raises(ReadOnlyError):
        db.transaction().__enter__()
    with pytest.raises(ReadOnlyError):
        db.exclusive_connection().__enter__()
    assert _rows(db) == ["x"]
    db.close()
    assert path.read_bytes() == before
    assert not (tmp_path / "engine.db-wal").exists()


def test_another_connections_commit_is_noticed(tmp_path: Path) -> None:
    path = str(tmp_path / "engine.db")
    watcher = Database(path, ConnectionOptions(), change_check_interval_ms=0)
    other = Database(path, ConnectionOptions())
    watcher.open(_prepare)
    other.open(_prepare)
    calls: list[int] = []
    watcher.on_external_change(lambda: calls.append(1))
    assert watcher.check_external_changes()
    with watcher.transaction() as conn:  # its own commits do not count
        conn.execute("INSERT INTO t VALUES ('mine')")
    assert watcher.check_external_changes() and calls == []
    with other.transaction() as conn:
        conn.execute("INSERT INTO t VALUES ('theirs')")
    assert watcher.check_external_changes()
    assert calls == [1]
    other.close()
    watcher.close()


def test_exclusive_access_is_refused_inside_a_transaction(db: Database) -> None:
    resets: list[int] = []
    db.after_exclusive(lambda: resets.append(1))
    with db.exclusive_connection() as conn:
        assert not conn.in_transaction
    assert resets == [1]
    with db.transaction(), pytest.raises(Exception, match="inside a transaction"):
        db.exclusive_connection().__enter__()


def test_a_large_transaction_resets_the_writers_schema_after_it_ends(
    resets_after_ten: Database,
) -> None:
    """FTS5's pending-terms hash grows with a connection's largest transaction and slows
    every later commit: after a large one the writer's schema (and with it each virtual
    table's per-connection state) is reset. Small transactions leave it alone, and the
    connection works on as before, committed or rolled back."""
    db = resets_after_ten
    writer = db.writer
    assert writer is not None
    seen: list[str] = []
    writer.set_profile(lambda sql, _ns: seen.append(sql) if "writable_schema" in sql else None)
    with db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES ('small')")
    assert seen == []
    with db.transaction() as conn:
        conn.executemany("INSERT INTO t VALUES (?)", [(f"big{n:02}",) for n in range(10)])
    assert len(seen) == 1
    with pytest.raises(Boom), db.transaction() as conn:
        conn.executemany("INSERT INTO t VALUES (?)", [(f"lost{n:02}",) for n in range(10)])
        raise Boom
    assert len(seen) == 2
    with db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES ('zafter')")
    writer.set_profile(None)
    assert _rows(db) == [f"big{n:02}" for n in range(10)] + ["small", "zafter"]

"""The PostgreSQL engine: transactions and hooks, writers per agent, other processes'
commits, read-only handles and the errors of a server that cannot be used."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable

import pytest

from persistence.errors import (
    DatabaseMissingError,
    InvalidInputError,
    ReadOnlyError,
    ServerUnavailableError,
    TransactionAbortedError,
)
from persistence.postgres import PostgresStore
from tests.support.pg_server import PgServer, app_url, wait_for_a_queued_writer


@pytest.fixture
def pg(pg_url: str):
    store = PostgresStore(pg_url).open()
    yield store
    store.close()


def test_a_failed_transaction_writes_nothing_and_runs_rollback_hooks(pg: PostgresStore) -> None:
    seen: list[str] = []
    with pytest.raises(RuntimeError), pg.transaction():
        pg.set_meta("k", "v")
        pg.engine.after_commit(lambda: seen.append("commit"))
        pg.engine.after_rollback(lambda: seen.append("rollback"))
        raise RuntimeError
    assert pg.get_meta("k") is None
    assert seen == ["rollback"]


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_a_nested_block_rolls_back_alone(pg: PostgresStore) -> None:
    with pg.transaction():
        with pytest.raises(KeyError), pg.transaction():
            pg.set_meta("inner", "1")
            raise KeyError
        pg.set_meta("outer", "1")
    assert (pg.get_meta("inner"), pg.get_meta("outer")) == (None, "1")


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_a_joined_block_that_wrote_then_failed_aborts_the_transaction(pg: PostgresStore) -> None:
    with pytest.raises(TransactionAbortedError), pg.transaction():  # noqa: SIM117
        with pytest.raises(KeyError), pg.transaction(join=True):
            pg.set_meta("half", "1")
            raise KeyError
    assert pg.get_meta("half") is None


@pytest.mark.slow  # 1.6 s measured on a busy machine
def test_a_joined_block_failing_before_any_write_leaves_the_transaction_usable(
    pg: PostgresStore,
) -> None:
    with pg.transaction():
        with pytest.raises(KeyError), pg.transaction(join=True):
            raise KeyError
        pg.set_meta("after", "1")
    assert pg.get_meta("after") == "1"


@pytest.mark.slow  # 1.2 s measured on a busy machine
def test_counters_add_atomically_across_threads(pg_url: str) -> None:
    stores = [PostgresStore(pg_url).open() for _ in range(4)]
    try:

        def count(store: PostgresStore) -> None:
            for _ in range(25):
                store.increment_meta("n")

        threads = [threading.Thread(target=count, args=(s,)) for s in stores]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert stores[0].get_meta("n") == "100"
    finally:
        for s in stores:
            s.close()


def test_another_handles_commit_reaches_the_change_listeners(pg_url: str) -> None:
    a, b = PostgresStore(pg_url).open(), PostgresStore(pg_url).open()
    try:
        told: list[int] = []
        b.engine.on_external_change(lambda: told.append(1))
        b.engine.check_external_changes()
        assert told == []
        a.set_meta("x", "1")
        deadline = time.monotonic() + 5
        while not told and time.monotonic() < deadline:
            b.engine.check_external_changes()
            time.sleep(0.01)
        assert told, "b never heard of a's commit"
        a.set_meta("own", "1")
        told.clear()
        a_told: list[int] = []
        a.engine.on_external_change(lambda: a_told.append(1))
        a.engine.check_external_changes()
        assert a_told == []  # a's own commit is not another process's
    finally:
        a.close()
        b.close()


def _queued_behind_a_commit(pg_url: str, a: PostgresStore, call: Callable[[], object]) -> None:
    """Run ``call`` in a thread while ``a``'s transaction (a write) is open; ``a``
    commits once ``call``'s writer waits for it."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # handed to the test
            failed.append(exc)

    with a.transaction():
        a.set_meta("a", "1")
        thread = threading.Thread(target=run)
        thread.start()
        wait_for_a_queued_writer(pg_url)
    thread.join(10)
    assert not thread.is_alive() and not failed, failed


@pytest.mark.parametrize("how", ["transaction", "one trip"])
def test_a_writer_queued_behind_another_handles_commit_hears_of_it_as_it_begins(
    pg_url: str, how: str
) -> None:
    # The version row was read in the lock's statement, so as the rows were before the
    # wait: the commit waited for went unnoticed and RAM copies stayed stale (the soak's
    # promote and review of scratchpad entries another process had moved).
    a, b = PostgresStore(pg_url).open(), PostgresStore(pg_url).open()
    try:
        told: list[int] = []
        b.engine.on_external_change(lambda: told.append(1))
        b.engine.check_external_changes()
        heard: list[int] = []

        def in_a_transaction() -> None:
            with b.transaction():
                heard.append(len(told))  # before anything of b's own runs
                b.set_meta("b", "1")

        def in_one_trip() -> None:
            insert = ("INSERT INTO tm_meta (key, value) VALUES (%s, %s)", ("b", "1"))
            b.engine.write_in_one_trip([insert], wrote=("true", ()))
            heard.append(len(told))

        _queued_behind_a_commit(
            pg_url, a, in_a_transaction if how == "transaction" else in_one_trip
        )
        assert heard == [1]
        with b.engine.reading() as conn:
            row = conn.execute("SELECT v FROM tm_version WHERE scope = ''").fetchone()
        assert row is not None and b.engine.seen_version == row[0]
    finally:
        a.close()
        b.close()


def test_another_scopes_commit_announced_before_a_begin_reaches_the_listeners(
    pg_server: PgServer, pg_url: str
) -> None:
    # An agent's commit moves its own scope's version row, not the unscoped handle's
    # (nor the reverse): BEGIN's exact look at its own row does not cover it, so its
    # announcement, taken off the listener there, must not be dropped.
    url = app_url(pg_server, pg_url)
    for writer_scope, reader_scope in (("x", ""), ("", "x")):
        writer = PostgresStore(url, scope=writer_scope).open()
        reader = PostgresStore(url, scope=reader_scope).open()
        try:
            told: list[int] = []
            reader.engine.on_external_change(functools.partial(told.append, 1))
            reader.engine.check_external_changes()
            writer.set_meta(f"from {writer_scope!r}", "1")
            time.sleep(0.3)  # the announcement reaches the reader's listener socket
            with reader.transaction():
                heard = len(told)
            assert heard == 1, f"{reader_scope!r} missed {writer_scope!r}'s commit"
        finally:
            writer.close()
            reader.close()


@pytest.mark.slow  # 1.9 s measured on a busy machine
def test_writers_of_different_agents_do_not_wait_for_each_other(
    pg_server: PgServer, pg_url: str
) -> None:
    url = app_url(pg_server, pg_url)  # scoped handles need a role that RLS binds
    x, y, x2 = (PostgresStore(url, scope=s).open() for s in ("x", "y", "x"))
    try:
        waited: dict[str, float] = {}

        def write(name: str, store: PostgresStore) -> None:
            start = time.monotonic()
            store.set_meta(name, "1")
            waited[name] = time.monotonic() - start

        with x.transaction():
            x.set_meta("x-open", "1")
            other_agent = threading.Thread(target=write, args=("y", y))
            same_agent = threading.Thread(target=write, args=("x2", x2))
            other_agent.start()
            same_agent.start()
            other_agent.join(5)
            assert "y" in waited and waited["y"] < 0.5  # agent y never waited on x
            time.sleep(0.3)
            assert "x2" not in waited  # agent x's second writer queues behind the first
        same_agent.join(5)
        assert waited["x2"] >= 0.3
    finally:
        for s in (x, y, x2):
            s.close()


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_a_read_only_handle_refuses_writes(pg_url: str) -> None:
    PostgresStore(pg_url).open().close()
    ro = PostgresStore(pg_url, read_only=True).open()
    try:
        with pytest.raises(ReadOnlyError):
            ro.set_meta("k", "v")
        with ro.engine.reading() as conn, pytest.raises(ReadOnlyError):
            from persistence.postgres.translate import storage_errors

            with storage_errors(pg_url):
                conn.execute("INSERT INTO tm_meta VALUES ('k', 'v')")
    finally:
        ro.close()


def test_a_missing_database_and_a_dead_server_give_typed_errors_without_secrets(
    pg_server: PgServer,
) -> None:
    with pytest.raises(DatabaseMissingError, match="create it first"):
        PostgresStore(pg_server.url("no_such_db")).open()
    with pytest.raises(ServerUnavailableError) as caught:
        PostgresStore("postgresql://someone:s3cret-pw@127.0.0.1:1/db").open()
    assert "s3cret-pw" not in str(caught.value)
    assert "s3cret-pw" not in repr(PostgresStore("postgresql://someone:s3cret-pw@127.0.0.1:1/db"))


@pytest.mark.slow  # 1.2 s measured on a busy machine
@pytest.mark.parametrize(("synchronous", "expected"), [("NORMAL", "off"), ("FULL", "on")])
def test_synchronous_sets_whether_a_commit_waits_for_the_wal_flush(
    pg_url: str, synchronous: str, expected: str
) -> None:
    store = PostgresStore(pg_url, synchronous=synchronous).open()  # type: ignore[arg-type]
    try:
        with store.transaction() as conn:
            assert conn.execute("SHOW synchronous_commit").fetchone() == (expected,)
    finally:
        store.close()
    with pytest.raises(InvalidInputError):
        PostgresStore(pg_url, synchronous="OFF")  # type: ignore[arg-type]

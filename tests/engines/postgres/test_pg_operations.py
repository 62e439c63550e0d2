"""PostgreSQL under concurrency and failure, with real processes and a real server:
writers of one agent queue and dedup holds, writers of different agents do not wait,
another process's commit is seen by a cached manager on its next call, and a server
that is down, refuses the password, lacks the database, cuts the connection or restarts
gives a typed error that writes nothing and shows no password (logs included)."""

from __future__ import annotations

import logging
import threading
import time
from urllib.parse import urlsplit

import pytest

from persistence import (
    AuthenticationError,
    ConnectionLostError,
    DatabaseMissingError,
    Memory,
    PoolSettings,
    ServerUnavailableError,
    Tier,
    TieredMemoryError,
)
from persistence.postgres import PostgresStore
from tests.support.pg_server import PgServer, password_role
from tests.support.pg_server import with_password as url_with_password
from tests.support.processes import spawn_worker
from tiered_memory import AgentMemoryManager

SECRET = "s3cret-Pa55word"


def with_password(url: str, user: str = "postgres", password: str = SECRET) -> str:
    """``url`` with ``user:password@`` in its user part."""
    return url_with_password(url, user, password)


def count(url: str, server: PgServer, where: str = "true") -> int:
    """Rows of tm_memories matching ``where`` (a connection of its own)."""
    database = urlsplit(url).path.lstrip("/")
    with server.connect(database) as conn:
        row = conn.execute(f"SELECT count(*) FROM tm_memories WHERE {where}").fetchone()
    return int(row[0]) if row else 0


# --- writers: one agent queues, different agents do not ---------------------------------


@pytest.mark.subprocess
@pytest.mark.slow
def test_two_processes_remembering_the_same_fact_end_with_one_memory(any_location: str) -> None:
    AgentMemoryManager.open(any_location, embedder=None).close()  # schema made once
    workers = [
        spawn_worker("remember-on-cue", any_location, "the door code is 4711", "agent-a",
                     stdin=True)
        for _ in range(2)
    ]  # fmt: skip
    for worker in workers:
        assert worker.process.stdin is not None
        worker.process.stdin.write("go\n")
        worker.process.stdin.flush()
    ids = {line.split()[1] for w in workers for line in w.finish(60) if line.startswith("ID")}
    assert len(ids) == 1, f"two memories for one fact of one agent: {ids}"
    with AgentMemoryManager.open(any_location, embedder=None) as memory:
        assert [m.id for m in memory.query(limit=None)] == list(ids)


@pytest.mark.subprocess
@pytest.mark.slow
def test_an_open_transaction_of_agent_a_does_not_block_agent_b(pg_url: str) -> None:
    PostgresStore(pg_url).open().close()
    holder = spawn_worker("hold-transaction", pg_url, "agent-a", ready="HOLDING", stdin=True)
    try:
        with PostgresStore(pg_url, scope="agent-b") as b:
            start = time.monotonic()
            b.put_episodic(Memory.create("b writes while a holds its transaction"))
            assert time.monotonic() - start < 1.0
        # A second writer of agent a queues behind the open transaction.
        blocked: list[float] = []
        with PostgresStore(pg_url, scope="agent-a") as a2:

            def write() -> None:
                begun = time.monotonic()
                a2.put_episodic(Memory.create("a's second writer"))
                blocked.append(time.monotonic() - begun)

            thread = threading.Thread(target=write)
            thread.start()
            time.sleep(0.5)
            assert blocked == [], "a second writer of agent a did not wait"
            assert holder.process.stdin is not None
            holder.process.stdin.write("commit\n")
            holder.process.stdin.flush()
            thread.join(30)
            assert blocked and blocked[0] >= 0.5
        assert "COMMITTED" in holder.finish(30)
    finally:
        if holder.returncode is None:
            holder.kill()


@pytest.mark.slow  # 8.3 s measured on a busy machine
@pytest.mark.subprocess
@pytest.mark.crash
@pytest.mark.parametrize("holding", ["hold-transaction", "hold-busy-transaction"])
def test_a_killed_writer_leaves_no_lock_on_its_agent(pg_url: str, holding: str) -> None:
    """SIGKILL of a client in the middle of agent a's transaction (waiting for its client,
    or working on a long statement): the server rolls it back and frees a's writer lock
    at once, so the next writer of a does not wait out its lock timeout (5 s here)."""
    PostgresStore(pg_url).open().close()
    with PostgresStore(pg_url, scope="agent-a", pool=PoolSettings(lock_timeout_s=5.0)) as a:
        a.put_episodic(Memory.create("warms the pool"))
        holder = spawn_worker(holding, pg_url, "agent-a", ready="HOLDING", stdin=True)
        time.sleep(0.2)  # the busy holder is inside its statement by now
        holder.kill()
        start = time.monotonic()
        a.put_episodic(Memory.create("the next writer of agent a"))
        waited = time.monotonic() - start
        contents = {m.content for m in a.memories.page(Tier.EPISODIC)}
    print(f"{holding}: the next writer waited {waited * 1000:.0f} ms after the kill")
    assert waited < 1.5, f"the next writer of agent a waited {waited:.2f} s"
    assert "held by agent-a" not in contents and "the next writer of agent a" in contents


@pytest.mark.slow  # 1.3 s measured on a busy machine
def test_unscoped_handles_share_one_writer_lane(pg_url: str) -> None:
    """A handle of the whole store (no agent scope) may write for any agent: its writers
    queue behind each other whatever the memories' agent_id (the scratchpad budget and
    the version row are the whole store's); parallel writers use agent-scoped handles."""
    with PostgresStore(pg_url) as first, PostgresStore(pg_url) as second:
        done = threading.Event()
        with first.transaction():
            first.put_episodic(Memory.create("for a", agent_id="a"))
            thread = threading.Thread(
                target=lambda: (second.put_episodic(Memory.create("for b", agent_id="b")),
                                done.set()),
            )  # fmt: skip
            thread.start()
            assert not done.wait(0.3)
        thread.join(10)
        assert done.is_set()


# --- other processes' commits -------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("op", ["forget", "update"])
def test_a_change_in_another_process_is_seen_on_the_next_call(any_location: str, op: str) -> None:
    with AgentMemoryManager.open(any_location, embedder=None, external_change_check_ms=0) as mem:
        memory = mem.remember("the meeting is on tuesday")
        assert mem.get(memory.id) is not None  # cached now
        assert spawn_worker("change", any_location, op, memory.id, ready="DONE").finish(60)
        got = mem.get(memory.id)
        if op == "forget":
            assert got is None
            assert mem.query(limit=None) == []
        else:
            assert got is not None and got.content == "changed"


def test_with_the_default_interval_another_change_shows_within_it(pg_url: str) -> None:
    with (
        AgentMemoryManager.open(pg_url, embedder=None) as agent,
        AgentMemoryManager.open(pg_url, embedder=None) as operator,
    ):
        memory = agent.remember("kept in the cache")
        assert agent.get(memory.id) is not None
        operator.forget(memory.id)
        time.sleep(0.06)  # > external_change_check_ms (50): the version row is read again
        assert agent.get(memory.id) is None


# --- failures: typed, nothing written, no password ------------------------------------------


@pytest.mark.slow  # 1.6 s measured on a busy machine
def test_a_wrong_password_is_an_authentication_error_without_it(
    pg_server: PgServer, pg_url: str
) -> None:
    with password_role(pg_server, SECRET) as role:
        good = with_password(pg_url, role)
        with AgentMemoryManager.open(good, embedder=None) as memory:
            memory.remember("the right password opens it")
            assert SECRET not in repr(memory) and SECRET not in str(memory.statistics())
        wrong = with_password(pg_url, role, "not-the-" + SECRET)
        with pytest.raises(AuthenticationError, match="refused the credentials") as caught:
            AgentMemoryManager.open(wrong, embedder=None)
        assert SECRET not in str(caught.value) and "not-the-" not in str(caught.value)
        assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert count(pg_url, pg_server) == 1


@pytest.mark.slow
def test_a_missing_database_and_a_stopped_server(pg_server: PgServer, pg_url: str) -> None:
    missing = with_password(pg_server.url("no_such_database"))
    with pytest.raises(DatabaseMissingError, match="create it first") as caught:
        AgentMemoryManager.open(missing)
    assert SECRET not in str(caught.value)
    url = with_password(pg_url)
    with AgentMemoryManager.open(url, embedder=None) as memory:
        memory.remember("before the stop")
    with pg_server.stopped(), pytest.raises(ServerUnavailableError, match="running") as down:
        AgentMemoryManager.open(url, embedder=None)
    assert SECRET not in str(down.value)
    assert count(pg_url, pg_server) == 1


@pytest.mark.slow  # 1.2 s measured on a busy machine
def test_a_call_whose_connection_is_cut_fails_typed_and_the_next_one_works(
    pg_server: PgServer, pg_url: str
) -> None:
    url = with_password(pg_url)
    with AgentMemoryManager.open(url, embedder=None, external_change_check_ms=0) as memory:
        kept = memory.remember("before the cut")
        database = urlsplit(pg_url).path.lstrip("/")
        with pg_server.connect() as admin:
            cut = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (database,),
            ).fetchone()
        assert cut and cut[0] >= 2  # the pool's connection and the listener
        failed = 0
        for attempt in range(3):  # a dead pooled connection fails one call, then is replaced
            try:
                memory.remember(f"after the cut {attempt}")
                break
            except ConnectionLostError as exc:
                assert "nothing was written" in str(exc) and SECRET not in str(exc)
                failed += 1
        assert failed <= 1
        assert memory.get(kept.id) is not None
        assert count(pg_url, pg_server) == 2  # the failed call wrote nothing


@pytest.mark.slow
def test_an_idle_manager_carries_on_after_a_server_restart(
    pg_server: PgServer, pg_url: str
) -> None:
    url = with_password(pg_url)
    with AgentMemoryManager.open(url, embedder=None) as memory:
        before = memory.remember("before the restart")
        assert memory.get(before.id) is not None  # cached
        pg_server.restart()
        with pg_server.connect(urlsplit(pg_url).path.lstrip("/")) as other:
            other.execute("DELETE FROM tm_memories WHERE id = %s", (before.id,))
        time.sleep(2.1)  # idle longer than ping_after_s: connections are checked
        assert memory.get(before.id) is None  # the cache was dropped: changes were missed
        after = memory.remember("after the restart")
        assert memory.get(after.id) is not None
        listener = memory.store.engine._listener  # type: ignore[attr-defined]
        assert listener is not None and not listener.closed  # listening again


@pytest.mark.slow
def test_credentials_never_reach_logs_errors_reprs_or_statistics(
    pg_server: PgServer, pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = with_password(pg_url)
    caplog.set_level(logging.DEBUG, logger="tiered_memory")
    seen: list[str] = []
    quick = PoolSettings(wait_timeout_s=1.0, connect_timeout_s=1.0)
    with AgentMemoryManager.open(url, embedder=None, pool=quick) as memory:
        memory.remember("something to count")
        seen += [repr(memory), str(memory.statistics()), repr(memory.store)]
        with pg_server.stopped():
            for call in (lambda: memory.remember("while down"), lambda: memory.query()):
                with pytest.raises((ServerUnavailableError, ConnectionLostError)) as caught:
                    call()
                seen += [str(caught.value), repr(caught.value)]
    for bad in (with_password(pg_server.url("no_such_database")),):
        with pytest.raises(TieredMemoryError) as caught:
            AgentMemoryManager.open(bad)
        seen.append(str(caught.value))
    seen += [record.getMessage() for record in caplog.records]
    seen += [caplog.text]
    assert caplog.records, "nothing was logged: the check saw nothing"
    assert all(SECRET not in text for text in seen), [t for t in seen if SECRET in t]

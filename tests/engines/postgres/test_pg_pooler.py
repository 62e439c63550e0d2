"""Behind a transaction-mode pooler (PgBouncer, Supavisor, pgcat), each transaction may
run on another server session. With the pooler named (``PoolSettings(pooler=True)`` or
the URL's ``tm_pooler=transaction``) the store prepares no statement and keeps nothing in
a session: checked on a real server by reading the sessions afterwards, and by giving
every transaction a fresh session (``DISCARD ALL`` through libpq, behind psycopg's back,
as a pooler switching server sessions does) while the whole API runs, scopes hold, and
another handle sees the changes."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg import pq
from psycopg.abc import Params, Query

from persistence import InvalidInputError, PoolSettings
from persistence.locations import POOLER_PARAM, split_pooler
from persistence.postgres import connector
from persistence.postgres.empty_cache import EmptyAtVersion
from persistence.postgres.write_count import CountingConnection, CountingCursor
from tests.support.pg_server import PgServer, app_url
from tests.support.worker import HashEmbedder
from tiered_memory import AgentMemoryManager

FACTS = [f"fact number {i}: the blue door opens at {i} o'clock" for i in range(8)]


def behind_pooler(url: str) -> str:
    return f"{url}&{POOLER_PARAM}=transaction"


def open_memory(url: str, agent: str | None, **overrides: Any) -> AgentMemoryManager:
    return AgentMemoryManager.open(
        url, agent_id=agent, embedder=HashEmbedder("pooler", 16), embed_in_background=False,
        **overrides,
    )  # fmt: skip


# --- the URL parameter (no server) ---------------------------------------------------------


def test_the_url_parameter_is_taken_out_and_names_the_mode() -> None:
    url = "postgresql://u:pw@h:6432/db?sslmode=require&tm_pooler=transaction&host=/tmp/s"
    plain, pooler = split_pooler(url)
    assert pooler is True
    assert plain == "postgresql://u:pw@h:6432/db?sslmode=require&host=/tmp/s"
    assert split_pooler("postgresql://h/db?tm_pooler=Session") == ("postgresql://h/db", False)
    assert split_pooler("postgresql://h/db?sslmode=disable") == (
        "postgresql://h/db?sslmode=disable", False,
    )  # fmt: skip
    with pytest.raises(InvalidInputError, match="'transaction'") as caught:
        split_pooler("postgresql://u:secret@h/db?tm_pooler=yes")
    assert "secret" not in str(caught.value)


# --- a real server: nothing prepared, nothing in the session -------------------------------


def exercise(memory: AgentMemoryManager) -> None:
    """remember / get / recall / forget, each more often than psycopg's prepare threshold."""
    ids = [memory.remember(fact).id for fact in FACTS]
    for memory_id, fact in zip(ids, FACTS, strict=True):
        got = memory.get(memory_id)
        assert got is not None and got.content == fact
        assert [h.memory.id for h in memory.recall(fact, k=1)] == [memory_id]
    for memory_id in ids[:6]:
        assert memory.forget(memory_id)
    assert {m.id for m in memory.query(limit=None)} == set(ids[6:])


def sessions_of(memory: AgentMemoryManager) -> list[tuple[int, list[str]]]:
    """For each of the store's two pooled connections: its prepared statements' count and
    the settings made in its session."""
    pool = memory.store.engine._pool  # type: ignore[attr-defined]
    found = []
    with pool.connection() as one, pool.connection() as two:
        for conn in (one, two):
            prepared = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
            settings = conn.execute("SELECT name FROM pg_settings WHERE source = 'session'")
            found.append((int(prepared[0]), sorted(r[0] for r in settings.fetchall())))
    return found


@pytest.mark.parametrize("pooler", [True, False], ids=["pooler", "direct"])
def test_behind_a_pooler_no_statement_is_prepared_and_no_setting_lives_in_a_session(
    pg_url: str, pooler: bool
) -> None:
    pool = PoolSettings(min_size=2, max_size=2, pooler=pooler)
    with open_memory(pg_url, "agent-a", pool=pool) as memory:
        exercise(memory)
        found = sessions_of(memory)
    if pooler:
        assert found == [(0, []), (0, [])]
    else:  # the control: a direct store does both, which a pooler would break
        assert sum(prepared for prepared, _ in found) > 0
        assert all("lock_timeout" in settings for _, settings in found)


# --- a real server where every transaction gets a fresh session ----------------------------

RESETS: list[int] = []  # one entry per session reset
_IDLE = pq.TransactionStatus.IDLE
_PIPELINE_OFF = pq.PipelineStatus.OFF


def fresh_session(conn: psycopg.Connection[Any]) -> None:
    """Between transactions, reset ``conn``'s server session as a transaction pooler
    handing it another one would: settings, prepared statements, listeners gone."""
    if conn.info.transaction_status != _IDLE or conn.pgconn.pipeline_status != _PIPELINE_OFF:
        return
    result = conn.pgconn.exec_(b"DISCARD ALL")  # libpq: psycopg does not see it
    assert result.status == pq.ExecStatus.COMMAND_OK, result.error_message
    RESETS.append(1)


class FreshSessionCursor(CountingCursor):
    def execute(
        self,
        query: Query,
        params: Params | None = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> FreshSessionCursor:
        fresh_session(self.connection)
        super().execute(query, params, prepare=prepare, binary=binary)
        return self

    def executemany(
        self, query: Query, params_seq: Iterable[Params], *, returning: bool = False
    ) -> None:
        fresh_session(self.connection)
        super().executemany(query, params_seq, returning=returning)


class FreshSessionConnection(CountingConnection):
    """A connection whose every transaction starts on a reset session."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cursor_factory = FreshSessionCursor

    @contextmanager
    def pipeline(self) -> Iterator[psycopg.Pipeline]:
        fresh_session(self)
        with super().pipeline() as pipeline:
            yield pipeline


def test_the_whole_api_works_when_every_transaction_gets_a_fresh_session(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        connector, "connection_class", lambda tracer, untraced: FreshSessionConnection
    )
    resets_before = len(RESETS)
    url = behind_pooler(pg_url)
    with (
        open_memory(url, "agent-a", external_change_check_ms=50) as a,
        open_memory(url, "agent-a", external_change_check_ms=50) as other,
        open_memory(url, "agent-b") as b,
    ):
        assert a.store.engine.pooler  # type: ignore[attr-defined]
        ids = [a.remember(fact).id for fact in FACTS]
        for memory_id, fact in zip(ids, FACTS, strict=True):
            assert [h.memory.id for h in a.recall(fact, k=1)] == [memory_id]
            got = other.get(memory_id)  # another handle of the agent: cached from now on
            assert got is not None and got.content == fact
        kept = b.remember("agent b keeps its own")
        assert b.get(ids[0]) is None  # the scope holds with no setting in any session
        assert {h.memory.id for h in b.recall(FACTS[0], k=10)} == {kept.id}
        assert a.get(kept.id) is None
        assert a.forget(ids[0])
        time.sleep(0.06)  # past external_change_check_ms: the version row is read again
        assert other.get(ids[0]) is None  # the other handle's cached copy was dropped
        assert {m.id for m in other.query(limit=None)} == set(ids[1:])
    assert len(RESETS) > resets_before + 2 * len(FACTS)


# --- other scopes' commits, with no listener ------------------------------------------------
# With no listener the version rows are polled; a commit moves only its own scope's row (an
# agent's, or the unscoped one's), so the poll must cover every scope the handle reads.


@contextmanager
def unscoped_and_agent(
    pg_server: PgServer, pg_url: str
) -> Iterator[tuple[AgentMemoryManager, AgentMemoryManager]]:
    """An unscoped handle and an agent's, behind a pooler, looking at every call."""
    url = behind_pooler(app_url(pg_server, pg_url))
    with (
        open_memory(url, None, external_change_check_ms=0) as everyone,
        open_memory(url, "agent-a", external_change_check_ms=0) as agent,
    ):
        assert everyone.store.engine.pooler  # type: ignore[attr-defined]
        yield everyone, agent


def test_behind_a_pooler_an_unscoped_handle_sees_an_agents_commits(
    pg_server: PgServer, pg_url: str
) -> None:
    # main: the unscoped handle polled only its own scope's row, so its recall handed out
    # the memory as its RAM copy held it until the handle wrote itself
    with unscoped_and_agent(pg_server, pg_url) as (everyone, agent):
        fact = agent.remember(FACTS[0])
        assert [h.memory.content for h in everyone.recall(FACTS[0], k=3)] == [FACTS[0]]
        agent.update(fact.id, content="the red window closes at dusk")
        hits = everyone.recall("red window closes at dusk", k=3)
        assert [(h.memory.id, h.memory.content) for h in hits] == [
            (fact.id, "the red window closes at dusk")
        ]
        new = agent.remember("the blue door opens at noon now", supersedes=fact.id)
        seen = everyone.get(fact.id)
        assert seen is not None and seen.superseded_by == new.id


def test_behind_a_pooler_an_agents_handle_sees_the_unscoped_handles_commits(
    pg_server: PgServer, pg_url: str
) -> None:
    with unscoped_and_agent(pg_server, pg_url) as (everyone, agent):
        kept = agent.remember(FACTS[1])
        seen = agent.get(kept.id)  # in the agent's memory LRU from now on
        assert seen is not None and [h.memory.id for h in agent.recall(FACTS[1], k=3)] == [kept.id]
        assert everyone.forget(kept.id)  # the operator forgets the agent's memory
        assert agent.get(kept.id) is None
        assert agent.recall(FACTS[1], k=3) == []


@pytest.mark.parametrize(
    "tamper",
    [
        "UPDATE tm_version SET v = v - 1 WHERE scope = 'agent-a'",
        "DELETE FROM tm_version WHERE scope = 'agent-a'",
        "SELECT 1",
    ],
    ids=["another row set back by one", "another row deleted", "untouched"],
)
def test_behind_a_pooler_a_row_changed_by_hand_cannot_hide_another_scopes_commit(
    pg_url: str, tamper: str
) -> None:
    # a sum of the version rows (the first form of the poll) stayed where it was when one
    # agent's row moved up by one and another's was set back by one by hand (a tenant's
    # role may update tm_version): the unscoped handle kept the old content
    url = behind_pooler(pg_url)
    with (
        open_memory(url, None, external_change_check_ms=0) as everyone,
        open_memory(url, "agent-a", external_change_check_ms=0) as a,
        open_memory(url, "agent-b", external_change_check_ms=0) as b,
    ):
        a.remember(FACTS[2])  # agent-a's row: 1
        fact = b.remember(FACTS[0])
        seen = everyone.get(fact.id)
        assert seen is not None and seen.content == FACTS[0]  # in the unscoped handle's LRU
        b.update(fact.id, content="the red window closes at dusk")  # agent-b's row + 1
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(tamper)  # agent-a's row - 1, or gone
        again = everyone.get(fact.id)
        assert again is not None and again.content == "the red window closes at dusk"


@pytest.mark.parametrize("pooled", [True, False], ids=["pooler", "listener"])
def test_an_empty_read_that_raced_another_scopes_commit_is_not_kept(
    pg_url: str, pooled: bool
) -> None:
    # the cache compared the handle's own version row only, which another scope's commit
    # does not move: an announcement between version() and found() was lost and "empty"
    # was kept until something else committed
    url = behind_pooler(pg_url) if pooled else pg_url
    with (
        open_memory(url, None, external_change_check_ms=0) as everyone,
        open_memory(url, "agent-a", external_change_check_ms=0) as agent,
    ):
        engine = everyone.store.engine
        told: list[int] = []
        engine.on_external_change(lambda: told.append(1))  # type: ignore[attr-defined]
        cache = EmptyAtVersion(engine)  # type: ignore[arg-type]
        at = cache.version()  # taken before a read that finds nothing
        agent.remember(FACTS[3])  # meanwhile another scope commits
        deadline = time.monotonic() + 5
        while not told and time.monotonic() < deadline:
            engine.check_external_changes()  # type: ignore[attr-defined]
            time.sleep(0.02)
        assert told, "the unscoped handle never saw the agent's commit"
        cache.found(True, at)
        assert not cache.known_empty()

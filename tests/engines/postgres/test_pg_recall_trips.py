"""``recall()`` on PostgreSQL in few round trips: what it checks at every call (any
entity to name? any memory waiting for a vector? did another process commit?) costs no
round trip while the answer cannot have changed, and is asked again as soon as this
handle or another process writes. Counted through the round-trip proxy."""

from __future__ import annotations

import select
from collections.abc import Iterator
from typing import Any

import pytest

from persistence import MemoryFilter, PoolSettings
from persistence.postgres import PostgresStore
from tests.engines.postgres.test_pg_one_trip import _socket
from tests.support.round_trips import RoundTripProxy
from tests.support.worker import HashEmbedder
from tiered_memory import AgentMemoryManager, RecallSettings

pytestmark = pytest.mark.postgres

GRAPH_ON = RecallSettings(fusion="rrf", graph_weight=1.0)
QUIET = 3_600_000  # ms: no version-row look during a counted call (set per test)
STEADY = PoolSettings(min_size=2, max_size=2, ping_after_s=3600)
"""Counted calls: the pool holds the two connections recall uses at once from the start
(none opened during a count) and pings none."""


@pytest.fixture
def proxy(pg_url: str) -> Iterator[RoundTripProxy]:
    with RoundTripProxy(_socket(pg_url)) as relay:
        yield relay


def _open(url: str, **config: Any) -> AgentMemoryManager:
    return AgentMemoryManager.open(
        url, embedder=HashEmbedder("trips", 3), embed_in_background=False, extractor=None,
        recall=GRAPH_ON, recall_review_quality=None, **config,
    )  # fmt: skip


def _graph_found(hits: list) -> list[str]:  # type: ignore[type-arg]
    """Ids of the hits the graph signal brought."""
    return [h.memory.id for h in hits if any(s.signal == "graph" for s in h.explanation.signals)]


def _trips(proxy: RoundTripProxy, call: object) -> int:
    before = proxy.trips
    call()  # type: ignore[operator]
    return proxy.trips - before


def _settle(memory: AgentMemoryManager) -> None:
    """Run recall until psycopg has prepared its statements on both pooled connections.

    psycopg prepares a statement on a connection at its 5th execution there, and that
    execution costs one trip more (Parse, then Bind); which pooled connection a leg takes
    varies, so without this a counted call could be the one that prepares (1 in ~3
    runs). 40 calls give each connection each statement 5 times but for ~1e-8."""
    for _ in range(40):
        memory.recall("deploy key", k=2)


@pytest.mark.slow  # 4.2 s measured on a busy machine
def test_a_recall_without_a_graph_or_a_backlog_makes_only_its_searches(
    pg_url: str, proxy: RoundTripProxy
) -> None:
    with _open(proxy.url(pg_url), external_change_check_ms=QUIET, pool=STEADY) as memory:
        a = memory.remember("the deploy key rotates on Fridays", embedding=[1.0, 0.0, 0.0])
        memory.remember("lunch is at noon", embedding=[0.0, 1.0, 0.0])
        memory.recall("deploy key", k=2)  # the alias and queue checks: found empty
        _settle(memory)
        # keyword search, vector search, the hits' keyword parts: no alias look-up, no
        # embedding-queue read, no snapshot for the graph, and the conversation turns
        # kept from the last call (nothing committed since)
        assert [_trips(proxy, lambda: memory.recall("deploy key", k=2)) for _ in range(3)] == [
            3, 3, 3,
        ]  # fmt: skip
        memory.remember("the standup moved to ten", embedding=[0.0, 0.0, 1.0])  # a write
        after_write = _trips(proxy, lambda: memory.recall("deploy key", k=2))
        # this handle wrote: the three checks (any alias? anything to embed? anything
        # superseded?) are made again, once, and the turns read again
        assert after_write == 3 + 3 + 1
        assert _trips(proxy, lambda: memory.recall("deploy key", k=2)) == 3
        assert [h.memory.id for h in memory.recall("deploy key", k=1)] == [a.id]


@pytest.mark.slow  # 3.4 s measured on a busy machine
def test_this_handles_own_write_brings_the_graph_signal_back(
    pg_url: str, proxy: RoundTripProxy
) -> None:
    with _open(proxy.url(pg_url), external_change_check_ms=QUIET, pool=STEADY) as memory:
        memory.remember("Nothing to do with anyone", embedding=[0.0, 1.0, 0.0])
        assert _graph_found(memory.recall("the Berlin office", k=2)) == []  # cached: no alias
        stored = memory.remember(
            "She leads the sales team", relations=[("Ana", "works_in", "Berlin office")],
            embedding=[1.0, 0.0, 0.0],
        )  # fmt: skip
        hits = memory.recall("What about the berlin OFFICE?", k=2)
        assert _graph_found(hits) == [stored.id]
        assert "'Berlin office' (named in the query)" in str(hits[0].explanation)


def test_another_processes_graph_and_backlog_are_seen_after_the_change_watch(
    pg_url: str,
) -> None:
    with _open(pg_url, external_change_check_ms=0) as memory, _open(pg_url) as other:
        memory.remember("Nothing to do with anyone", embedding=[0.0, 1.0, 0.0])
        assert _graph_found(memory.recall("the Berlin office", k=2)) == []  # cached: no alias
        assert memory.store.indexes.unembedded_count() == 0
        stored = other.remember(
            "She leads the sales team", relations=[("Ana", "works_in", "Berlin office")]
        )  # no vector: it waits in the queue
        hits = memory.recall("What about the berlin OFFICE?", k=2)  # the next call sees it
        assert _graph_found(hits) == [stored.id]
        assert "'Berlin office' (named in the query)" in str(hits[0].explanation)
        # the backlog was read, not taken from the cache: recall embedded the new memory
        assert memory.store.indexes.unembedded_count() == 0
        assert memory.get(stored.id).embedding is not None  # type: ignore[union-attr]


def test_another_processes_supersession_is_seen_after_the_change_watch(pg_url: str) -> None:
    """ "Nothing is superseded" is cached like the other checks, and forgotten as soon as
    another process's write is seen: its superseded memory leaves this handle's recall."""
    with _open(pg_url, external_change_check_ms=0) as memory, _open(pg_url) as other:
        old = memory.remember("Ana lives in Lisbon", embedding=[1.0, 0.0, 0.0])
        assert [h.memory.id for h in memory.recall("where does Ana live", k=2)] == [old.id]
        assert [h.memory.id for h in memory.recall("where does Ana live", k=2)] == [old.id]
        new = other.remember("Ana lives in Porto", embedding=[1.0, 0.1, 0.0], supersedes=old.id)
        assert [h.memory.id for h in memory.recall("where does Ana live", k=2)] == [new.id]


def test_a_supersession_in_another_scope_is_seen_by_an_unscoped_handle(pg_url: str) -> None:
    """The agent's writes move the agent's version row, not the unscoped handle's: the
    change watch's announcement empties the cached "nothing is superseded" all the same."""
    with _open(pg_url, external_change_check_ms=0) as memory, _open(pg_url, agent_id="ana") as ana:
        old = ana.remember("Ana lives in Lisbon", embedding=[1.0, 0.0, 0.0])
        assert [h.memory.id for h in memory.recall("where does Ana live", k=2)] == [old.id]
        assert [h.memory.id for h in memory.recall("where does Ana live", k=2)] == [old.id]
        new = ana.remember("Ana lives in Porto", embedding=[1.0, 0.1, 0.0], supersedes=old.id)
        # The announcement travels asynchronously (as in test_pg_database's change-listener
        # test): wait until it reached the unscoped handle's listener, unread, then recall.
        listener = memory.store.engine._listener  # type: ignore[attr-defined]
        assert listener is not None
        assert select.select([listener.pgconn.socket], [], [], 5.0)[0], "no announcement came"
        assert [h.memory.id for h in memory.recall("where does Ana live", k=2)] == [new.id]


@pytest.mark.slow  # 3.6 s measured on a busy machine
def test_the_change_watch_reads_the_version_on_the_listener_in_one_trip(
    pg_url: str, proxy: RoundTripProxy
) -> None:
    store = PostgresStore(proxy.url(pg_url), change_check_interval_ms=0).open()
    other = PostgresStore(pg_url).open()
    try:
        told: list[int] = []
        store.engine.on_external_change(lambda: told.append(1))
        assert _trips(proxy, store.engine.check_external_changes) == 1  # the row, on the listener
        assert told == []
        other.set_meta("k", "v")  # another handle commits
        store.engine._listener.execute("SELECT 1")  # type: ignore[union-attr]  # swallow the notice
        store.engine._listener.pgconn.notifies()  # type: ignore[union-attr]
        store.engine.check_external_changes()
        assert told == [1]  # the row itself showed it
    finally:
        store.close()
        other.close()


def _graph_trips(memory: AgentMemoryManager, proxy: RoundTripProxy, query: str) -> int:
    search = memory._recall.graph_search
    assert search is not None
    for _ in range(12):  # every statement prepared (psycopg: at its 5th execution)
        search(query, MemoryFilter())
    return _trips(proxy, lambda: search(query, MemoryFilter()))


@pytest.mark.slow  # 4 s measured on a busy machine
def test_the_graph_signal_costs_the_same_trips_however_many_entities_it_reaches(
    pg_url: str, proxy: RoundTripProxy
) -> None:
    """One look-up of the named entities' memories, one per hop for the neighbours' (and
    their names), and the walk per named entity: not two round trips per entity."""
    with _open(proxy.url(pg_url), external_change_check_ms=QUIET, pool=STEADY) as memory:
        memory.remember("Ana and Bo met", relations=[("Ana", "knows", "Bo")])
        memory.remember("Cy works in Berlin", relations=[("Cy", "works_in", "Berlin")])
        one_each = _graph_trips(memory, proxy, "what about Ana and Cy")
        for i in range(6):  # six more neighbours of each, each named by two memories
            for name in ("Ana", "Cy"):
                for n in range(2):
                    memory.remember(f"{name} and friend {i} ({n})",
                                    relations=[(name, "knows", f"{name} friend {i}")])  # fmt: skip
        hits = memory._recall.graph_search("what about Ana and Cy", MemoryFilter())  # type: ignore[misc]
        assert len(hits.ranked) == 2 + 2 * 6 * 2  # every memory of both and their neighbours
        # 9 here (16 and 40 when each entity took two statements)
        assert _graph_trips(memory, proxy, "what about Ana and Cy") == one_each


@pytest.mark.slow  # ~5 s on a busy machine
def test_a_context_costs_the_round_trips_of_a_recall_alone(
    pg_url: str, proxy: RoundTripProxy
) -> None:
    """context() reads its sessions' rows and its turns' links once per version of the
    store: warm, it makes a recall's round trips and no more (on main it made one more
    for the turns and one per session it showed: 17 against 13 here)."""
    with AgentMemoryManager.open(
        proxy.url(pg_url), embedder=HashEmbedder("trips", 16), embed_in_background=False,
        extractor=None, recall_review_quality=None, external_change_check_ms=QUIET,
        pool=STEADY,
    ) as memory:  # fmt: skip
        for s in range(3):
            session = memory.start_session().session_id
            for t in range(8):
                who = "Ana" if t % 2 == 0 else "Bo"
                text = (f"Did you see the Berlin office in week {s} {t}?" if t % 2 == 0
                        else f"Yes, the Berlin office had a party, week {s} turn {t}")  # fmt: skip
                memory.remember(text, session_id=session, speaker=who,
                                relations=[(who, "visited", "Berlin office")])  # fmt: skip
        memory.flush()
        query = "What happened at the Berlin office party?"
        for _ in range(12):  # every statement prepared (psycopg: at its 5th execution)
            memory.recall(query, k=10)
            memory.context(query, max_tokens=1000)
        recall = _trips(proxy, lambda: memory.recall(query, k=10))
        context = _trips(proxy, lambda: memory.context(query, max_tokens=1000))
        assert len(memory.context(query, max_tokens=1000).entries) > 8  # several sessions
        assert context == recall

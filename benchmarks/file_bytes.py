"""Where a file's bytes go: SQLite's ``dbstat`` per table family, against raw sqlite-vec
holding the same vectors, ids and texts in the same run.

    .venv/bin/python -m benchmarks.file_bytes [--count 100000] [--db PATH]

Without ``--db`` it builds a file of ``--count`` memories (384-d clustered vectors, as
``benchmarks/test_recall_bench.py`` does), runs ``maintain()`` (which writes the vector
codes) and measures it; with ``--db`` it measures that file. Families: the memories'
rows (of which their float vectors), the keyword index, the vector codes, sqlite-vec's
``memory_vec`` table (files before schema 16 only), secondary indexes, and the rest.
"""

from __future__ import annotations

import argparse
import tempfile
from collections import defaultdict
from pathlib import Path

import apsw
import numpy as np

from benchmarks.raw_sql import load_sqlite_vec

_FAMILIES = (
    ("keyword index", ("memory_fts", "memory_index", "keyword_")),
    (
        "vector codes (RAM copy's, kept in the file)",
        ("vector_codes", "vector_code_packs", "vector_fit"),
    ),
    ("sqlite-vec memory_vec", ("memory_vec",)),
    ("change log", ("vector_changes",)),
    ("secondary indexes", ("idx_", "sqlite_autoindex_")),
    ("memory rows", ("scratchpad", "episodic", "semantic")),
)


def family(name: str) -> str:
    for label, prefixes in _FAMILIES:
        if name.startswith(prefixes):
            return label
    return "the rest (sessions, graph, notes, schema, ...)"


def measure(path: Path) -> tuple[dict[str, int], int, int]:
    """Bytes per family, the file's size, and the bytes of float vectors in memory rows."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    sizes: dict[str, int] = defaultdict(int)
    for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
        sizes[family(name)] += int(size)
    floats = 0
    for table in ("scratchpad", "episodic", "semantic"):
        row = conn.execute(f"SELECT coalesce(sum(length(embedding)), 0) FROM {table}").fetchone()
        floats += int(row[0]) if row else 0
    conn.close()
    return dict(sizes), path.stat().st_size, floats


def raw_sqlite_vec(path: Path, vectors: np.ndarray, texts: list[str]) -> int:
    """Bytes of a file holding only what a raw sqlite-vec store keeps: id, text, vector."""
    conn = apsw.Connection(str(path))
    load_sqlite_vec(conn)
    dim = vectors.shape[1]
    conn.execute(
        f"CREATE VIRTUAL TABLE v USING vec0(id TEXT PRIMARY KEY, embedding float[{dim}], "
        "+content TEXT)"
    )
    with conn:
        conn.executemany(
            "INSERT INTO v (id, embedding, content) VALUES (?, ?, ?)",
            (
                (f"m{i:07d}", v.tobytes(), t)
                for i, (v, t) in enumerate(zip(vectors, texts, strict=True))
            ),
        )
    conn.close()
    return path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--db", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        raw = None
        path = args.db
        if path is None:
            from benchmarks.test_recall_bench import _build
            from tiered_memory import AgentMemoryManager

            path = Path(tmp) / "bench.db"
            vectors = _build(path, args.count)
            with AgentMemoryManager.open(path, embedder=None) as memory:
                memory.maintain()
            conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
            texts = [r[0] for r in conn.execute("SELECT content FROM episodic ORDER BY id")]
            conn.close()
            raw = raw_sqlite_vec(Path(tmp) / "raw.db", vectors, texts)
        sizes, total, floats = measure(path)
        count = args.count if args.db is None else None
        print(f"{path}: {total / 1e6:.1f} MB" + (f", {count:,} memories" if count else ""))
        for label, size in sorted(sizes.items(), key=lambda kv: -kv[1]):
            per = f"  {size / count:7.0f} B/memory" if count else ""
            print(f"  {label:<46} {size / 1e6:8.1f} MB{per}")
            if label == "memory rows":
                print(f"    {'of which float vectors':<44} {floats / 1e6:8.1f} MB")
        if raw is not None:
            print(f"  raw sqlite-vec (id, vector, text) in the same run: {raw / 1e6:.1f} MB "
                  f"({total / raw:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()

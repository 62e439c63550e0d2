"""A keyword search through a narrow filter's rows (a session, an agent's few memories)
at scale: the library's statement (one FTS5 walk over the rows' range, the rows picked
outside FTS5) against the earlier one (``rowid IN (...)`` handed to FTS5: one query per
row, each weighing every query word again), same file, same rows, same queries.

    .venv/bin/python -m benchmarks.narrow_keyword --file DIR/memories_1000000.db

``--file``: a file ``benchmarks/million.py`` built (words ``w1`` ... ``w5000``, drawn as
in text). Rows are spread evenly over the file (the worst case for the range); prints
each case's times and the ratio, and checks both give the same rows and scores.
"""

from __future__ import annotations

import argparse
import time

import apsw
import orjson

from persistence.records import MemoryFilter
from persistence.sqlite.sql import index_sql
from persistence.sqlite.sql.index_sql import fts5_match

EARLIER = (
    "SELECT i.memory_id, bm25(memory_fts, 1.0, ?, ?) AS score FROM memory_fts "
    "JOIN memory_index AS i ON i.rowid = memory_fts.rowid "
    "WHERE memory_fts MATCH ? AND memory_fts.rowid IN (SELECT value FROM json_each(?)) "
    "ORDER BY score, memory_fts.rowid LIMIT ?"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", required=True)
    parser.add_argument("--rows", default="3,50,400", help="how many accepted rows")
    args = parser.parse_args()
    conn = apsw.Connection(
        f"file:{args.file}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    )
    top = int(conn.execute("SELECT max(rowid) FROM memory_index").fetchone()[0])
    queries = [
        tuple(f"w{i}" for i in range(1, 13)),
        ("w3000", "w4000", "w1", "w2"),
        ("w2500", "w4999"),
    ]
    print("| rows | words | now ms | earlier ms | earlier / now |")
    print("| --- | --- | --- | --- | --- |")
    for n in (int(x) for x in args.rows.split(",")):
        rowids = [1 + k * (top - 2) // max(n - 1, 1) for k in range(n)]
        for words in queries:
            now = index_sql.search(
                fts5_match(words), 100, MemoryFilter(session_id="x"), 0.5, 0.5, rowids
            )
            start = time.perf_counter()
            got = conn.execute(now.sql, now.params).fetchall()
            mid = time.perf_counter()
            ids = orjson.dumps(rowids).decode()
            before = conn.execute(EARLIER, (0.5, 0.5, fts5_match(words), ids, 100)).fetchall()
            end = time.perf_counter()
            assert got == before, (n, words)
            a, b = (mid - start) * 1000, (end - mid) * 1000
            print(f"| {n} | {len(words)} | {a:.1f} | {b:.1f} | {b / max(a, 1e-6):.1f}x |")


if __name__ == "__main__":
    main()

"""The backends table, as a benchmark file: ``benchmarks/backends_table.py`` run once at
one size (2,000 memories; 200 in smoke mode, with two writer processes at most and one
client process).

Run the real comparison as a script (sizes of your choice)::

    .venv/bin/python -m benchmarks.backends_table --sizes 10000,100000
"""

from __future__ import annotations

import re

from benchmarks.backends_table import (
    COLUMNS,
    FLOOR,
    HNSW_INSERT,
    LANGGRAPH,
    TM_PG,
    TM_SQLITE,
    parse_settings,
    run,
)
from benchmarks.smoke import size, smoke

NUMBER = re.compile(r"[\d,.]+ (ms|/s)( / [\d.]+ ms)?|[01]\.\d{3}")


def test_backends_table() -> None:
    sizes, settings = parse_settings([
        "--sizes", str(size(2000, 200)), "--queries", str(size(100, 5)),
        "--writes", str(size(200, 5)), "--gets", str(size(300, 5)),
        "--write-seconds", "0.3" if smoke() else "3",
        "--processes", "1,2" if smoke() else "1,2,4,8",
        "--clients", "1" if smoke() else "1,2,4",
    ])  # fmt: skip
    assert sizes == [size(2000, 200)] and settings.clients == ((1,) if smoke() else (1, 2, 4))
    table = run(sizes, settings, out=lambda line: None)
    print("\n" + table)
    header, *lines = table.split("\n\n")[0].splitlines()
    assert all(column in header for column in COLUMNS)
    clients = [line for line in lines if line[0].isdigit()]
    assert len(lines) - len(clients) == 9 + len(settings.processes)
    for n in settings.clients:  # writes/s and recall p50: direct, pooler mode, [PgBouncer]
        assert len([c for c in clients if c.startswith(f"{n} client")]) in (4, 6), clients
    for line in lines:
        cells = re.split(r"\s{2,}", line.strip())[1:]
        sqlite, postgres, langgraph, floor = dict(zip(COLUMNS, cells, strict=True)).values()
        if line.startswith(HNSW_INSERT):  # the floor's own row
            assert sqlite == postgres == langgraph == "–" and NUMBER.fullmatch(floor), line
            continue
        if line in clients:  # PostgreSQL only; the pooler rows are tiered-memory's alone
            assert sqlite == "–" and NUMBER.fullmatch(postgres), line
            pooler = "pooler mode" in line
            assert langgraph == floor == "–" if pooler else NUMBER.fullmatch(langgraph), line
            assert pooler or NUMBER.fullmatch(floor), line
            continue
        assert NUMBER.fullmatch(sqlite), (TM_SQLITE, line)
        assert NUMBER.fullmatch(langgraph), (LANGGRAPH, line)
        assert NUMBER.fullmatch(postgres) or postgres.startswith("n/a ("), (TM_PG, line)
        assert NUMBER.fullmatch(floor) or floor == "–", (FLOOR, line)

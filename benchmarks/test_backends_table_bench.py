"""The backends table, as a benchmark file: ``benchmarks/backends_table.py`` run once at
one size (2,000 memories; 200 in smoke mode, with two writer processes at most).

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
    Settings,
    run,
)
from benchmarks.smoke import size, smoke

NUMBER = re.compile(r"[\d,.]+ (ms|/s)( / [\d.]+ ms)?|[01]\.\d{3}")


def test_backends_table() -> None:
    settings = Settings(
        queries=size(100, 5), writes=size(200, 5), gets=size(300, 5),
        write_seconds=0.3 if smoke() else 3.0,
        processes=(1, 2) if smoke() else (1, 2, 4, 8),
    )  # fmt: skip
    table = run([size(2000, 200)], settings, out=lambda line: None)
    print("\n" + table)
    header, *lines = table.split("\n\n")[0].splitlines()
    assert all(column in header for column in COLUMNS)
    assert len(lines) == 9 + len(settings.processes)
    for line in lines:
        cells = re.split(r"\s{2,}", line.strip())[1:]
        sqlite, postgres, langgraph, floor = dict(zip(COLUMNS, cells, strict=True)).values()
        if line.startswith(HNSW_INSERT):  # the floor's own row
            assert sqlite == postgres == langgraph == "–" and NUMBER.fullmatch(floor), line
            continue
        assert NUMBER.fullmatch(sqlite), (TM_SQLITE, line)
        assert NUMBER.fullmatch(langgraph), (LANGGRAPH, line)
        assert NUMBER.fullmatch(postgres) or postgres.startswith("n/a ("), (TM_PG, line)
        assert NUMBER.fullmatch(floor) or floor == "–", (FLOOR, line)

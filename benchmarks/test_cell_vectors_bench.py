"""The vector cells against the RAM copy, as a benchmark file: ``benchmarks/cell_vectors.py``
run once (3,000 vectors in smoke mode: one cell; 30,000 otherwise: 173 cells), each index
in a fresh process.

Run the real comparison as a script (the file kept in ``--dir``, outside the repository)::

    .venv/bin/python -m benchmarks.cell_vectors --dir /somewhere/big --count 100000
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.cell_vectors import ROOT
from benchmarks.smoke import size


def test_cell_vectors(tmp_path: Path) -> None:
    count = size(30_000, 3_000)
    command = [sys.executable, "-m", "benchmarks.cell_vectors", "--dir", str(tmp_path),
               "--count", str(count), "--queries", str(size(100, 20)), "--no-record"]  # fmt: skip
    out = subprocess.run(
        command, capture_output=True, text=True, check=True, timeout=1800, cwd=ROOT
    ).stdout
    print(out)
    record = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    for kind in ("ram", "cells"):
        row = record[kind]
        searches = [value for value in row.values() if isinstance(value, dict)]
        assert len(searches) == 5  # plain, then two narrow filters and two wide
        assert all(search["answered_by"] == [kind] for search in searches)
        assert row["rss_mib"] >= row["above_bare_mib"] > 0 and row["open_first_ms"] > 0
        assert all(0 < search["p50"] <= search["p99"] for search in searches)
        assert min(search["recall"] for search in searches) >= 0.9, (kind, row)

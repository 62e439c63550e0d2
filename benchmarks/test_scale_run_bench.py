"""Issue 46's scale run as a benchmark file: ``benchmarks/scale_run.py`` run once (its
``--smoke`` mode at 2,000 memories in smoke mode, 20,000 memories otherwise), every
part in a fresh process.

Run the real one as a script (files kept in ``--dir``, outside the repository)::

    .venv/bin/python -m benchmarks.scale_run --dir /somewhere/big --sizes 100000,1000000
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.scale_run import ROOT, TARGETS
from benchmarks.smoke import smoke


def test_scale_run(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "benchmarks.scale_run", "--dir", str(tmp_path), "--no-record"]
    command += ["--smoke"] if smoke() else ["--sizes", "20000", "--writes", "1000"]
    out = subprocess.run(
        command, capture_output=True, text=True, check=True, timeout=1800, cwd=ROOT
    ).stdout
    print(out)
    record = json.loads(out.strip().splitlines()[-1])
    (row,) = record["sizes"]
    assert set(TARGETS) <= set(row) and record["vector_index"] == "ram"
    assert row["count"] == (2_000 if smoke() else 20_000) and row["file_mib"] > 0
    assert 0 < row["recall_p50_ms"] <= row["recall_p99_ms"]
    assert 0 < row["keyword_p50_ms"] <= row["keyword_p99_ms"]
    assert row["rss_writes_mib"] >= row["rss_first_mib"] > 0 and row["remember_vs_floor"] > 0
    # The RAM copy compares exactly at this size: any miss is a wrong answer.
    assert row["vector_recall"] == row["vector_recall_filtered"] == 1.0, row
    assert 0.05 < row["filter_share"] < 0.15
    assert "| figure | 2,000 |" in out or "| figure | 20,000 |" in out

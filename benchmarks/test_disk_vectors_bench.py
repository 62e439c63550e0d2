"""Issue 46's vector-stage spike, as a benchmark file: ``benchmarks/disk_vectors.py`` run
once (2,000 vectors in smoke mode, 20,000 otherwise), each design in a fresh process.

Run the real comparison as a script (files kept in ``--dir``, outside the repository)::

    .venv/bin/python -m benchmarks.disk_vectors --dir /somewhere/big --count 1000000
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.disk_vectors import DESIGNS, ROOT
from benchmarks.smoke import size, smoke


def test_disk_vectors(tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "benchmarks.disk_vectors",
        "--dir",
        str(tmp_path),
        "--no-record",
    ] + (["--smoke"] if smoke() else ["--count", str(size(20_000, 0))])
    out = subprocess.run(
        command, capture_output=True, text=True, check=True, timeout=1800, cwd=ROOT
    ).stdout
    print(out)
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [r["kind"] for r in records] == ["clustered", "random"]
    for record in records:
        rows = {row["design"]: row for row in record["designs"]}
        assert list(rows) == list(DESIGNS)
        # The floors are exact: any miss is a wrong answer, not an approximation.
        for floor in ("exact", "vec0-float"):
            assert rows[floor]["recall"] == rows[floor]["filtered_recall"] == 1.0, floor
        for row in rows.values():
            assert row["rss_mib"] >= row["rss_above_mib"] > 0 and row["open_first_ms"] > 0
            assert 0 < row["p50_ms"] <= row["p99_ms"]
        # Today's codes meet the quality bar on both sets (they do at 100k too).
        assert min(rows["A"]["recall"], rows["A"]["filtered_recall"]) >= 0.95, rows["A"]
        assert set(record["table_bytes"]) >= {"a_packs", "b_int8", "b_bit", "c_codes", "vectors"}

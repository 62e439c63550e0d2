"""Open + first recall phase by phase, as a benchmark file: ``benchmarks/open_first.py``
run once (its ``--smoke`` mode at 2,000 memories, one round; 20,000 memories and two
rounds otherwise), each measurement in a fresh process.

Run the real one as a script (files kept in ``--dir``, outside the repository)::

    .venv/bin/python -m benchmarks.open_first --dir /somewhere/big --sizes 100000,1000000
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.open_first import ROOT
from benchmarks.smoke import smoke


def test_open_first(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "benchmarks.open_first", "--dir", str(tmp_path), "--no-record"]
    command += ["--smoke"] if smoke() else ["--sizes", "20000", "--rounds", "2"]
    out = subprocess.run(
        command, capture_output=True, text=True, check=True, timeout=1800, cwd=ROOT
    ).stdout
    print(out)
    record = json.loads(out.strip().splitlines()[-1])
    rows = {(r["code"], r["index"], r["state"]): r for r in record["rows"]}
    assert {k for k in rows if k[0] == "now"} == {
        ("now", index, state) for index in ("cells", "ram") for state in ("cold", "warm")
    }
    for (code, _, state), row in rows.items():
        if code == "raw":
            assert row["total_ms"] > 0 and row["rows"] > 0  # the words are in the file
            continue
        assert 0 < row["open_ms"] < row["total_ms"] and row["first_ms"] > 0
        assert row["peak_mib"] > 0 and (row["model_ms"] == 0) == (state == "warm")

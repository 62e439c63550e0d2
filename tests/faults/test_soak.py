"""``benchmarks/soak.py`` in small, on both engines: threads and processes on one store,
checked against their journals, the run's figures appended to a ledger (the script
exits 1 when a write was lost or any call failed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("engine", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_soak_runs_on_the_engine_and_writes_its_ledger_row(engine: str, tmp_path: Path) -> None:
    ledger = tmp_path / "soak_ledger.jsonl"
    command = [sys.executable, "benchmarks/soak.py", "--engine", engine, "--threads", "2",
               "--processes", "2", "--seconds", "4", "--ledger", str(ledger)]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "lost 0," in done.stdout and "integrity ok" in done.stdout, done.stdout
    (row,) = [orjson.loads(line) for line in ledger.read_bytes().splitlines()]
    assert row["engine"] == engine
    assert (row["threads"], row["processes"]) == (2, 2)
    assert row["calls"] > 0 and row["acknowledged"] > 0
    assert row["ops"]["remember"] > 0 and row["ops"]["recall"] > 0
    assert (row["lost"], row["phantoms"], row["duplicates"], row["resurrected"]) == (0, 0, 0, 0)
    assert row["integrity_ok"] is True and row["failed"] is False
    assert row["failed_calls"] == {} and row["raw_exceptions"] == 0

"""Every benchmark still runs: ``pytest benchmarks/ --smoke`` in a subprocess (each
benchmark once, at a tiny size; nothing is timed or judged)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_every_benchmark_runs_once_in_smoke_mode(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "benchmarks/", "--smoke", "-q", "-p", "no:cacheprovider",
         f"--basetemp={tmp_path / 'bench'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+ passed in [\d.]+s( \(.*\))?", summary), summary  # none skipped
    defined = sum(
        len(re.findall(r"^def test_", path.read_text(), flags=re.M))
        for path in (ROOT / "benchmarks").glob("test_*.py")
    )
    assert int(summary.split()[0]) >= defined > 0

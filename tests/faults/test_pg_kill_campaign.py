"""``benchmarks/pg_kill_campaign.py`` in small: a few client SIGKILLs and server crashes
against a server of its own, every check at 0 (the campaign exits 1 when one fails)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.crash, pytest.mark.subprocess, pytest.mark.slow, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]


def test_the_campaign_kills_crashes_and_finds_nothing_lost(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    command = [sys.executable, "benchmarks/pg_kill_campaign.py", "--kills", "4",
               "--server-crashes", "2", "--seed", "5", "--ledger", str(ledger)]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    summary = done.stdout.splitlines()[0] if done.stdout else ""
    assert done.returncode == 0, (summary, done.stderr[-3000:])
    assert summary.startswith("pg_kill_campaign: 4 client kills and 2 server crashes"), summary
    for check in ("lost", "phantoms", "partial batches", "raw exceptions", "not recovered"):
        assert re.search(rf"\b{check} 0\b", summary), (check, summary)
    assert re.search(r"ops verified [1-9]", summary), summary
    assert '"server_crashes":2' in ledger.read_text()

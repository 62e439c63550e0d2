"""The README's quick start and the demo run as a newcomer would run them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tiered_memory import AgentMemoryManager

ROOT = Path(__file__).resolve().parent.parent


def test_quick_start_runs_verbatim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (ROOT / "README.md").read_text()
    [code] = re.findall(r"```python\n(.*?)```", readme, flags=re.S)[:1]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    assert (tmp_path / "agent.db").exists()
    with AgentMemoryManager.open(tmp_path / "agent.db", embedder=None) as memory:
        stats = memory.statistics().storage  # it forgot the memory, not its promotion
        assert stats.promotion_count >= 1 and stats.forgotten_count >= 1


def test_demo_runs_and_shows_what_survived_a_restart(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tiered_memory.demo", str(tmp_path / "demo.db")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "scratchpad goal: Ship v1 on Friday" in result.stdout
    assert "'The user prefers dark mode' in semantic" in result.stdout
    assert "promotion log: episodic -> semantic (confirmed)" in result.stdout
    first_hit = result.stdout.split("recall(")[1].splitlines()[1]
    assert "The user prefers dark mode" in first_hit
    assert "why: keyword #" in result.stdout

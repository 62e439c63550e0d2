"""The README's quick start and the demo run as a newcomer would run them."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tiered_memory
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


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


def test_every_readme_example_runs_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = _python_blocks()
    assert len(blocks) >= 2
    for n, code in enumerate(blocks):
        exec(compile(code, f"README.md python block {n + 1}", "exec"), {})


def test_every_name_the_readme_uses_is_exported_by_tiered_memory() -> None:
    """Names imported in the README's code blocks (from ``tiered_memory`` or
    ``persistence``) and classes named in its prose come from the top-level package."""
    imported: set[str] = set()
    for code in _python_blocks():
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.ImportFrom) and node.module in ("tiered_memory", "persistence"):
                imported |= {alias.name for alias in node.names}
    assert {"AgentMemoryManager", "RecallSettings", "EmbedderError"} <= imported
    prose = re.sub(r"```.*?```", "", (ROOT / "README.md").read_text(), flags=re.S)
    named = set(re.findall(r"`(?:tiered_memory\.|persistence\.)?([A-Z]\w*[a-z]\w*)[`(.]", prose))
    missing = sorted(name for name in imported | named if name not in tiered_memory.__all__)
    assert missing == [], f"README names what tiered_memory does not export: {missing}"
    for name in imported | named:
        getattr(tiered_memory, name)  # importable from the top-level package itself
    assert issubclass(tiered_memory.EmbedderError, tiered_memory.TieredMemoryError)

"""The README's quick start and the demo run as a newcomer would run them."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tiered_memory
from tiered_memory import AgentMemoryManager

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # 1.6 s measured on a busy machine
def test_quick_start_runs_verbatim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (ROOT / "README.md").read_text()
    [code] = re.findall(r"```python\n(.*?)```", readme, flags=re.S)[:1]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    assert (tmp_path / "agent.db").exists()
    with AgentMemoryManager.open(tmp_path / "agent.db", embedder=None) as memory:
        stats = memory.statistics().storage  # it forgot the memory, not its promotion
        assert stats.promotion_count >= 1 and stats.forgotten_count >= 1


@pytest.mark.slow  # 5.4 s measured on a busy machine
@pytest.mark.subprocess
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


@pytest.mark.slow
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


def test_the_readme_points_only_at_files_inside_the_repository() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "../shared" not in readme
    paths = set(re.findall(r"(?<![\w/.])((?:\.\./)?[\w.-]+(?:/[\w.-]+)+\.(?:py|md))", readme))
    assert "benchmarks/eval_locomo.py" in paths
    assert sorted(p for p in paths if not (ROOT / p).is_file()) == []


LOCOMO_LIKE = [
    {
        "sample_id": "conv-test",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy named Biscuit."},
                {"speaker": "Bob", "dia_id": "D1:2", "text": "I started learning the violin."},
                {"speaker": "Ann", "dia_id": "D1:3", "text": "The weather was rainy all week."},
            ],
            "session_2_date_time": "9:00 am on 20 May, 2023",
            "session_2": [
                {"speaker": "Bob", "dia_id": "D2:1", "text": "My violin teacher is strict."},
                {"speaker": "Ann", "dia_id": "D2:2", "text": "Biscuit chewed my shoes today."},
            ],
        },
        "qa": [
            {
                "question": "What is the name of Ann's puppy?",
                "answer": "Biscuit",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "Which instrument is Bob learning?",
                "answer": "violin",
                "evidence": ["D1:2", "D2:1"],
                "category": 1,
            },
        ],
    }
]  # made-up conversation in LoCoMo's format (the real data is not in the repository)


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_locomo_evaluation_runs_from_the_repository(tmp_path: Path) -> None:
    data = tmp_path / "tiny-locomo.json"
    data.write_text(json.dumps(LOCOMO_LIKE))
    result = subprocess.run(
        [sys.executable, "benchmarks/eval_locomo.py", "--data", str(data),
         "--retriever", "benchmarks/locomo_adapter.py:TieredMemoryAdapter"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "1 conversations, 5 memories (turns), 2 questions" in result.stdout
    assert "| tiered-memory | overall (1-4) | 2 | 1.000 |" in result.stdout


@pytest.mark.subprocess
def test_the_locomo_evaluation_says_where_to_get_the_data(tmp_path: Path) -> None:
    clone = tmp_path / "clone" / "benchmarks"  # no ../shared beside this one
    clone.mkdir(parents=True)
    shutil.copy(ROOT / "benchmarks" / "eval_locomo.py", clone)
    for args in ((), ("--data", str(tmp_path / "missing.json"))):
        result = subprocess.run([sys.executable, str(clone / "eval_locomo.py"), *args],
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        assert result.returncode == 1
        assert "github.com/snap-research/LoCoMo" in result.stderr and "--data" in result.stderr

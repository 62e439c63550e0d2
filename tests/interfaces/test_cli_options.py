"""The command line's shape: the group's options after the command too, ``python -m
tiered_memory``, and ``search --reinforce`` doing what its help says. Real subprocesses."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import FakeClock
from tests.interfaces.test_cli import CLI
from tiered_memory import AgentMemoryManager

pytestmark = [pytest.mark.subprocess]


def run(*args: str, module: bool = False) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tiered_memory"] if module else [CLI]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def vault(tmp_path: Path) -> tuple[Path, Path]:
    db, key = tmp_path / "vault.db", tmp_path / "vault.key"
    key.write_text("secret key\n")
    with AgentMemoryManager.open(db, key=b"secret key", embedder=None) as memory:
        memory.remember("ann's note", agent_id="ann")
        memory.remember("bob's note", agent_id="bob")
    return db, key


@pytest.mark.slow  # 47.4 s measured on a busy machine
def test_key_file_and_agent_are_taken_after_the_command(vault: tuple[Path, Path]) -> None:
    db, key = vault
    for args in (
        ("--key-file", str(key), "stats", str(db), "--json"),
        ("stats", str(db), "--key-file", str(key), "--json"),
        ("stats", str(db), f"--key-file={key}", "--json"),
        ("stats", "--key-file", str(key), str(db), "--json"),
    ):
        result = run(*args)
        assert result.returncode == 0, (args, result.stderr)
        assert orjson.loads(result.stdout)["storage"]["episodic_count"] == 2
    scoped = run("list", str(db), "--json", "--key-file", str(key), "--limit", "5")
    assert len(orjson.loads(scoped.stdout)) == 2
    # `list` keeps --agent as its own filter; the group's --agent scopes the handle
    for args in (("list", str(db), "--agent", "ann"), ("--agent", "ann", "list", str(db))):
        result = run(*args, "--key-file", str(key), "--json")
        assert result.returncode == 0, result.stderr
        assert [m["content"] for m in orjson.loads(result.stdout)] == ["ann's note"]
    result = run("stats", str(db), "--agent", "bob", "--key-file", str(key), "--json")
    assert orjson.loads(result.stdout)["storage"]["episodic_count"] == 1
    missing = run("stats", str(db), "--json")
    assert missing.returncode == 1 and "encrypted" in missing.stderr


def test_python_dash_m_is_the_command(vault: tuple[Path, Path]) -> None:
    db, key = vault
    version = run("--version", module=True)
    assert version.returncode == 0 and version.stdout.startswith("tiered-memory, version")
    result = run("stats", str(db), "--key-file", str(key), "--json", module=True)
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["storage"]["episodic_count"] == 2
    usage = run("nonsense", module=True)
    assert usage.returncode == 2 and "Usage: tiered-memory" in usage.stderr


@pytest.mark.slow
def test_search_reinforce_does_what_its_help_says(tmp_path: Path) -> None:
    help_text = " ".join(run("search", "--help").stdout.split())
    assert "due for review counts as a successful review" in help_text
    db = tmp_path / "r.db"
    clock = FakeClock(int(time.time() * 1000) - 60 * 86_400_000)  # two months ago: due
    with AgentMemoryManager.open(db, clock=clock, embedder=None) as memory:
        due = memory.remember("the user prefers dark mode")
        clock.now = int(time.time() * 1000)
        fresh = memory.remember("dark mode on the phone too")  # not due for days
    result = run("search", str(db), "dark mode", "--reinforce", "--keywords-only", "--json")
    assert result.returncode == 0, result.stderr
    assert {h["memory"]["id"] for h in orjson.loads(result.stdout)} == {due.id, fresh.id}
    with AgentMemoryManager.open(db, read_only=True, embedder=None) as memory:
        assert memory.schedule(due.id).review_count == 1  # type: ignore[union-attr]
        assert memory.get(due.id).access_count == 1  # type: ignore[union-attr]
        assert memory.schedule(fresh.id).review_count == 0  # type: ignore[union-attr]

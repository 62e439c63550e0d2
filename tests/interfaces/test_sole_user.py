"""Operators cannot break a running agent: an operation that needs the file to itself
(``rekey``) is refused while another process or handle has it open, and the ones that do
not (restore, ``maintain(vacuum=True)``) leave the agent working. A real second process
holds the file open."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw
import pytest

from persistence import DatabaseBusyError, DatabaseInUseError
from tests.interfaces.test_cli import CLI
from tiered_memory import AgentMemoryManager

pytestmark = [pytest.mark.subprocess]

AGENT = """
import sys
from tiered_memory import AgentMemoryManager
memory = AgentMemoryManager.open(sys.argv[1], key=sys.argv[2], embedder=None)
print("READY", len(memory.query(limit=500)), flush=True)
for line in sys.stdin:
    try:
        memory.remember("written after " + line.strip())
        found = len(memory.query(limit=500))
        hits = len(memory.recall("written", k=3))
        ok = memory.check_integrity().ok
        print("OK", found, hits, ok, flush=True)
    except Exception as exc:
        print("FAIL", type(exc).__name__, str(exc).splitlines()[0], flush=True)
try:
    memory.close()
except Exception as exc:  # the key changed under it: closing says so too
    print("CLOSE", type(exc).__name__, flush=True)
"""


class Agent:
    """A second process with the file open, reading and writing on request."""

    def __init__(self, db: Path, key: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", AGENT, str(db), key],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        ready = self.readline()
        assert ready.startswith("READY"), ready
        self.count = int(ready.split()[1])

    def readline(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def work(self, label: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(label + "\n")
        self.process.stdin.flush()
        return self.readline()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        assert self.process.wait(timeout=60) == 0


@contextmanager
def running_agent(db: Path, key: str = "k1") -> Iterator[Agent]:
    agent = Agent(db, key)
    try:
        yield agent
    finally:
        agent.close()


@pytest.fixture
def encrypted_db(tmp_path: Path) -> Path:
    db = tmp_path / "enc.db"
    with AgentMemoryManager.open(db, key="k1", embedder=None) as memory:
        for i in range(40):
            memory.remember(f"memory {i} about the garden")
    return db


@pytest.mark.slow  # 3.0 s measured on a busy machine
def test_rekey_is_refused_while_another_process_has_the_file_open(encrypted_db: Path) -> None:
    before = encrypted_db.read_bytes()
    with running_agent(encrypted_db) as agent:
        with (
            AgentMemoryManager.open(encrypted_db, key="k1", embedder=None) as memory,
            pytest.raises(DatabaseInUseError, match=r"process\(es\) \d+ have it open"),
        ):
            memory.rekey("k2")
        reply = agent.work("one")
        assert reply == f"OK {agent.count + 1} 1 True", reply
    # refused means unchanged: the old key still opens it and the agent's write is there
    with AgentMemoryManager.open(encrypted_db, key="k1", embedder=None) as memory:
        assert len(memory.query(limit=500)) == 41
        memory.rekey("k2")  # alone now: allowed
    with AgentMemoryManager.open(encrypted_db, key="k2", embedder=None) as memory:
        assert len(memory.query(limit=500)) == 41
    assert encrypted_db.read_bytes() != before


def test_rekey_is_refused_while_another_handle_of_this_process_is_open(
    encrypted_db: Path,
) -> None:
    with AgentMemoryManager.open(encrypted_db, key="k1", embedder=None) as reader:
        with (
            AgentMemoryManager.open(encrypted_db, key="k1", embedder=None) as memory,
            pytest.raises(DatabaseInUseError, match="other handle"),
        ):
            memory.rekey("k2")
        assert len(reader.query(limit=500)) == 40
    assert issubclass(DatabaseInUseError, DatabaseBusyError)


@pytest.mark.slow  # 6.8 s measured on a busy machine
def test_the_cli_rekey_refuses_with_one_clear_line(encrypted_db: Path, tmp_path: Path) -> None:
    (tmp_path / "k1").write_text("k1\n")
    (tmp_path / "k2").write_text("k2\n")
    args = ["--key-file", str(tmp_path / "k1"), "rekey", str(encrypted_db),
            "--new-key-file", str(tmp_path / "k2")]  # fmt: skip
    with running_agent(encrypted_db) as agent:
        result = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)
        assert result.returncode == 1
        assert "needs" in result.stderr and "to itself" in result.stderr
        said = result.stderr.replace(str(encrypted_db), "DB")  # (a folder may say "damage")
        assert "damage" not in said and "Traceback" not in said
        assert agent.work("two").startswith("OK")
    result = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


@pytest.mark.slow  # 5.0 s measured on a busy machine
def test_restore_and_vacuum_keep_a_running_agent_working(
    encrypted_db: Path, tmp_path: Path
) -> None:
    """The two need no exclusivity: the agent sees the restored content, and no false
    damage report."""
    other = tmp_path / "other.db"
    with AgentMemoryManager.open(other, key="k1", embedder=None) as memory:
        for i in range(70):
            memory.remember(f"another memory {i}")
        snapshot = memory.backup(tmp_path / "snap.db")
    with running_agent(encrypted_db) as agent:
        assert agent.count == 40
        with AgentMemoryManager.open(encrypted_db, key="k1", embedder=None) as memory:
            memory.maintain(vacuum=True)
        assert agent.work("a") == "OK 41 1 True"
        with AgentMemoryManager.open(encrypted_db, key="k1", embedder=None) as memory:
            assert memory.restore(snapshot).memories == 70
        assert agent.work("b") == "OK 71 1 True"


@pytest.mark.slow  # 1.8 s measured on a busy machine
def test_a_key_changed_under_a_running_agent_is_not_reported_as_damage(
    encrypted_db: Path,
) -> None:
    """Another tool (or an older tiered-memory) rekeys behind the check: the agent's next
    call says its key no longer opens the file, never that the file is damaged."""
    with running_agent(encrypted_db) as agent:
        conn = apsw.Connection(str(encrypted_db))
        conn.pragma("hexkey", b"k1".hex())
        conn.pragma("hexrekey", b"k2".hex())
        conn.close()
        reply = agent.work("three")
        assert reply.startswith("FAIL EncryptionKeyError"), reply
        assert "no longer decrypts with the key this handle holds" in reply
        assert "damage (" not in reply

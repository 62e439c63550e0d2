"""`tiered-memory serve` as a real process: a busy port is a one-line error before anything
is announced, and SIGTERM closes the database as Ctrl-C does (no -wal/-shm left)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import file_digest
from tests.support.inspector_server import CLI, ROOT, announced_port, wait_for_port
from tiered_memory import AgentMemoryManager

pytestmark = pytest.mark.subprocess


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "agent.db"
    with AgentMemoryManager.open(path, embedder=None, embed_in_background=False) as memory:
        memory.remember("The spare key is under the red pot")
    assert not Path(f"{path}-wal").exists()
    return path


def serve(db: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CLI, "serve", str(db), "--keywords-only", *args],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_a_busy_port_is_a_one_line_error_before_anything_is_announced(db: Path) -> None:
    before = file_digest(db)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = serve(db, "--port", str(port))
        stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 1, stderr
    assert "serving" not in stderr and stdout == ""
    assert f"127.0.0.1:{port}" in stderr and "--port" in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert file_digest(db) == before
    assert not Path(f"{db}-wal").exists() and not Path(f"{db}-shm").exists()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_stop_signal_closes_the_database(db: Path, stop: signal.Signals) -> None:
    before = file_digest(db)
    process = serve(db, "--port", "0")
    try:
        port, _ = announced_port(process)
        wait_for_port("127.0.0.1", port)
        assert Path(f"{db}-wal").exists()  # the server holds the file open
    finally:
        process.send_signal(stop)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
    if stop is signal.SIGTERM:
        assert process.returncode == 0
    assert not Path(f"{db}-wal").exists() and not Path(f"{db}-shm").exists()
    assert file_digest(db) == before


def test_port_zero_announces_the_port_it_got(db: Path) -> None:
    process = serve(db, "--port", "0")
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
        assert port > 0
        wait_for_port("127.0.0.1", port)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)

"""SIGKILL during backup, restore and import: the file is the old one or the new one.

A worker opens the database, says ``GO``, then runs the operation; the parent kills it
at a random moment spread over how long the operation takes. After each kill the
database passes its integrity check and holds exactly the old data or exactly the new
data, never a mix; a killed backup never leaves a broken file under a snapshot's name.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.data_checks import data_checksum, open_raw
from tests.processes import Worker, spawn_worker
from tiered_memory import AgentMemoryManager, Tier

pytestmark = [pytest.mark.crash, pytest.mark.subprocess, pytest.mark.slow]

KILLS = 8


def _integrity_ok(path: Path) -> bool:
    conn = open_raw(path)
    try:
        return conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """An 'old' and a 'new' database (different data), a snapshot and an export of new."""
    root = tmp_path_factory.mktemp("crash-ops")
    paths = {"old": root / "old.db", "new": root / "new.db"}
    for name, count in (("old", 3000), ("new", 12000)):
        with AgentMemoryManager.open(paths[name]) as memory, memory.transaction():
            for i in range(count):
                tier = Tier.SEMANTIC if i % 3 else Tier.EPISODIC
                memory.remember(f"{name} memory {i} " + "z" * 300, tier=tier, tags=[name],
                                embedding=[float(i % 7)] * 32)  # fmt: skip
    with AgentMemoryManager.open(paths["new"]) as memory:
        memory.flush()  # entities extracted: no worker finds background work to write
        paths["snapshot"] = memory.backup(root / "new-snapshot.db")
        paths["export"] = memory.export_json(root / "new-export.json")
        memory.maintain()
    with AgentMemoryManager.open(paths["old"]) as memory:
        memory.flush()
        memory.maintain()
    yield paths


def _fresh(live: Path, source: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{live}{suffix}").unlink(missing_ok=True)
    shutil.copy(source, live)


def _start(op: str, live: Path, arg: str) -> Worker:
    worker = spawn_worker("operate", op, str(live), arg, ready="GO", quiet=False)
    assert worker.lines == ["GO"]
    return worker


def _killed_runs(op: str, live: Path, source: Path, arg: str) -> Iterator[bool]:
    """Time one full run, then SIGKILL KILLS runs at random moments of the operation.

    Yields whether each killed run had already finished.
    """
    _fresh(live, source)
    duration = float(_start(op, live, arg).finish(timeout=300)[-1].split()[-1])
    rng = random.Random(op)
    for _ in range(KILLS):
        _fresh(live, source)
        lines = _start(op, live, arg).kill(after=rng.uniform(0.0, duration))
        yield any("DONE" in line for line in lines)


@pytest.mark.parametrize(("op", "arg_name"), [("restore", "snapshot"), ("import", "export")])
def test_sigkill_during_restore_or_import(
    files: dict[str, Path], tmp_path: Path, op: str, arg_name: str
) -> None:
    live = tmp_path / "live.db"
    old_sum = data_checksum(files["old"])
    _fresh(live, files["old"])
    worker = _start(op, live, str(files[arg_name]))
    worker.finish(timeout=300)
    assert worker.returncode == 0
    new_sum = data_checksum(live)
    assert new_sum != old_sum
    finished = []
    for done in _killed_runs(op, live, files["old"], str(files[arg_name])):
        assert _integrity_ok(live)
        checksum = data_checksum(live)
        assert checksum in (old_sum, new_sum), f"a half-done {op}"
        if done:
            assert checksum == new_sum
        finished.append(done)
    print(f"{op}: {KILLS} kills, {KILLS - sum(finished)} mid-operation")
    assert not all(finished)


def test_sigkill_during_backup(files: dict[str, Path], tmp_path: Path) -> None:
    live = tmp_path / "live.db"
    backups = tmp_path / "live-backups"
    old_sum = data_checksum(files["new"])
    finished = []
    for done in _killed_runs("backup", live, files["new"], "100"):
        assert _integrity_ok(live) and data_checksum(live) == old_sum
        for snapshot in backups.glob("*.db"):  # only complete, verified snapshots get a name
            assert _integrity_ok(snapshot) and data_checksum(snapshot) == old_sum
        finished.append(done)
    print(f"backup: {KILLS} kills, {KILLS - sum(finished)} mid-operation")
    assert not all(finished)

"""Interrupted backups and restores leave nothing behind once the next operation runs.

A backup writes ``.NAME.xxxxxxxx.partial`` (and SQLite a ``-journal`` beside it) into
the backup folder; a restore stages ``.restore-xxxxxxxx.db`` (with ``-wal``/``-shm``)
beside the database. Real worker processes are SIGKILLed while those files exist; then
opening the database, ``backup`` or ``maintain`` must delete every one of them, while a
backup under way in another live process keeps its file and completes.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from persistence.leftovers import held_temp, remove_stale
from persistence.sqlite import BackupManager, SQLiteStore
from tests.support.data_checks import data_checksum
from tests.support.processes import Worker, spawn_worker
from tiered_memory import AgentMemoryManager, Tier

KILLS = 4


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database big enough that a backup or restore of it takes a moment."""
    path = tmp_path_factory.mktemp("leftovers") / "source.db"
    with AgentMemoryManager.open(path) as memory, memory.transaction():
        for i in range(4000):
            tier = Tier.SEMANTIC if i % 3 else Tier.EPISODIC
            memory.remember(f"memory {i} " + "q" * 600, tier=tier, embedding=[float(i % 5)] * 16)
    with AgentMemoryManager.open(path) as memory:
        memory.flush()  # entities extracted: no worker finds background work to write
        memory.maintain()
    return path


def leftovers_in(*directories: Path) -> list[str]:
    """Every temporary file (all are dot-files) in ``directories``."""
    return sorted(
        p.name for d in directories if d.is_dir() for p in d.iterdir() if p.name.startswith(".")
    )


def _start(op: str, live: Path, arg: str) -> Worker:
    worker = spawn_worker("operate", op, str(live), arg, ready="GO", stdin=True, quiet=False)
    assert worker.lines == ["GO"]
    return worker


def _kill_when_leftovers_appear(worker: Worker, directory: Path, rng: random.Random) -> None:
    """SIGKILL the worker a random moment after its first temporary file shows up."""
    deadline = time.monotonic() + 120
    while not leftovers_in(directory) and worker.process.poll() is None:
        assert time.monotonic() < deadline, "the operation never made a temporary file"
        time.sleep(0.001)
    worker.kill(after=rng.uniform(0.0, 0.05))


def _next_operation(kind: str, live: Path, snapshot: Path | None = None) -> None:
    """The operation that should clean up: opening, or a backup (to ``snapshot``, by
    default timestamped) or maintain without opening through the manager (whose open
    would clean first)."""
    if kind == "open":
        AgentMemoryManager.open(live, embedder=None, embed_in_background=False).shutdown()
        return
    with SQLiteStore(live) as store:
        backups = BackupManager(store)
        if kind == "backup":
            backups.create_backup(snapshot)
        else:
            backups.run_maintenance()


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.subprocess
@pytest.mark.parametrize("op", ["backup", "restore"])
def test_sigkilled_operations_leave_nothing_after_the_next_one(
    source: Path, tmp_path: Path, op: str
) -> None:
    live = tmp_path / "live.db"
    folder = tmp_path / "live-backups"
    snapshot = tmp_path / "snapshot.db"
    with AgentMemoryManager.open(source, embedder=None, embed_in_background=False) as memory:
        memory.backup(snapshot)
    rng = random.Random(op)
    left_behind = 0
    for n in range(KILLS):
        for suffix in ("", "-wal", "-shm"):
            Path(f"{live}{suffix}").unlink(missing_ok=True)
        live.write_bytes(source.read_bytes())
        arg = "100" if op == "backup" else str(snapshot)
        watched = folder if op == "backup" else tmp_path
        _kill_when_leftovers_appear(_start(op, live, arg), watched, rng)
        found = leftovers_in(folder, tmp_path)
        left_behind += bool(found)
        _next_operation(("open", "backup", "maintain")[n % 3], live)
        assert leftovers_in(folder, tmp_path) == [], f"after {found}"
        assert data_checksum(live) == data_checksum(source)
    assert left_behind, "no kill landed while the operation had its temporary files"


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_backup_under_way_in_another_process_is_never_touched(
    source: Path, tmp_path: Path
) -> None:
    live = tmp_path / "live.db"
    live.write_bytes(source.read_bytes())
    worker = _start("paused-backup", live, "100")
    assert worker.process.stdin is not None
    assert worker.readline() == "WORKING"
    folder = tmp_path / "live-backups"
    in_use = leftovers_in(folder)  # the snapshot being written (and SQLite's journal)
    [partial] = [name for name in in_use if name.endswith(".partial")]
    assert (folder / partial).stat().st_size > 0
    for kind in ("open", "backup", "maintain"):  # each of them cleans up
        _next_operation(kind, live, tmp_path / "meanwhile.db")  # not the worker's name
        assert leftovers_in(folder) == in_use
    worker.process.stdin.write("go on\n")
    worker.process.stdin.flush()
    lines = worker.finish(timeout=120)
    assert any("DONE" in line for line in lines) and worker.returncode == 0
    assert leftovers_in(folder) == []
    snapshots = [*folder.glob("live-*.db"), tmp_path / "meanwhile.db"]
    assert len(snapshots) == 2  # the worker's and the one taken meanwhile
    assert all(data_checksum(s) == data_checksum(source) for s in snapshots)


def test_a_stale_file_is_deleted_with_its_sidecars_and_a_held_one_is_kept(tmp_path: Path) -> None:
    stale = tmp_path / ".live.db.abcd1234.partial"
    stale.write_bytes(b"half a snapshot")
    Path(f"{stale}-journal").write_bytes(b"journal")
    orphan = tmp_path / ".restore-zz99yy88.db-wal"  # its main file is already gone
    orphan.write_bytes(b"wal")
    mine = tmp_path / "notes.partial"  # not named like ours: never touched
    mine.write_bytes(b"user data")
    with held_temp(tmp_path, ".restore-", ".db") as held:
        Path(f"{held}-wal").write_bytes(b"in use")
        removed = remove_stale([tmp_path, tmp_path / "missing"])
        assert sorted(p.name for p in removed) == sorted(
            [stale.name, f"{stale.name}-journal", orphan.name]
        )
        assert held.exists() and Path(f"{held}-wal").exists() and mine.exists()
    assert not held.exists() and not Path(f"{held}-wal").exists()
    assert leftovers_in(tmp_path) == []


@pytest.mark.slow  # 3.8 s measured on a busy machine
def test_held_temp_retries_when_a_cleaner_deleted_its_file_before_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window between creating the file and locking it: a cleaner that won it has
    deleted the file, so the creator must notice and make another."""
    import tempfile

    real = tempfile.mkstemp
    calls: list[str] = []

    def mkstemp_then_clean(**kwargs: str) -> tuple[int, str]:
        fd, name = real(**kwargs)  # type: ignore[call-overload]
        calls.append(name)
        if len(calls) == 1:
            remove_stale([tmp_path])  # nobody holds it yet: a cleaner deletes it
        return int(fd), str(name)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp_then_clean)
    with held_temp(tmp_path, ".x.db.", ".partial") as path:
        assert len(calls) == 2 and str(path) == calls[1] and path.exists()
        assert remove_stale([tmp_path]) == []
    assert not Path(calls[0]).exists() and not path.exists()

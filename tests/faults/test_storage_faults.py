"""A full disk and read-only storage, for real: a 5 MB tmpfs mounted by the test.

Every failure must be a ``TieredMemoryError`` subclass (``StorageFullError``,
``ReadOnlyError``) that changed nothing: every acknowledged write is still there, the
file passes its integrity check, and no partial snapshot or export is left behind.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from persistence import ReadOnlyError, StorageFullError, Tier
from tests.engines.sqlite.test_read_only import fingerprint, leave_a_wal
from tests.interfaces.test_cli import run
from tiered_memory import AgentMemoryManager

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="mounting a tmpfs (a real small or read-only disk) needs root"
)

NO_MODEL = {"embedder": None, "embed_in_background": False}


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 5 MB tmpfs, unmounted again whatever happens."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=5m,mode=0755", "tmpfs", str(mount)],
                   check=True)  # fmt: skip
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], check=False).returncode:
            subprocess.run(["umount", "-l", str(mount)], check=True)


def fill(directory: Path, leave: int = 0) -> Path:
    """Fill the file system holding ``directory`` up, then free ``leave`` bytes."""
    filler = directory / "filler"
    # Unbuffered: a buffered file would flush what the failed write left in its buffer at
    # close and raise the same ENOSPC again (depending on where the disk ran out).
    with filler.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 65536)
        except OSError:
            pass
    os.truncate(filler, max(filler.stat().st_size - leave, 0))
    return filler


def document(tmp_path: Path, n: int) -> Path:
    """An export with ``n`` memories of 2 kB, on the normal disk."""
    source = tmp_path / "source.db"
    with AgentMemoryManager.open(source, **NO_MODEL) as memory:
        memory.remember_many([f"imported {i} " + "y" * 2000 for i in range(n)])
        memory.backup(tmp_path / "source-snapshot.db")
        return memory.export_json(tmp_path / "source.json")


@pytest.mark.slow
@needs_root
def test_a_full_disk_refuses_writes_and_keeps_every_acknowledged_memory(
    disk: Path, tmp_path: Path
) -> None:
    # More than the whole disk holds (3,000 x 2 kB > 5 MB): an import must not fit in
    # room the WAL file already has once it restarted (300 memories sometimes did).
    doc = document(tmp_path, 3000)
    db = disk / "agent.db"
    acknowledged: list[str] = []
    with AgentMemoryManager.open(db, **NO_MODEL) as memory:
        session = memory.start_session()
        with pytest.raises(StorageFullError, match="disk is full"):
            for i in range(100_000):
                text = f"note {i} " + " ".join(f"w{i * 7 + j}" for j in range(300))
                acknowledged.append(memory.remember(text, session_id=session.session_id).id)
        assert len(acknowledged) > 20  # the disk filled up with memories (dozens)
        assert memory.statistics().storage.episodic_count == len(acknowledged)
        try:
            forgotten = memory.forget(acknowledged[0])  # may need room in the WAL
        except StorageFullError:
            assert memory.get(acknowledged[0]) is not None
        else:
            assert forgotten and memory.get(acknowledged[0]) is None
            acknowledged.pop(0)
        with pytest.raises(StorageFullError):
            memory.import_json(doc, "merge")
        with pytest.raises(StorageFullError):
            memory.restore(tmp_path / "source-snapshot.db")
        with pytest.raises(StorageFullError):
            memory.backup()
        with pytest.raises(StorageFullError):
            memory.export_json()
        assert memory.statistics().storage.episodic_count == len(acknowledged)
        assert memory.get(acknowledged[-1]) is not None
    # Closing checkpointed the WAL and removed it, which can free room (the WAL may grow
    # to RESTART_FACTOR x wal_autocheckpoint pages before it restarts): fill it again.
    filler = fill(disk)
    with pytest.raises(StorageFullError, match="disk is full"):
        AgentMemoryManager.open(disk / "new.db", **NO_MODEL)
    filler.unlink()
    leftovers = {p.name for p in disk.iterdir()} - {"agent.db", "agent.db-wal", "agent.db-shm"}
    leftovers -= {"new.db", "new.db-wal", "new.db-shm"}  # a new file stops at a whole version
    assert leftovers <= {"agent-backups"} and not any((disk / "agent-backups").iterdir())
    with AgentMemoryManager.open(db, **NO_MODEL) as memory:  # the disk is still full
        assert memory.check_integrity().ok
        assert set(memory.store.memories.get_memories(acknowledged)) == set(acknowledged)
        assert memory.statistics().storage.episodic_count == len(acknowledged)
    with AgentMemoryManager.open(db, read_only=True, embedder=None) as memory:
        assert memory.check_integrity().ok
        assert len(memory.recall(f"w{7 * (len(acknowledged) - 1)}", k=1)) == 1


@needs_root
def test_export_and_backup_to_a_full_disk_leave_nothing_behind(disk: Path, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    with AgentMemoryManager.open(db, **NO_MODEL) as memory:
        memory.remember_many([f"memory {i} " + "z" * 3000 for i in range(400)], Tier.SEMANTIC)
    fill(disk, leave=100_000)  # room to start writing, not to finish
    before = fingerprint(db)
    with AgentMemoryManager.open(db, read_only=True, **NO_MODEL) as memory:
        with pytest.raises(StorageFullError, match="disk is full"):
            memory.export_json(disk / "out.json")
        with pytest.raises(StorageFullError, match="disk is full"):
            memory.backup(disk / "snap.db")
        assert memory.check_integrity().ok
    assert [p.name for p in disk.iterdir()] == ["filler"]
    assert fingerprint(db) == before
    for args in (("export", str(db), str(disk / "cli.json")),
                 ("backup", str(db), "--to", str(disk / "cli.db"))):  # fmt: skip
        result = run(*args)
        assert result.returncode == 1 and "disk is full" in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    assert [p.name for p in disk.iterdir()] == ["filler"]
    assert fingerprint(db) == before


@pytest.mark.slow
@needs_root
def test_read_only_storage_is_read_and_never_written(disk: Path, tmp_path: Path) -> None:
    db, with_wal, bare_wal = disk / "agent.db", disk / "wal.db", disk / "bare.db"
    for path in (db, with_wal, bare_wal):
        with AgentMemoryManager.open(path, **NO_MODEL) as memory:
            memory.remember("The user prefers dark mode", tags=["ui"])
            memory.start_session()
    leave_a_wal(with_wal)
    leave_a_wal(bare_wal)
    Path(f"{bare_wal}-shm").unlink()
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    before = {path: fingerprint(path) for path in (db, with_wal, bare_wal)}
    listing = sorted(p.name for p in disk.iterdir())

    for path in (db, with_wal, bare_wal, disk / "new.db"):
        with pytest.raises(ReadOnlyError, match="read_only=True"):
            AgentMemoryManager.open(path, **NO_MODEL)
    with AgentMemoryManager.open(db, read_only=True, embedder=None) as memory:
        assert [h.memory.content for h in memory.recall("dark mode")] == [
            "The user prefers dark mode"
        ]
        assert memory.statistics().storage.episodic_count == 1
        assert memory.check_integrity().ok
        memory.export_json(tmp_path / "out.json")
        memory.backup(tmp_path / "snap.db")
        with pytest.raises(ReadOnlyError):
            memory.remember("not on a read-only disk")
        with pytest.raises(ReadOnlyError, match="read-only"):
            memory.backup()  # its default folder would be beside the database
    for path in (with_wal, bare_wal):  # commits that are only in the -wal are seen
        with AgentMemoryManager.open(path, read_only=True, embedder=None) as memory:
            assert memory.statistics().storage.episodic_count == 2
            assert memory.check_integrity().ok
    for command in (("stats", str(db)), ("search", str(with_wal), "killed"),
                    ("export", str(bare_wal), str(tmp_path / "cli.json")),
                    ("check", str(bare_wal))):  # fmt: skip
        result = run(*command)
        assert result.returncode == 0, result.stderr
    assert "killed" in run("search", str(with_wal), "killed").stdout
    assert {path: fingerprint(path) for path in (db, with_wal, bare_wal)} == before
    assert sorted(p.name for p in disk.iterdir()) == listing


@pytest.mark.slow
def test_a_failed_last_write_still_closes_the_file(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    memory = AgentMemoryManager.open(db, recall_review_batch=100, **NO_MODEL)
    memory.remember("The user prefers dark mode")
    assert memory.recall("dark mode")  # its review waits for the batch, or for shutdown
    other = apsw.Connection(str(db))
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        memory.shutdown()  # the review it cannot write is dropped (issue 28), not raised
        assert not memory.store.is_open
    finally:
        other.execute("ROLLBACK")
        other.close()

"""Power loss at every sync point (tests/support/power_cut_vfs.py, tests/support/power_cut_run.py).

The full run (1,000 operations, both levels) is benchmarks/power_cut.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.power_cut_run import CONFIG, judge, read_state, run_workload
from tests.support.power_cut_vfs import (
    SYNC,
    TRUNCATE,
    WRITE,
    Event,
    Recording,
    RecordingVFS,
    write_cut,
)
from tiered_memory import AgentMemoryManager

pytestmark = [pytest.mark.crash, pytest.mark.slow]


def test_a_cut_keeps_synced_writes_drops_later_ones_and_tears_the_last(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    wal = db + "-wal"
    rec = Recording(db)
    for event in [
        Event(WRITE, db, 0, b"AAAA"),
        Event(SYNC, db),
        Event(WRITE, wal, 0, b"wwww"),
        Event(WRITE, db, 4, b"BBBB"),  # never synced: dropped
        Event(WRITE, db, 0, b"CCCC"),  # the last unsynced write of db: torn
        Event(SYNC, wal),
        Event(TRUNCATE, wal, 0),  # unsynced: dropped
        Event(WRITE, db, 0, b"DDDD"),
    ]:
        rec.add(event)
    cuts = dict(rec.cuts())
    assert sorted(cuts) == [1, 5, 8]
    assert cuts[1] == {db: b"AA"}  # before the first sync: the first half of the only write
    # before the WAL's sync: db as synced, its last write torn the other way round
    assert cuts[5] == {db: b"AACC", wal: b"\0\0ww"}
    # at the end: the WAL synced (its truncate dropped), db's last write torn
    assert cuts[8] == {db: b"DDAA", wal: b"wwww"}
    written = write_cut(cuts[8], db, tmp_path / "cut")
    assert written.read_bytes() == b"DDAA"
    assert (tmp_path / "cut" / "m.db-wal").read_bytes() == b"wwww"


def test_with_full_sync_no_cut_loses_an_acknowledged_operation(tmp_path: Path) -> None:
    run = run_workload(tmp_path / "db" / "m.db", 100, seed=11, synchronous="FULL")
    assert not run.errors
    verdict = judge(run, every=2)  # every other sync point, to run in seconds
    assert verdict.cuts > 60  # FULL syncs the WAL at every commit
    assert verdict.corrupt == 0, verdict.notes[:5]
    assert verdict.most_lost == 0, verdict.lost_acknowledged
    assert set(verdict.during_creation) == {"empty store"}


def test_with_normal_sync_a_cut_loses_only_the_last_transactions(tmp_path: Path) -> None:
    run = run_workload(tmp_path / "db" / "m.db", 100, seed=11, synchronous="NORMAL")
    assert not run.errors
    verdict = judge(run)
    assert verdict.corrupt == 0, verdict.notes[:5]
    # The WAL is synced at checkpoints only: cuts between them lose the operations since
    # (the file holds exactly what an earlier operation acknowledged: a lost tail).
    assert set(verdict.during_creation) == {"empty store"}
    assert verdict.most_lost > 0
    assert sum(verdict.lost_acknowledged.values()) == verdict.cuts - sum(
        verdict.during_creation.values()
    )


@pytest.mark.parametrize("synchronous", ["NORMAL", "FULL"])
@pytest.mark.parametrize("tear", ["front", "back"])
def test_a_power_cut_while_a_store_is_created_leaves_one_that_opens_empty(
    tmp_path: Path, synchronous: str, tear: str
) -> None:
    """The first page torn (its front half zeros) beside SQLite's hot journal: the file
    opens (SQLite rolls the journal back), where it was refused as not a database."""
    db = tmp_path / "new.db"
    with RecordingVFS(db) as vfs:
        AgentMemoryManager.open(db, synchronous=synchronous, **CONFIG).shutdown()
        created = vfs.recording.mark()
    cuts = [files for index, files in vfs.recording.cuts(tear=tear) if index < created]
    assert len(cuts) >= 2
    assert any(path.endswith("-journal") for files in cuts for path in files)
    for n, files in enumerate(cuts):
        copy = write_cut(files, str(db), tmp_path / f"cut-{n}")
        with AgentMemoryManager.open(copy, **CONFIG) as memory:
            assert memory.check_integrity().ok
            assert read_state(memory) == {}
            memory.remember("written after the power cut")
        with AgentMemoryManager.open(copy, **CONFIG) as memory:
            assert [m.content for m in memory.query(limit=None)] == ["written after the power cut"]

"""WAL checkpoints in a background thread (persistence/sqlite/checkpointer.py): the WAL stays
bounded under a writer that never pauses, the thread stops on close, read-only and
in-memory stores start none, a failing thread hands checkpoints back to the writer, and
a SIGKILL while it copies loses no returned write."""

from __future__ import annotations

import logging
import random
import threading
import time
from pathlib import Path

import apsw
import pytest

from persistence import Memory, Tier
from persistence.sqlite import SQLiteStore
from persistence.sqlite.backup import BackupManager
from persistence.sqlite.checkpointer import FAILURES_TO_STOP, HARD_FACTOR
from tests.support.crash_checks import assert_no_half_done_promotion, read_state
from tests.support.processes import spawn_worker

PAGES = 64
FRAME = 4096 + 24


def _threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("tiered-memory checkpointer")]


def _wal_frames(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return wal.stat().st_size // FRAME if wal.exists() else 0


def _write(store: SQLiteStore, count: int, path: Path) -> int:
    """``count`` writes back to back; the longest the WAL got, in frames."""
    longest = 0
    for n in range(count):
        store.put_episodic(Memory.create(f"memory {n} " + "words " * 40, session_id=None))
        longest = max(longest, _wal_frames(path))
    return longest


def _bounded_run(db_path: Path, slow_s: float = 0.0) -> None:
    """600 writes back to back; the WAL never passes the hard length by more than the
    one commit that crossed it. ``slow_s``: each of the thread's checkpoints takes that
    much longer (a busy machine)."""
    with SQLiteStore(db_path, wal_autocheckpoint=PAGES) as store:
        checkpointer = store.engine.background.checkpointer
        writer = store.engine.writer
        assert checkpointer is not None and writer is not None
        commits: list[int] = []  # the WAL's length after each commit, in pages
        hook, copy = checkpointer._committed, checkpointer._checkpoint

        def watched(conn: apsw.Connection, name: str, pages: int) -> int:
            commits.append(pages)
            return hook(conn, name, pages)

        def slow(conn: apsw.Connection) -> None:
            time.sleep(slow_s)
            copy(conn)

        writer.set_wal_hook(watched)
        checkpointer._checkpoint = slow  # type: ignore[method-assign]
        longest = _write(store, 600, db_path)
        assert checkpointer.running
        assert checkpointer.checkpoints > 0, "the thread did not checkpoint"
        assert checkpointer.restarts > 0, "the WAL never started over"
    # The WAL file keeps its longest length; had the WAL never restarted it would have
    # grown to about 8,000 frames here (it did, before the writer's restart checkpoint).
    # Bound: the writer's hard restart length plus the one commit that crossed it (a
    # crisis merge of the keyword index writes a few hundred pages at once).
    sizes = [b - a if b > a else b for a, b in zip([0, *commits], commits, strict=False)]
    assert longest <= HARD_FACTOR * PAGES + max(sizes), (longest, max(sizes))
    with SQLiteStore(db_path) as store:
        assert store.memories.count(Tier.EPISODIC) == 600


@pytest.mark.slow  # 1.5 s measured on a busy machine
def test_wal_stays_bounded_under_a_writer_that_never_pauses(db_path: Path) -> None:
    _bounded_run(db_path)


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_a_slow_thread_lets_the_wal_pass_the_hard_length_by_one_commit_at_most(
    db_path: Path,
) -> None:
    """The writer past the hard length waits for the thread's checkpoint under way
    instead of skipping its own (skipped, the WAL grew commit after commit)."""
    _bounded_run(db_path, slow_s=0.03)


def test_close_stops_the_thread_and_read_only_or_memory_start_none(db_path: Path) -> None:
    before = len(_threads())
    store = SQLiteStore(db_path).open()
    assert len(_threads()) == before + 1
    store.put_episodic(Memory.create("one"))
    store.close()
    assert len(_threads()) == before
    with SQLiteStore(db_path, read_only=True) as reader:
        assert reader.engine.background.checkpointer is None and len(_threads()) == before
    with SQLiteStore(":memory:") as in_memory:
        assert in_memory.engine.background.checkpointer is None and len(_threads()) == before
    with SQLiteStore(db_path, wal_autocheckpoint=0) as never:
        assert never.engine.background.checkpointer is None and len(_threads()) == before


@pytest.mark.slow  # 2.5 s measured on a busy machine
def test_a_failing_thread_is_logged_and_the_writer_checkpoints_again(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tiered_memory.checkpointer")
    with SQLiteStore(db_path, wal_autocheckpoint=PAGES) as store:
        checkpointer = store.engine.background.checkpointer
        assert checkpointer is not None and checkpointer._conn is not None
        checkpointer._conn.close()  # every checkpoint of the thread now fails
        _write(store, 100, db_path)
        assert not checkpointer.running
        failures = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(failures) >= FAILURES_TO_STOP
        assert any(r.levelno == logging.ERROR and "stopped" in r.message for r in caplog.records)
        before = _wal_frames(db_path)
        _write(store, 400, db_path)  # checkpointed inline again: about 6,000 frames if not
        assert _wal_frames(db_path) <= max(before, 2 * PAGES + 200)


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.subprocess
def test_sigkill_while_the_thread_checkpoints_loses_no_returned_write(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint-crash.db"
    rng = random.Random(18)
    reported: set[str] = set()
    for kill in range(8):
        # READY: opened (and migrated), so the kill lands mid-writes
        worker = spawn_worker("checkpoint-crash", str(path), str(kill))
        assert worker.lines == ["READY"], worker.lines
        for line in worker.kill(after=rng.uniform(0.1, 0.5))[1:]:
            parts = line.split()
            if parts[0] == "W":
                reported.add(parts[1])
        state = read_state(path)  # integrity_check passes
        assert_no_half_done_promotion(state, tags_per_memory=2)
        lost = reported - set(state.where)
        assert not lost, f"returned writes lost: {sorted(lost)[:3]}"
    assert len(reported) > 10


@pytest.mark.slow
def test_maintenance_truncates_the_wal_while_the_thread_is_busy(db_path: Path) -> None:
    """``wal_checkpoint(TRUNCATE)`` is refused as busy while another connection
    checkpoints: maintenance holds the thread off, so it always empties the WAL."""
    with SQLiteStore(db_path, wal_autocheckpoint=4) as store:  # the thread nearly always busy
        backups = BackupManager(store)
        for _ in range(15):
            _write(store, 20, db_path)
            result = backups.run_maintenance()
            assert result.wal_bytes_after == 0, result


@pytest.mark.slow  # 1.4 s measured on a busy machine
def test_after_rekey_the_thread_checkpoints_with_the_new_key(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The thread's connection is opened with the file's key; after ``rekey`` it must
    use the new one, or every background checkpoint fails (and the WAL only shrinks
    through the writer's fallback)."""
    with SQLiteStore(db_path, wal_autocheckpoint=PAGES, key="old key") as store:
        _write(store, 100, db_path)
        store.rekey(b"new key")
        before = store.engine.background.checkpointer
        assert before is not None
        done = before.checkpoints
        with caplog.at_level(logging.WARNING, logger="tiered_memory"):
            _write(store, 300, db_path)
        checkpointer = store.engine.background.checkpointer
        assert checkpointer is not None and checkpointer.running
        assert checkpointer.checkpoints > (done if checkpointer is before else 0)
        assert not [r for r in caplog.records if "checkpoint" in r.getMessage()]
    with SQLiteStore(db_path, key=b"new key") as store:
        assert store.memories.count(Tier.EPISODIC) == 400
        assert BackupManager(store).check_integrity().ok


def test_a_large_batch_commit_is_copied_by_the_thread_not_the_writer(db_path: Path) -> None:
    """One commit that takes the WAL past the restart length (a batch) returns without
    the writer copying it; the thread copies it, and the next small commit lets the WAL
    start over."""
    with SQLiteStore(db_path, wal_autocheckpoint=PAGES) as store:
        checkpointer = store.engine.background.checkpointer
        assert checkpointer is not None
        batch = [Memory.create(f"batch {n} " + "words " * 200) for n in range(1200)]
        store.memories.insert_memories(batch)
        assert _wal_frames(db_path) > checkpointer.restart_pages  # a big commit indeed
        assert checkpointer.restarts == 0, "the writer copied the batch in its commit"
        deadline = time.monotonic() + 30
        while checkpointer.checkpoints == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        with checkpointer.paused():  # the thread's checkpoint has ended
            assert checkpointer.checkpoints > 0, "the thread never copied the batch"
        store.put_episodic(Memory.create("after the batch"))
        store.put_episodic(Memory.create("the WAL started over"))
        log, _ = store.engine.writer.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
        assert log < PAGES, f"the WAL did not start over: {log} frames"
    with SQLiteStore(db_path) as store:
        assert store.memories.count(Tier.EPISODIC) == 1202


def _segments(conn: apsw.Connection) -> int:
    return int(conn.execute("SELECT count(DISTINCT segid) FROM memory_fts_idx").fetchall()[0][0])


def _found(conn: apsw.Connection, word: str) -> list[int]:
    rows = conn.execute("SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?", (word,))
    return sorted(r[0] for r in rows)


def test_idle_writer_lets_the_thread_merge_the_keyword_index(db_path: Path) -> None:
    """While the writer rests, the merger's thread merges the keyword index's segments
    (fewer segments, the same rows found, FTS5's integrity check passes), on the writer's
    own connection: the writer sees no change by another process (its RAM copies stay)."""
    changes: list[int] = []
    # No idle time yet: build up segments first.
    with SQLiteStore(db_path, wal_autocheckpoint=PAGES, idle_merge_s=3600.0) as store:
        store.engine.on_external_change(lambda: changes.append(1))
        merger = store.keywords.merger
        words = [f"w{i}" for i in range(50)]
        rng = random.Random(3)
        for n in range(300):
            store.put_episodic(Memory.create(f"m{n} " + " ".join(rng.choices(words, k=8))))
        conn = store.engine.writer
        assert conn is not None
        before = _segments(conn)
        found = {w: _found(conn, w) for w in words[:10]}
        merger.idle_s = 0.05
        merger.wake()
        deadline = time.monotonic() + 20
        while (merger.due or not merger.steps) and time.monotonic() < deadline:
            time.sleep(0.02)
        with store.engine.lock:  # (each merge step takes it)
            assert merger.steps > 0, "the thread never merged"
            after = _segments(conn)
            assert after < before, (before, after)
            assert {w: _found(conn, w) for w in words[:10]} == found
            conn.execute("INSERT INTO memory_fts (memory_fts, rank) VALUES ('integrity-check', 0)")
        assert store.engine.check_external_changes()
        store.put_episodic(Memory.create("after the merges"))
        assert changes == [], "the thread's merges were taken for another process's writes"


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.subprocess
def test_sigkill_while_the_thread_merges_loses_no_returned_write(tmp_path: Path) -> None:
    path = tmp_path / "merge-crash.db"
    rng = random.Random(27)
    reported: dict[str, str] = {}
    for kill in range(6):
        worker = spawn_worker("merge-crash", str(path), str(kill))
        assert worker.lines == ["READY"], worker.lines
        for line in worker.kill(after=rng.uniform(0.3, 1.2))[1:]:
            parts = line.split()
            if parts[0] == "W":
                reported[parts[1]] = parts[2]
        state = read_state(path)  # integrity_check passes
        lost = set(reported) - set(state.where)
        assert not lost, f"returned writes lost: {sorted(lost)[:3]}"
    with SQLiteStore(path) as store:
        conn = store.engine.writer
        assert conn is not None
        conn.execute("INSERT INTO memory_fts (memory_fts, rank) VALUES ('integrity-check', 0)")
        for memory_id, token in reported.items():
            (rowid,) = _found(conn, token)
            (mapped,) = conn.execute("SELECT memory_id FROM memory_index WHERE rowid = ?", (rowid,))
            assert mapped[0] == memory_id
    assert len(reported) > 50


def test_commits_while_the_thread_copies_do_not_queue_a_second_checkpoint(
    tmp_path: Path,
) -> None:
    """They are the next round's: queued, they made a checkpoint (two syncs) of a few
    pages right after every round."""
    with SQLiteStore(tmp_path / "rounds.db", wal_autocheckpoint=PAGES) as store:
        checkpointer, writer = store.engine.background.checkpointer, store.engine.writer
        assert checkpointer is not None and writer is not None
        wakes: list[bool] = []
        wake = checkpointer._wake
        checkpointer._wake = lambda: (wakes.append(True), wake())[1]
        checkpointer._copied = 0
        checkpointer._copying = True  # as during the thread's checkpoint
        checkpointer._committed(writer, "main", 2 * PAGES)
        assert wakes == [] and not checkpointer._checkpoint_due
        checkpointer._copying = False
        checkpointer._committed(writer, "main", 2 * PAGES)
        assert wakes == [True]  # past the threshold, no copy under way: due

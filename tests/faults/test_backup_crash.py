"""SIGKILL during backup, restore and import: the file is the old one or the new one.

A worker opens the database, says ``GO``, then runs the operation; the parent kills it
at a random moment spread over how long the operation takes. After each kill the
database passes its integrity check and holds exactly the old data or exactly the new
data, never a mix; a killed backup never leaves a broken file under a snapshot's name.

On PostgreSQL: a restore, an import and a copy from a file into a server database,
killed the same way, leave it holding nothing new or the whole document (each writes in
one transaction, which the server rolls back when its client is gone).
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.crash_checks import open_transactions, server_checksum, server_problems
from tests.support.data_checks import data_checksum as _data_checksum
from tests.support.data_checks import open_raw
from tests.support.pg_server import PgServer, app_url
from tests.support.processes import Worker, spawn_worker
from tiered_memory import AgentMemoryManager, Tier

pytestmark = [pytest.mark.crash, pytest.mark.subprocess, pytest.mark.slow]

KILLS = 8
SERVER_KILLS = 4  # each kill also makes and drops a database


def data_checksum(path: Path) -> str:
    """Every row, but not FTS5's segment layout nor the erasure mark: a worker that
    finished also closed its store, whose closing optimize rewrites the segments of what
    it erased and clears the mark; one killed after its COMMIT did not, with the same rows
    (its next writable open erases and clears)."""
    return _data_checksum(path, fts_segments=False, erasure_mark=False)


def _integrity_ok(path: Path) -> bool:
    conn = open_raw(path)
    try:
        return conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


def _fill(path: Path, name: str, count: int) -> None:
    with AgentMemoryManager.open(path) as memory, memory.transaction():
        for i in range(count):
            tier = Tier.SEMANTIC if i % 3 else Tier.EPISODIC
            memory.remember(f"{name} memory {i} " + "z" * 300, tier=tier, tags=[name],
                            embedding=[float(i % 7)] * 32)  # fmt: skip


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """An 'old' and a 'new' database (different data), a snapshot and an export of new."""
    root = tmp_path_factory.mktemp("crash-ops")
    paths = {"old": root / "old.db", "new": root / "new.db"}
    for name, count in (("old", 3000), ("new", 12000)):
        _fill(paths[name], name, count)
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


# --- into a PostgreSQL server -----------------------------------------------------------


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A file of 2000 memories (graph extracted) and its JSON export."""
    root = tmp_path_factory.mktemp("crash-doc")
    paths = {"file": root / "doc.db", "export": root / "doc-export.json"}
    _fill(paths["file"], "doc", 2000)
    with AgentMemoryManager.open(paths["file"]) as memory:
        memory.flush()
        memory.export_json(paths["export"])
    return paths


_CHECKS = ("keyword_index_matches", "graph_invariants", "promotion_log_points_at_memories")
"""The integrity checks a database must pass after a killed restore, import or copy."""


def _unlike(a: dict[str, str], b: dict[str, str]) -> list[str]:
    return sorted(t for t in a.keys() | b.keys() if a.get(t) != b.get(t))


def _template(server: PgServer, label: str, memories: int) -> str:
    """A migrated database holding ``memories`` memories, nobody connected: its name."""
    name = server.create_database(f"crash_{label}_before")
    with AgentMemoryManager.open(app_url(server, server.url(name))) as memory:
        for i in range(memories):
            memory.remember(f"held before {i}", tags=["before"])
        memory.flush()  # embedded and extracted: the workers find no background work
    return name


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("op", "source", "before"),
    [("restore", "export", 0), ("import", "export", 5), ("copy", "file", 0)],
)
def test_sigkill_during_restore_import_or_copy_into_a_server(
    pg_server: PgServer, document: dict[str, Path], op: str, source: str, before: int
) -> None:
    """``restore`` and ``copy`` need an empty database; ``import`` replaces 5 memories."""
    template = _template(pg_server, op, before)
    arg = str(document[source])
    sums: dict[str, dict[str, str]] = {}
    try:
        with pg_server.database(f"crash_{op}_whole", template) as url:
            live = app_url(pg_server, url)
            sums["old"] = server_checksum(live)
            worker = spawn_worker("operate", op, live, arg, ready="GO", quiet=False)
            duration = float(worker.finish(timeout=300)[-1].split()[-1])
            assert worker.returncode == 0
            sums["new"] = server_checksum(live)
            assert server_problems(live, *_CHECKS) == []
            with AgentMemoryManager.open(live) as memory:
                assert sum(memory.statistics().tier_counts.values()) == 2000
        assert sums["new"] != sums["old"]
        rng = random.Random(op)
        finished: list[bool] = []
        writing: list[bool] = []
        for kill in range(SERVER_KILLS):
            with pg_server.database(f"crash_{op}_{kill}", template) as url:
                live = app_url(pg_server, url)
                worker = spawn_worker("operate", op, live, arg, ready="GO", quiet=False)
                time.sleep(rng.uniform(0.0, duration))
                writing.append(open_transactions(live, wait_s=0) > 0)  # its write under way
                lines = worker.kill()
                assert open_transactions(live) == 0, "the killed client's transaction stayed"
                checksum = server_checksum(live)
                assert checksum in (sums["old"], sums["new"]), (
                    f"a half-done {op}: tables unlike the old {_unlike(checksum, sums['old'])}, "
                    f"unlike the new {_unlike(checksum, sums['new'])}"
                )
                done = any("DONE" in line for line in lines)
                if done:
                    assert checksum == sums["new"]
                assert server_problems(live, *_CHECKS) == []
                finished.append(done)
        print(f"{op} into a server: {SERVER_KILLS} kills, {SERVER_KILLS - sum(finished)} mid-way")
        assert not all(finished) and any(writing), (finished, writing)
    finally:
        pg_server.drop_database(template)

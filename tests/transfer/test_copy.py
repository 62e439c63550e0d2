"""Copying a whole memory between locations (issue 27): the copy exports the same JSON as
its source, is one transaction at the destination (refused if the destination holds
anything, rolled back on a failure) and works from the command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from persistence import CopyResult, InvalidInputError, SameDatabaseError, Tier, copy_store
from persistence.sqlite import SQLiteStore
from persistence.sqlite.backup import BackupManager
from persistence.sqlite.sql import json_io_sql
from persistence.statements import Statement
from tests.conftest import FakeClock, file_digest
from tests.support.data_checks import data_checksum
from tests.support.populate import populate
from tests.support.worker import HashEmbedder
from tiered_memory import AgentMemoryManager
from tiered_memory.copying import copy_memory

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
OPTIONS: dict[str, Any] = {"embedder": HashEmbedder("copy-model", 3), "embed_in_background": False}


def _open(path: Path | str, clock: FakeClock, **config: Any) -> AgentMemoryManager:
    return AgentMemoryManager.open(path, clock=clock, **{**OPTIONS, **config})


def exported(path: Path | str, tmp_path: Path, clock: FakeClock) -> dict[str, Any]:
    """The export of the database at ``path`` (a file or a server URL) without its
    ``exported_at``."""
    out = tmp_path / f"export-{len(list(tmp_path.iterdir()))}.json"
    with _open(path, clock, read_only=True) as memory:
        memory.export_json(out)
    doc: dict[str, Any] = orjson.loads(out.read_bytes())
    doc.pop("exported_at")
    return doc


@pytest.fixture
def source(tmp_path: Path, clock: FakeClock) -> Path:
    """A file with a bit of everything: every tier with vectors of a named model, a
    session with transcripts, schedules, promotion and forgetting logs, a redacted
    secret, the knowledge graph (caller facts, extracted ones, a queue)."""
    path = tmp_path / "source.db"
    with _open(path, clock) as memory:
        populate(memory, clock)
        memory.remember("Ana met Bruno in Lisbon", relations=[("Ana", "met", "Bruno")])
        memory.remember(f"the deploy token is {TOKEN}")
        memory.graph.add_entity("Caroline", description="a counsellor")
        memory.flush()  # vectors of copy-model, extraction
        memory.remember("Dora moved to Oslo")  # left waiting: no vector, queued for the graph
        assert memory.statistics().redactions >= 1
    return path


def test_a_copy_exports_what_its_source_exports(
    source: Path, tmp_path: Path, clock: FakeClock
) -> None:
    before = file_digest(source)
    result = copy_memory(source, tmp_path / "copy.db")
    assert file_digest(source) == before  # the source is read-only
    one, two = exported(source, tmp_path, clock), exported(tmp_path / "copy.db", tmp_path, clock)
    assert one == two
    tables = one["tables"]
    assert all(tables[t.value] for t in Tier)
    assert one["embedding_model"] == "copy-model" and one["embedding_dim"] == 3
    assert any(m["embedding"] for m in tables["episodic"])
    assert any(m["embedding"] is None for m in tables["episodic"])
    logs = ("sessions", "session_transcripts", "repetition_schedules", "promotion_log",
            "forgetting_log", "entities", "relations", "memory_entities",
            "graph_queue")  # fmt: skip
    assert [name for name in logs if not tables[name]] == []
    assert result.tables == {name: len(rows) for name, rows in tables.items()}
    assert result.memories == sum(len(tables[t.value]) for t in Tier)
    with (
        _open(tmp_path / "copy.db", clock, read_only=True) as copy,
        _open(source, clock, read_only=True) as original,
    ):
        assert copy.check_integrity().ok
        assert copy.statistics().redactions == original.statistics().redactions
        assert copy.graph.statistics() == original.graph.statistics()


def test_a_copy_of_a_copy_is_the_same_memory(
    source: Path, tmp_path: Path, clock: FakeClock
) -> None:
    copy_memory(source, tmp_path / "there.db")
    copy_memory(tmp_path / "there.db", tmp_path / "back.db")
    assert exported(source, tmp_path, clock) == exported(tmp_path / "back.db", tmp_path, clock)


@pytest.mark.slow  # 1.6 s measured on a busy machine
def test_file_to_any_location_and_back_exports_the_same(
    source: Path, any_location: str, tmp_path: Path, clock: FakeClock
) -> None:
    """export(file) == export(copy there) == export(copy back to a file): every tier with
    vectors and model, sessions, transcripts, schedules, both audit logs, the graph."""
    there = copy_memory(source, any_location)
    back = copy_memory(any_location, tmp_path / "back.db")
    one = exported(source, tmp_path, clock)
    assert exported(any_location, tmp_path, clock) == one
    assert exported(tmp_path / "back.db", tmp_path, clock) == one
    assert there.tables == back.tables == {name: len(rows) for name, rows in one["tables"].items()}
    with _open(any_location, clock, read_only=True) as copy:
        assert copy.check_integrity().ok
        assert copy.statistics().redactions >= 1
        assert copy.graph.entity("Ana") is not None


def test_copy_store_writes_into_any_sink_in_one_transaction(
    source: Path, tmp_path: Path, clock: FakeClock
) -> None:
    """The backend-neutral core: a file's ExportSource into an in-memory store's sink."""
    seen: list[tuple[int, int]] = []
    with SQLiteStore(source, read_only=True) as src, SQLiteStore(":memory:") as dst:
        with BackupManager(src).export_source() as rows:
            total = rows.row_count()
            result = copy_store(
                rows, BackupManager(dst).import_sink, progress=lambda *p: seen.append(p)
            )
        out = BackupManager(dst, backup_dir=tmp_path).export_json(tmp_path / "memory.json")
    doc = orjson.loads(out.read_bytes())
    doc.pop("exported_at")
    assert doc == exported(source, tmp_path, clock)
    assert result.rows == total and seen[-1] == (2 * total, 2 * total)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


def test_a_destination_that_holds_anything_is_refused_untouched(
    source: Path, tmp_path: Path, clock: FakeClock
) -> None:
    full, talked = tmp_path / "full.db", tmp_path / "talked.db"
    with _open(full, clock) as memory:
        memory.remember("already here")
    with _open(talked, clock) as memory:
        memory.start_session()
    for destination, held in ((full, "1 memory;"), (talked, "0 memories (1 session")):
        rows = data_checksum(destination)  # every row (a writable open may refresh planner stats)
        with pytest.raises(InvalidInputError, match="already holds") as refused:
            copy_memory(source, destination)
        assert held in str(refused.value) and "new file or an empty database" in str(refused.value)
        assert data_checksum(destination) == rows


@pytest.mark.slow  # 1.4 s measured on a busy machine
def test_a_non_empty_location_is_refused_unchanged(
    source: Path, any_location: str, tmp_path: Path, clock: FakeClock
) -> None:
    with _open(any_location, clock) as memory:
        memory.remember("already here")
    before = exported(any_location, tmp_path, clock)
    with pytest.raises(InvalidInputError, match="already holds 1 memory;"):
        copy_memory(source, any_location)
    assert exported(any_location, tmp_path, clock) == before


@pytest.mark.slow  # 1.3 s measured on a busy machine
def test_a_failed_copy_leaves_any_location_empty(
    source: Path, any_location: str, tmp_path: Path, clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    _open(any_location, clock).close()
    from persistence.postgres.sql import transfer_sql

    def fail(*args: Any) -> None:
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(json_io_sql, "insert_forgetting", fail)
    monkeypatch.setattr(transfer_sql, "insert_forgetting", fail)
    with pytest.raises(OSError, match="simulated"):
        copy_memory(source, any_location)
    assert all(not rows for rows in exported(any_location, tmp_path, clock)["tables"].values())


def test_a_failure_mid_copy_leaves_the_destination_as_it_was(
    source: Path, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty.db"
    _open(empty, clock).close()
    empty_rows = data_checksum(empty)
    written: list[object] = []
    real_insert = json_io_sql.insert_forgetting

    def fail_after_two(*args: Any) -> Statement:
        if len(written) == 2:
            raise OSError("disk full (simulated)")
        written.append(args)
        return real_insert(*args)

    monkeypatch.setattr(json_io_sql, "insert_forgetting", fail_after_two)
    for destination in (empty, tmp_path / "new.db"):
        written.clear()
        with pytest.raises(OSError, match="simulated"):
            copy_memory(source, destination)
        assert len(written) == 2  # memories, sessions and two log rows were written, then undone
    assert data_checksum(empty) == empty_rows
    assert all(not t for t in exported(empty, tmp_path, clock)["tables"].values())
    assert not (tmp_path / "new.db").exists()  # a file the copy created goes with it


def test_the_source_itself_and_memory_are_refused(source: Path, tmp_path: Path) -> None:
    with pytest.raises(SameDatabaseError, match="both the source and the destination"):
        copy_memory(source, tmp_path / "." / "source.db")
    with pytest.raises(InvalidInputError, match="':memory:' keeps nothing"):
        copy_memory(source, ":memory:")
    assert isinstance(copy_memory(source, tmp_path / "fine.db"), CopyResult)


# --- the command line ---------------------------------------------------------------------

CLI = str(Path(sys.executable).with_name("tiered-memory"))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.slow  # 6.8 s measured on a busy machine
@pytest.mark.subprocess
def test_the_copy_command(source: Path, tmp_path: Path, clock: FakeClock) -> None:
    result = run("copy", str(source), str(tmp_path / "cli.db"), "--json")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    data = orjson.loads(result.stdout)
    doc = exported(source, tmp_path, clock)
    assert data["tables"] == {name: len(rows) for name, rows in doc["tables"].items()}
    assert data["memories"] == sum(len(doc["tables"][t.value]) for t in Tier)
    assert data["rows"] == sum(data["tables"].values())
    assert data["destination"] == str(tmp_path / "cli.db")
    assert exported(tmp_path / "cli.db", tmp_path, clock) == doc
    again = run("copy", str(source), str(tmp_path / "cli.db"))
    assert again.returncode == 1 and "already holds" in again.stderr
    human = run("copy", str(source), str(tmp_path / "human.db"))
    assert human.returncode == 0 and human.stdout.startswith(f"copied {data['memories']} memories")
    missing = run("copy", str(tmp_path / "nothing.db"), str(tmp_path / "x.db"))
    assert missing.returncode == 1 and "no database at" in missing.stderr
    assert not (tmp_path / "x.db").exists()


@pytest.mark.slow  # 7.6 s measured on a busy machine
@pytest.mark.subprocess
def test_the_copy_command_to_a_server_and_back(
    source: Path, pg_url: str, tmp_path: Path, clock: FakeClock
) -> None:
    result = run("copy", str(source), pg_url, "--json")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    data = orjson.loads(result.stdout)
    doc = exported(source, tmp_path, clock)
    assert data["tables"] == {name: len(rows) for name, rows in doc["tables"].items()}
    back = run("copy", pg_url, str(tmp_path / "back.db"), "--json")
    assert back.returncode == 0, back.stderr
    assert exported(tmp_path / "back.db", tmp_path, clock) == doc
    again = run("copy", str(source), pg_url)
    assert again.returncode == 1 and "already holds" in again.stderr


@pytest.mark.slow  # 2.8 s measured on a busy machine
@pytest.mark.subprocess
def test_database_arguments_take_server_urls_and_check_paths_as_before(tmp_path: Path) -> None:
    folder = run("stats", str(tmp_path))
    assert folder.returncode == 2 and "is a directory" in folder.stderr
    url = run("stats", "postgresql://nobody@127.0.0.1:9/none")
    assert "Invalid value" not in url.stderr  # the argument is accepted as a location

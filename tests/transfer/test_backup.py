"""BackupManager through the manager: snapshots, restore, JSON round trips, integrity."""

from __future__ import annotations

import os
import re
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest

import migrations.sqlite as sqlite_chain
from persistence import (
    BackupError,
    CorruptDatabaseError,
    ForeignDatabaseError,
    InvalidImportError,
    MissingDirectoryError,
    MissingFileError,
    NotADatabaseError,
    SameDatabaseError,
    SchemaTooNewError,
    Tier,
)
from persistence.sqlite import SQLiteStore
from tests.conftest import FakeClock, old_schema_store
from tests.support.data_checks import data_checksum, open_raw
from tests.support.populate import populate
from tiered_memory import AgentMemoryManager

DAY = 86_400_000
WORKER = str(Path(__file__).parents[1] / "support" / "worker.py")


@pytest.fixture
def full(db_path: Path, clock: FakeClock) -> AgentMemoryManager:
    memory = AgentMemoryManager.open(db_path, clock=clock, embed_in_background=False)
    populate(memory, clock)
    yield memory  # type: ignore[misc]
    memory.shutdown()


# --- snapshots ----------------------------------------------------------------------------


def test_backup_is_a_verified_private_timestamped_copy(
    full: AgentMemoryManager, db_path: Path
) -> None:
    snapshot = full.backup()
    assert snapshot.parent == db_path.with_name("agent-backups")
    assert re.fullmatch(r"agent-\d{8}T\d{6}Z\.db", snapshot.name)
    assert stat.S_IMODE(snapshot.stat().st_mode) == 0o600
    assert stat.S_IMODE(snapshot.parent.stat().st_mode) == 0o700
    full.maintain()
    assert data_checksum(snapshot) == data_checksum(db_path)
    assert not list(snapshot.parent.glob(".*partial"))


def test_backup_names_never_collide_and_keep_rotates(
    full: AgentMemoryManager, clock: FakeClock
) -> None:
    first = full.backup()
    second = full.backup()  # same second
    assert second.name.endswith("-2.db") and first != second
    for _ in range(3):
        clock.advance(1000)
        full.backup(keep=2)
    remaining = full.backups.list_backups()
    assert len(remaining) == 2 and first not in remaining


def test_backup_to_an_explicit_target(full: AgentMemoryManager, tmp_path: Path) -> None:
    target = tmp_path / "snap.db"
    assert full.backup(target) == target
    with pytest.raises(BackupError, match="already exists"):
        full.backup(target)
    with pytest.raises(MissingDirectoryError):
        full.backup(tmp_path / "nope" / "snap.db")


def test_in_memory_backup_needs_a_target(tmp_path: Path) -> None:
    with AgentMemoryManager.in_memory() as memory:
        memory.remember("x")
        with pytest.raises(Exception, match="backup_dir"):
            memory.backup()
        snapshot = memory.backup(tmp_path / "mem.db")
    with AgentMemoryManager.open(snapshot) as reopened:
        assert [m.content for m in reopened.query()] == ["x"]


def _corrupt_an_index(path: Path, index: str = "idx_episodic_created") -> None:
    """Overwrite the cell pointers of a (non-empty) index's root page."""
    conn = open_raw(path)
    root = conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = ?", (index,)).fetchone()[0]
    page_size = conn.pragma("page_size")
    conn.pragma("wal_checkpoint", "TRUNCATE")
    conn.close()
    with path.open("r+b") as handle:
        handle.seek((root - 1) * page_size + 8)
        handle.write(b"\xff" * 64)


@pytest.mark.slow  # 1.3 s measured on a busy machine
def test_a_damaged_database_is_not_backed_up(db_path: Path, clock: FakeClock) -> None:
    with AgentMemoryManager.open(db_path, clock=clock) as memory:
        for i in range(300):
            memory.remember(f"m{i}")
    _corrupt_an_index(db_path)
    with AgentMemoryManager.open(db_path, clock=clock) as memory:
        assert not memory.check_integrity().ok
        with pytest.raises(CorruptDatabaseError, match="damaged"):
            memory.backup()
        assert memory.backups.list_backups() == []


@pytest.mark.slow  # 1.9 s measured on a busy machine
@pytest.mark.subprocess
def test_backup_while_another_process_writes(full: AgentMemoryManager, db_path: Path) -> None:
    writer = subprocess.Popen([sys.executable, WORKER, "write", str(db_path), "400", "busy"],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert writer.stdout is not None and writer.stdout.readline().strip() == "READY"
    counts = []
    while writer.poll() is None or not counts:
        snapshot = full.backup()
        with SQLiteStore(snapshot) as copy:
            counts.append(copy.get_statistics().episodic_count)
            assert copy.schema_version == sqlite_chain.LATEST_VERSION
    assert writer.wait(60) == 0
    assert counts == sorted(counts)  # each snapshot is a consistent point in time
    assert full.check_integrity().ok


# --- restore ---------------------------------------------------------------------------


def test_restore_brings_back_the_snapshot_for_every_connection(
    full: AgentMemoryManager, db_path: Path
) -> None:
    snapshot = full.backup()
    expected = data_checksum(snapshot)
    with AgentMemoryManager.open(db_path, embed_in_background=False) as other:
        goal_id = full.scratchpad.get("goal").id  # type: ignore[union-attr]
        full.remember("after the snapshot")
        full.scratchpad.clear()
        result = full.restore(snapshot)
        assert result.schema_version == sqlite_chain.LATEST_VERSION
        assert full.scratchpad.get("goal").id == goal_id  # type: ignore[union-attr]
        assert not full.query(limit=None, tags=[]) or all(
            m.content != "after the snapshot" for m in full.query(limit=None)
        )
        assert other.get_session(full.sessions.all()[0].session_id) is not None
    full.maintain()
    assert data_checksum(db_path) == expected


@pytest.mark.parametrize("kind", ["missing", "text", "foreign", "newer", "corrupt"])
def test_a_bad_restore_source_changes_nothing(
    full: AgentMemoryManager, db_path: Path, tmp_path: Path, kind: str
) -> None:
    source = tmp_path / f"{kind}.db"
    error: type[Exception]
    if kind == "missing":
        error = MissingFileError
    elif kind == "text":
        source.write_text("not a database at all\n" * 100)
        error = NotADatabaseError
    elif kind == "foreign":
        with sqlite3.connect(source) as other:
            other.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
        other.close()
        error = ForeignDatabaseError
    elif kind == "newer":
        full.backup(source)
        conn = open_raw(source)
        conn.execute("INSERT INTO schema_version VALUES (?, 0, 'future')", (99,))
        conn.close()
        error = SchemaTooNewError
    else:
        full.backup(source)
        _corrupt_an_index(source, "idx_transcripts_session")
        error = CorruptDatabaseError
    full.maintain()
    before = data_checksum(db_path)
    with pytest.raises(error):
        full.restore(source)
    full.maintain()
    assert data_checksum(db_path) == before


def test_restoring_an_older_schema_migrates_it(db_path: Path, tmp_path: Path) -> None:
    old = tmp_path / "v1.db"
    with old_schema_store(old, 1) as v1:
        from persistence import Memory

        kept = v1.put_episodic(Memory.create("from version 1"))
    with AgentMemoryManager.open(db_path) as memory:
        result = memory.restore(old)
        assert (result.source_schema_version, result.schema_version) == (
            1,
            sqlite_chain.LATEST_VERSION,
        )
        assert memory.get(kept.id).content == "from version 1"  # type: ignore[union-attr]
        assert memory.forgetting_log() == []  # the v2 table exists after migrating


@pytest.mark.slow
@pytest.mark.subprocess
def test_restore_while_another_process_writes(full: AgentMemoryManager, db_path: Path) -> None:
    snapshot = full.backup()
    # The writer goes on until told, and a thread drains its ids as they come: a writer
    # blocked on a full pipe during a slow restore would write nothing after it.
    writer = subprocess.Popen([sys.executable, WORKER, "write-until-told", str(db_path), "busy"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert writer.stdin is not None and writer.stdout is not None
    assert writer.stdout.readline().strip() == "READY"
    ids: list[str] = []
    drain = threading.Thread(target=lambda: ids.extend(line.strip() for line in writer.stdout))  # type: ignore[union-attr]
    drain.start()
    full.restore(snapshot)
    deadline = time.monotonic() + 60
    while not any(full.get(i) is not None for i in ids[-20:]) and time.monotonic() < deadline:
        time.sleep(0.05)  # until a write made after the restore shows in the restored file
    writer.stdin.write("stop\n")
    writer.stdin.close()
    writer.wait(timeout=60)
    drain.join(timeout=60)
    assert writer.returncode == 0
    assert full.check_integrity().ok
    present = [full.get(i) is not None for i in ids]
    assert any(present), "no write made after the restore is in the restored database"
    first = present.index(True)  # writes before the restore are gone, every later one kept
    assert all(present[first:])


# --- JSON -------------------------------------------------------------------------------------


def _doc(path: Path) -> dict[str, object]:
    doc = orjson.loads(path.read_bytes())
    doc.pop("exported_at")
    return doc  # type: ignore[no-any-return]


def test_export_import_export_round_trip(full: AgentMemoryManager, tmp_path: Path) -> None:
    first = full.export_json(tmp_path / "one.json")
    assert stat.S_IMODE(first.stat().st_mode) == 0o600
    doc = _doc(first)
    tables = doc["tables"]
    assert all(tables[t] for t in ("scratchpad", "episodic", "semantic", "sessions",  # type: ignore[index]
                                   "session_transcripts", "repetition_schedules",
                                   "promotion_log", "forgetting_log"))  # fmt: skip
    with AgentMemoryManager.open(tmp_path / "empty.db", embed_in_background=False) as fresh:
        result = fresh.import_json(first)
        assert result.inserted == sum(len(v) for v in tables.values())  # type: ignore[attr-defined]
        second = fresh.export_json(tmp_path / "two.json")
        assert fresh.check_integrity().ok
    assert _doc(second) == doc


def test_merge_keeps_the_newer_row(
    full: AgentMemoryManager, tmp_path: Path, clock: FakeClock
) -> None:
    export = full.export_json(tmp_path / "base.json")
    ids = [m.id for m in full.query(tier=Tier.EPISODIC, limit=None)]
    clock.advance(1000)
    newer = full.update(ids[0], content="edited after the export")
    fresh = full.remember("only in the database")
    result = full.import_json(export, mode="merge")
    assert full.get(ids[0]).content == newer.content  # type: ignore[union-attr]
    assert full.get(fresh.id) is not None
    assert result.inserted == 0 and result.skipped > 0
    with AgentMemoryManager.open(tmp_path / "other.db") as other:
        other.import_json(export)
        other.import_json(full.export_json(tmp_path / "later.json"), mode="merge")
        assert other.get(ids[0]).content == "edited after the export"  # type: ignore[union-attr]
        assert other.get(fresh.id) is not None


def test_replace_import_makes_the_database_hold_exactly_the_document(
    full: AgentMemoryManager, tmp_path: Path
) -> None:
    export = full.export_json(tmp_path / "base.json")
    extra = full.remember("added later")
    full.import_json(export)
    assert full.get(extra.id) is None
    assert _doc(full.export_json(tmp_path / "again.json")) == _doc(export)


def test_a_bad_document_names_the_first_bad_row_and_writes_nothing(
    full: AgentMemoryManager, db_path: Path, tmp_path: Path
) -> None:
    doc = orjson.loads(full.export_json(tmp_path / "base.json").read_bytes())
    doc["tables"]["semantic"][1]["importance"] = 7
    broken = tmp_path / "broken.json"
    broken.write_bytes(orjson.dumps(doc))
    full.maintain()
    before = data_checksum(db_path)
    with pytest.raises(InvalidImportError, match=r"tables\.semantic\[1\]\.importance"):
        full.import_json(broken)
    with pytest.raises(MissingFileError):
        full.import_json(tmp_path / "missing.json")
    with pytest.raises(Exception, match="mode"):
        full.import_json(broken, mode="upsert")
    full.maintain()
    assert data_checksum(db_path) == before


# --- integrity and maintenance ------------------------------------------------------------


def test_check_integrity_lists_each_broken_invariant(
    full: AgentMemoryManager, db_path: Path
) -> None:
    assert full.check_integrity().ok
    semantic_id = full.query(tier=Tier.SEMANTIC, limit=1)[0].id
    with full.store.transaction() as conn:
        for trigger in (
            "episodic_keyword_insert",
            "episodic_vector_code_delete",
            "episodic_vector_code_update",
        ):
            conn.execute(f"DROP TRIGGER {trigger}")  # damage done by an outside tool
        conn.execute("INSERT INTO episodic SELECT * FROM semantic WHERE id = ?", (semantic_id,))
        conn.execute("INSERT INTO repetition_schedules (memory_id, next_review_at, interval_ms) "
                     "VALUES ('ghost', 0, 0)")  # fmt: skip
        conn.execute("UPDATE episodic SET embedding = x'00000000' WHERE id = ?", (semantic_id,))
    result = full.check_integrity()
    assert not result.ok
    found = {p.check for p in result.problems}
    assert {"one_tier_per_memory", "schedules_point_at_memories", "embedding_sizes",
            "promotion_log_agrees_with_tiers", "keyword_index_matches"} <= found  # fmt: skip


def test_maintenance_truncates_the_wal_and_vacuum_shrinks(db_path: Path) -> None:
    # No background writer (no embedder, no extractor); distinct texts (no deduplication).
    with AgentMemoryManager.open(db_path, embedder=None, extractor=None) as memory:
        with memory.transaction():
            ids = [memory.remember(f"{n} " + "x" * 2000).id for n in range(500)]
        with memory.transaction():
            for memory_id in ids:
                memory.forget(memory_id)
        result = memory.maintain(vacuum=True)
        assert result.wal_bytes_after == 0
        before = result.bytes_before + result.wal_bytes_before
        assert result.bytes_after < before / 4
        assert os.path.getsize(db_path) == result.bytes_after < 500 * 2000


# --- regressions from review ------------------------------------------------------------


def test_restore_refuses_the_live_database_by_any_name(
    full: AgentMemoryManager, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshot = full.backup()
    in_snapshot = sum(full.statistics().tier_counts.values())
    full.remember("written after the snapshot")
    before = data_checksum(db_path)
    link = tmp_path / "elsewhere" / "link.db"
    link.parent.mkdir()
    link.symlink_to(db_path)
    hard = tmp_path / "hard.db"
    os.link(db_path, hard)
    wal = Path(f"{db_path}-wal")
    assert wal.exists()
    monkeypatch.chdir(db_path.parent)
    for name in (db_path, Path(db_path.name), link, hard, wal, Path(f"./{wal.name}")):
        with pytest.raises(SameDatabaseError, match="not a snapshot.*nothing was restored"):
            full.restore(name)
    assert data_checksum(db_path) == before
    assert full.restore(snapshot).memories == in_snapshot  # a real snapshot still restores
    assert "written after the snapshot" not in {m.content for m in full.query(limit=None)}


def test_export_never_overwrites_the_database_or_an_existing_file(
    full: AgentMemoryManager, db_path: Path, tmp_path: Path
) -> None:
    full.maintain()
    before = data_checksum(db_path)
    for own in (db_path, Path(f"{db_path}-wal")):
        with pytest.raises(BackupError, match="the database itself"):
            full.export_json(own, overwrite=True)
    existing = tmp_path / "keep.json"
    existing.write_text("precious")
    with pytest.raises(BackupError, match="already exists"):
        full.export_json(existing)
    assert existing.read_text() == "precious"
    assert full.export_json(existing, overwrite=True) == existing
    assert orjson.loads(existing.read_bytes())["format"] == "tiered-memory"
    assert data_checksum(db_path) == before
    assert not list(tmp_path.glob(".*.partial"))


def test_restore_refuses_a_foreign_file_that_has_a_schema_version_table(
    full: AgentMemoryManager, db_path: Path, tmp_path: Path
) -> None:
    source = tmp_path / "impostor.db"
    with sqlite3.connect(source) as other:
        other.execute(
            "CREATE TABLE schema_version (version INTEGER, applied_at INTEGER, description TEXT)"
        )
        other.execute("INSERT INTO schema_version VALUES (1, 0, 'not ours')")
        other.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    other.close()
    full.maintain()
    before = data_checksum(db_path)
    with pytest.raises(ForeignDatabaseError, match="missing"):
        full.restore(source)
    assert data_checksum(db_path) == before and full.check_integrity().ok
    assert not list(db_path.parent.glob(".restore-*"))


@pytest.mark.slow
def test_merge_key_conflict_keeps_the_newer_entry(
    db_path: Path, tmp_path: Path, clock: FakeClock
) -> None:
    with AgentMemoryManager.open(tmp_path / "other.db", clock=clock) as other:
        other.scratchpad.put("goal", "old goal from the other file")
        export = other.export_json(tmp_path / "other.json")
    clock.advance(1000)
    with AgentMemoryManager.open(db_path, clock=clock) as memory:
        mine = memory.scratchpad.put("goal", "newer goal here")
        result = memory.import_json(export, mode="merge")
        assert memory.scratchpad.get("goal") == mine
        assert result.tables["scratchpad"].skipped == 1
        assert memory.check_integrity().ok


def test_merge_writes_no_rows_for_memories_it_kept(
    full: AgentMemoryManager, tmp_path: Path, clock: FakeClock
) -> None:
    export = full.export_json(tmp_path / "base.json")
    clock.advance(1000)
    for m in full.query(tier=Tier.SEMANTIC, limit=None):
        full.update(m.id, content=m.content + " (edited)")
    full.import_json(export, mode="merge")
    assert full.check_integrity().ok


def test_replace_refuses_a_document_whose_log_disagrees_with_its_tiers(
    full: AgentMemoryManager, db_path: Path, tmp_path: Path
) -> None:
    doc = orjson.loads(full.export_json(tmp_path / "base.json").read_bytes())
    doc["tables"]["promotion_log"][0]["to_tier"] = "semantic"
    moved_id = doc["tables"]["promotion_log"][0]["memory_id"]
    for tier in ("semantic",):
        for row in list(doc["tables"][tier]):
            if row["id"] == moved_id:
                doc["tables"][tier].remove(row)
                row["key"] = None
                doc["tables"]["episodic"].append(row)
    broken = tmp_path / "broken.json"
    broken.write_bytes(orjson.dumps(doc))
    full.maintain()
    before = data_checksum(db_path)
    with pytest.raises(InvalidImportError, match="inconsistent"):
        full.import_json(broken)
    assert data_checksum(db_path) == before


def test_the_embedding_model_travels_with_an_export_and_is_never_mixed(tmp_path: Path) -> None:
    from tests.support.worker import HashEmbedder

    options = {"embed_in_background": False}
    with AgentMemoryManager.open(tmp_path / "a.db", embedder=HashEmbedder("model-a", 8),
                                 **options) as a:  # fmt: skip
        a.remember("embedded by model a")
        a.flush()
        exported = a.export_json(tmp_path / "a.json")
    doc = _doc(exported)
    assert doc["embedding_model"] == "model-a"
    with AgentMemoryManager.open(tmp_path / "fresh.db", embedder=None, **options) as fresh:
        fresh.import_json(exported)
        assert fresh.store.get_meta("embedding_model") == "model-a"
    with AgentMemoryManager.open(tmp_path / "b.db", embedder=HashEmbedder("model-b", 8),
                                 **options) as b:  # fmt: skip
        b.remember("embedded by model b")
        b.flush()
    before = data_checksum(tmp_path / "b.db")
    with (
        AgentMemoryManager.open(tmp_path / "b.db", embedder=None, **options) as b,
        pytest.raises(InvalidImportError, match="embedding_model.*cannot be mixed"),
    ):
        b.import_json(exported, mode="merge")
    assert data_checksum(tmp_path / "b.db") == before
    raw = orjson.loads(exported.read_bytes())
    del raw["embedding_model"]  # an export from before the model was recorded
    older = tmp_path / "older.json"
    older.write_bytes(orjson.dumps(raw))
    with AgentMemoryManager.open(tmp_path / "old.db", embedder=None, **options) as old:
        assert old.import_json(older).inserted > 0


@pytest.mark.slow
def test_backups_in_the_same_second_from_several_threads_all_succeed(
    db_path: Path, clock: FakeClock
) -> None:
    """Each picks the first free timestamped name; one that is taken by the time its
    snapshot is ready gets the next free name instead of failing."""
    import threading

    with AgentMemoryManager.open(db_path, clock=clock, embedder=None) as memory:
        memory.remember_many([f"note {i} about the garden" for i in range(3000)])
        made: list[Path] = []
        failed: list[BaseException] = []

        def snapshot() -> None:
            try:
                made.append(memory.backup())
            except BaseException as exc:  # noqa: BLE001 - collected for the assert
                failed.append(exc)

        threads = [threading.Thread(target=snapshot) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failed == []
        assert len(set(made)) == 4 and all(p.is_file() for p in made)
        assert sorted(made) == sorted(memory.backups.list_backups())
        assert {data_checksum(p) for p in made} == {data_checksum(db_path)}

"""persistence/sqlite/sql/planner_sql.py: FTS5's shadow tables keep fixed statistics, so
the keyword index's segment delete (run by the merges inside every commit) is planned as
a rowid search however the file grew, in new files and in files that older versions left
with the statistics of an empty index (issue 32: a writer that never pauses collapsed).
At open, the other tables' stale statistics are refreshed, those tables left out
(issue 46: ``PRAGMA optimize=0x10002`` analyzed the whole keyword index at every open and
wrote four pages, whatever was stale)."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from persistence.sqlite.planner import refresh_statistics, shadow_statistics_right
from persistence.sqlite.sql.planner_sql import LARGE, STALE_TABLES
from tiered_memory import AgentMemoryManager

SEGMENT_DELETE = "EXPLAIN QUERY PLAN DELETE FROM memory_fts_data WHERE id>=? AND id<=?"


def _plan(conn: apsw.Connection) -> str:
    return " ".join(str(row[3]) for row in conn.execute(SEGMENT_DELETE, (1, 2)))


def _writer(memory: AgentMemoryManager) -> apsw.Connection:
    conn: apsw.Connection = memory.store.engine.writer  # type: ignore[attr-defined]
    return conn


def _stat1(path: Path) -> dict[tuple[str, str | None], str]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = conn.execute("SELECT tbl, idx, stat FROM sqlite_stat1 WHERE tbl LIKE '%fts%'")
        return {(str(t), i): str(s) for t, i, s in rows}
    finally:
        conn.close()


def _open(path: Path) -> AgentMemoryManager:
    return AgentMemoryManager.open(path, embedder=None, recall_review_quality=None)


def test_a_new_file_plans_fts5s_segment_delete_as_a_rowid_search(db_path: Path) -> None:
    with _open(db_path) as memory:
        conn = _writer(memory)
        assert "SEARCH memory_fts_data USING INTEGER PRIMARY KEY" in _plan(conn)
        assert shadow_statistics_right(conn)
        memory.remember("the keyword index is written", session_id=None)
    stats = _stat1(db_path)  # after the closing optimize too
    assert stats[("memory_fts_data", None)] == str(LARGE)
    assert stats[("memory_fts_docsize", None)] == str(LARGE)
    assert stats[("memory_fts_idx", "memory_fts_idx")].startswith(f"{LARGE} ")


def test_a_file_left_with_an_empty_indexs_statistics_is_fixed_at_its_next_open(
    db_path: Path,
) -> None:
    with _open(db_path) as memory:
        kept = memory.remember("blue herons nest by the lake").id
    # What the first open's optimize left in files of earlier versions: two rows.
    raw = apsw.Connection(str(db_path))
    raw.execute("DELETE FROM sqlite_stat1 WHERE tbl LIKE 'memory_fts_%'")
    raw.execute("INSERT INTO sqlite_stat1 VALUES ('memory_fts_data', NULL, '2')")
    raw.execute("ANALYZE sqlite_schema")
    assert "SCAN memory_fts_data" in _plan(raw)  # the whole table, on every merge
    raw.close()
    with _open(db_path) as memory:
        conn = _writer(memory)
        assert "SEARCH memory_fts_data USING INTEGER PRIMARY KEY" in _plan(conn)
        assert [h.memory.id for h in memory.recall("herons", k=3)] == [kept]
        memory.remember("a second memory, merged into the same index")
    assert _stat1(db_path)[("memory_fts_data", None)] == str(LARGE)
    fresh = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    assert "SEARCH memory_fts_data USING INTEGER PRIMARY KEY" in _plan(fresh)
    fresh.close()


def test_maintenance_keeps_the_fixed_statistics(db_path: Path) -> None:
    with _open(db_path) as memory:
        for n in range(30):
            memory.remember(f"memory number {n} about herons", session_id=None)
        memory.maintain()
        assert shadow_statistics_right(_writer(memory))
        assert "SEARCH memory_fts_data USING INTEGER PRIMARY KEY" in _plan(_writer(memory))
    assert _stat1(db_path)[("memory_fts_data", None)] == str(LARGE)


def _wal_bytes(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return wal.stat().st_size if wal.exists() else 0


def test_a_writable_open_of_a_file_with_fresh_statistics_writes_nothing(db_path: Path) -> None:
    with _open(db_path) as memory:
        for n in range(50):
            memory.remember(f"memory number {n} about herons", session_id=None)
    assert _wal_bytes(db_path) == 0  # checkpointed at close
    with _open(db_path) as memory:
        assert _wal_bytes(db_path) == 0  # (the pragma's analyses wrote 4 pages every open)
        assert shadow_statistics_right(_writer(memory))
        stale = [str(r[0]) for r in _writer(memory).execute(STALE_TABLES.sql)]
        assert any("memory_fts_data" in text for text in stale)  # SQLite would analyze it
        assert refresh_statistics(_writer(memory)) == [
            text for text in stale if "_fts_" not in text
        ]  # the engine leaves it out
    assert _stat1(db_path)[("memory_fts_data", None)] == str(LARGE)


def test_missing_statistics_of_a_table_are_refreshed_at_the_next_writable_open(
    db_path: Path,
) -> None:
    with _open(db_path) as memory:
        for n in range(50):
            memory.remember(f"memory number {n} about herons", tags=[f"t{n % 5}"])
    raw = apsw.Connection(str(db_path))
    before = raw.execute("SELECT idx, stat FROM sqlite_stat1 WHERE tbl = 'episodic'").fetchall()
    assert dict(before)["idx_episodic_created"].startswith("50 ")  # 50 rows
    raw.execute("DELETE FROM sqlite_stat1 WHERE tbl = 'episodic'")
    raw.close()
    read_only = AgentMemoryManager.open(db_path, embedder=None, read_only=True)
    read_only.close()  # a read-only open refreshes nothing
    check = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    assert check.execute("SELECT count(*) FROM sqlite_stat1 WHERE tbl = 'episodic'").fetchall() == [
        (0,)
    ]
    check.close()
    with _open(db_path):
        pass
    check = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    after = check.execute("SELECT idx, stat FROM sqlite_stat1 WHERE tbl = 'episodic'").fetchall()
    check.close()
    assert sorted(after) == sorted(before)
    assert _stat1(db_path)[("memory_fts_data", None)] == str(LARGE)


class _WalFile(apsw.VFSFile):
    """A file whose writes to the ``-wal`` fail while :data:`_FULL` says so (a full disk)."""

    def __init__(self, inherit: str, name: object, flags: list[int]) -> None:
        super().__init__(inherit, name, flags)  # type: ignore[arg-type]
        filename = name.filename() if hasattr(name, "filename") else name  # type: ignore[union-attr]
        self._wal = str(filename).endswith("-wal")

    def xWrite(self, data: bytes, offset: int) -> None:  # noqa: N802 (apsw's name)
        if _FULL["on"] and self._wal:
            raise apsw.FullError("disk full (simulated)")
        super().xWrite(data, offset)


class _FullVfs(apsw.VFS):
    def __init__(self) -> None:
        super().__init__("tm-planner-full", "unix", makedefault=True)

    def xOpen(self, name: object, flags: list[int]) -> apsw.VFSFile:  # noqa: N802
        return _WalFile("unix", name, flags)


_FULL = {"on": False}


def test_a_full_disk_while_refreshing_statistics_leaves_no_transaction_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refresh's commit failed on a full disk and left the writer inside a
    transaction: every later write failed (review of issue 46's open)."""
    import persistence.sqlite.store as store_module

    path = tmp_path / "full.db"
    with AgentMemoryManager.open(path, embedder=None, extractor=None) as memory:
        for n in range(300):
            memory.remember(f"memory number {n} about herons", tags=[f"t{n % 5}"])
    raw = apsw.Connection(str(path))
    raw.execute("DELETE FROM sqlite_stat1 WHERE tbl IN ('episodic', 'memory_tags')")
    raw.close()
    before = path.read_bytes()
    real = store_module.connection_optimize
    refreshed: list[bool] = []

    def full_meanwhile(*args: object, **kwargs: object) -> None:
        _FULL["on"] = True
        try:
            real(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            refreshed.append(True)
            _FULL["on"] = False

    monkeypatch.setattr(store_module, "connection_optimize", full_meanwhile)
    vfs = _FullVfs()
    try:
        with AgentMemoryManager.open(path, embedder=None, extractor=None) as memory:
            assert refreshed
            assert not _writer(memory).in_transaction
            assert path.read_bytes() == before  # the failed refresh changed nothing
            memory.remember("written once the disk has room again")
            assert memory.recall("room again", k=1)[0].memory.content.startswith("written")
    finally:
        vfs.unregister()

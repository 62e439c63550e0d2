"""Damaged files: ``check`` says what it found and what is still readable, and ``salvage``
copies every readable row into a new file and names what it could not read. Real damaged
pages: bytes of a table's leaf pages (found with ``dbstat``) overwritten on disk."""

from __future__ import annotations

import subprocess
from pathlib import Path

import apsw
import orjson
import pytest

from persistence import (
    BackupError,
    CorruptDatabaseError,
    UnsupportedOperationError,
    inspect_damage,
    salvage,
)
from tests.interfaces.test_cli import CLI
from tiered_memory import AgentMemoryManager

MEMORIES = 300
PAGE = 4096


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)


def make(path: Path, key: str | None = None) -> dict[str, str]:
    """A closed file: one session, MEMORIES memories with tags; ``{id: content}``."""
    contents = {}
    with AgentMemoryManager.open(path, key=key, embedder=None) as memory:
        session = memory.start_session()
        for i in range(MEMORIES):
            m = memory.remember(f"memory {i} about topic {i % 7} " + "x" * 150,
                                tags=[f"t{i % 3}"], session_id=session.session_id)  # fmt: skip
            contents[m.id] = m.content
        memory.append_transcript(session.session_id, "user", "hello")
    return contents


def leaf_pages(path: Path, table: str, key: str | None = None) -> list[int]:
    flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    conn = apsw.Connection(f"file:{path}?immutable=1", flags=flags)  # creates no -wal
    try:
        if key is not None:
            conn.pragma("hexkey", key.encode().hex())
        rows = conn.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno",
            (table,),
        ).fetchall()
    finally:
        conn.close()
    return [r[0] for r in rows]


def damage(path: Path, pages: list[int], *, whole: bool = False) -> None:
    """Overwrite the cell area of ``pages`` (their header and cell pointers stay), or
    with ``whole`` every byte of them."""
    with path.open("r+b") as f:
        for page in pages:
            f.seek((page - 1) * PAGE + (0 if whole else 8))
            f.write(b"\xde\xad\xbe\xef" * (1024 if whole else 100))


@pytest.fixture
def damaged(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    db = tmp_path / "damaged.db"
    contents = make(db)
    leaves = leaf_pages(db, "episodic")
    assert len(leaves) > 10
    damage(db, leaves[3:5])  # two leaves in the middle of the memories' table
    return db, contents


def saved(path: Path) -> dict[str, str]:
    with AgentMemoryManager.open(path, read_only=True, embedder=None) as memory:
        assert memory.check_integrity().ok
        return {m.id: m.content for m in memory.query(limit=10_000)}


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_salvage_copies_every_readable_row_and_names_the_lost(
    damaged: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    db, contents = damaged
    before = db.read_bytes()
    out = tmp_path / "saved.db"
    result = salvage(db, out)
    assert db.read_bytes() == before  # the damaged file is only read, nothing made beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged.db", "saved.db"]
    kept = saved(out)
    lost = set(contents) - set(kept)
    assert 0 < len(lost) < 60  # two leaves' worth, not more
    assert all(kept[i] == contents[i] for i in kept)  # what was saved is intact
    assert set(result.lost_memories) == lost  # and what was not is named
    assert result.memories == len(kept) == MEMORIES - len(lost)
    episodic = next(t for t in result.tables if t.table == "episodic")
    assert episodic.unreadable and episodic.copied == len(kept)
    assert not result.complete and result.damage
    schedules = next(t for t in result.tables if t.table == "repetition_schedules")
    assert schedules.dropped == len(lost)  # schedules of lost memories: dropped, not copied
    with AgentMemoryManager.open(out, embedder=None) as memory:  # a working memory file
        assert memory.recall("topic", k=3)
        assert len(memory.sessions.all()) == 1
        memory.remember("life goes on")
    assert inspect_damage(db).lost_memories == result.lost_memories  # the dry run agrees


@pytest.mark.slow  # 12.8 s measured on a busy machine
def test_the_cli_check_and_salvage_report_the_damage(
    damaged: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    db, contents = damaged
    check = run("check", str(db))
    assert check.returncode == 1
    lines = check.stdout.splitlines()
    assert len(lines) > 3
    assert any(line.startswith("readable_rows: episodic:") for line in lines)
    assert any(line.startswith("readable: ") and "lost" in line for line in lines)
    assert any("tiered-memory salvage" in line for line in lines)
    report = orjson.loads(run("check", str(db), "--json").stdout)
    assert report["ok"] is False and report["lost_memories"]
    assert report["readable_memories"] == MEMORIES - len(report["lost_memories"])
    assert {p["check"] for p in report["problems"]} >= {"integrity_check", "readable_rows"}
    out = tmp_path / "cli.db"
    result = run("salvage", str(db), str(out), "--json")
    assert result.returncode == 0, result.stderr
    data = orjson.loads(result.stdout)
    assert data["memories"] == report["readable_memories"]
    assert data["lost_memories"] == report["lost_memories"] and data["complete"] is False
    assert any(line.startswith("episodic:") for line in data["lost"])
    assert run("check", str(out)).returncode == 0
    again = run("salvage", str(db), str(out))
    assert again.returncode == 1 and "already exists" in again.stderr


@pytest.mark.slow  # 5.4 s measured on a busy machine
def test_a_file_too_damaged_to_open_is_still_reported_and_salvaged(tmp_path: Path) -> None:
    db = tmp_path / "worse.db"
    contents = make(db)
    with pytest.raises(CorruptDatabaseError):  # page 2: the schema version's table
        damage(db, [2], whole=True)
        AgentMemoryManager.open(db, read_only=True, embedder=None)
    check = run("check", str(db), "--json")
    assert check.returncode == 1
    report = orjson.loads(check.stdout)
    assert report["opened"] is False and report["readable_memories"] == MEMORIES
    assert report["problems"][0]["check"] == "open"
    out = tmp_path / "saved.db"
    result = run("salvage", str(db), str(out))
    assert result.returncode == 0, result.stderr
    assert f"salvaged {MEMORIES} memories" in result.stdout
    assert saved(out) == contents


@pytest.mark.slow  # 2.7 s measured on a busy machine
def test_an_encrypted_damaged_file_is_salvaged_under_its_key(tmp_path: Path) -> None:
    db = tmp_path / "vault.db"
    contents = make(db, key="k")
    damage(db, leaf_pages(db, "episodic", key="k")[3:4])  # the cipher refuses the page
    out = tmp_path / "saved.db"
    result = salvage(db, out, key="k")
    assert 0 < len(result.lost_memories) < 40
    with AgentMemoryManager.open(out, key="k", embedder=None) as memory:
        kept = {m.id: m.content for m in memory.query(limit=10_000)}
    assert set(kept) == set(contents) - set(result.lost_memories)
    assert b"memory 1 about" not in out.read_bytes()  # encrypted like its source
    assert not list(tmp_path.glob(".*.partial"))  # the scratch file is gone


def test_salvage_refuses_what_it_cannot_do(damaged: tuple[Path, dict[str, str]],
                                           tmp_path: Path) -> None:  # fmt: skip
    db, _ = damaged
    existing = tmp_path / "existing.db"
    existing.write_bytes(b"keep me")
    with pytest.raises(BackupError, match="already exists"):
        salvage(db, existing)
    assert existing.read_bytes() == b"keep me"
    with pytest.raises(UnsupportedOperationError):
        salvage("postgresql://u@localhost/db", tmp_path / "x.db")
    with pytest.raises(UnsupportedOperationError):
        inspect_damage("postgresql://u@localhost/db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged.db", "existing.db"]

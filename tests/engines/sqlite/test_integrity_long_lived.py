"""Integrity checks in a long-running process see what a new process sees.

FTS5 caches each table's structure per connection, and its integrity check (part of
``PRAGMA integrity_check``) reads that cache without looking for newer commits: a check on
a connection that had read the index before later writes used to report damage that is not
there, and ``backup()`` then refused the file.
"""

from __future__ import annotations

import random
from pathlib import Path

import apsw
import pytest

from persistence import CorruptDatabaseError
from persistence.sqlite import integrity
from tiered_memory import AgentMemoryManager, Tier

WORDS = ["garden", "apple", "river", "stone", "cloud", "paper", "lamp", "violin", "harbor", "maple"]


def test_a_long_lived_connection_checks_the_keyword_index_as_committed(tmp_path: Path) -> None:
    path = str(tmp_path / "plain.db")
    writer = apsw.Connection(path)
    writer.pragma("journal_mode", "wal")
    writer.execute("CREATE VIRTUAL TABLE f USING fts5(c)")
    reader = apsw.Connection(path)
    for i in range(20):
        writer.execute("INSERT INTO f VALUES (?)", (f"note {i} garden",))
    reader.execute("SELECT count(*) FROM f WHERE f MATCH 'garden'").fetchall()
    for i in range(20):
        writer.execute("INSERT INTO f VALUES (?)", (f"more {i} garden",))
    assert integrity.sqlite_integrity(reader) == []


def test_the_issue_example_backs_up(tmp_path: Path) -> None:
    with AgentMemoryManager.open(tmp_path / "min.db", embedder=None) as memory:
        for i in range(20):
            memory.remember(f"note {i} garden")
        memory.recall("garden", k=5)
        memory.check_integrity()
        for i in range(20):
            memory.remember(f"more {i} garden")
        assert memory.check_integrity().ok
        assert memory.backup().is_file()


@pytest.mark.slow
def test_thousands_of_interleaved_steps_never_report_false_damage(tmp_path: Path) -> None:
    rng = random.Random(13)
    checks = backups = 0
    with AgentMemoryManager.open(tmp_path / "long.db", embedder=None) as memory:
        sessions = [memory.start_session().session_id for _ in range(3)]
        ids: list[str] = []
        for step in range(3000):
            roll = rng.random()
            if roll < 0.55 or not ids:
                words = " ".join(rng.choices(WORDS, k=4))
                session = rng.choice([None, *sessions])
                ids.append(memory.remember(f"{step} {words}", session_id=session).id)
            elif roll < 0.65:
                memory.forget(ids.pop(rng.randrange(len(ids))))
            elif roll < 0.70:
                memory_id = rng.choice(ids)
                if memory.get(memory_id).tier is not Tier.SEMANTIC:  # type: ignore[union-attr]
                    memory.promote(memory_id, Tier.SEMANTIC, reason="test")
            elif roll < 0.90:
                memory.recall(rng.choice(WORDS), k=5)
            elif roll < 0.995:
                result = memory.check_integrity()
                assert result.ok, (step, result.problems)
                checks += 1
            else:
                memory.backup()
                backups += 1
    assert checks > 100 and backups > 3


def _flip_bytes_in_a_keyword_page(path: Path) -> None:
    """Flip bytes inside the fullest memory_fts_data leaf page (FTS5 segment blobs)."""
    conn = apsw.Connection(str(path))
    try:
        page_size = int(conn.pragma("page_size"))
        page = conn.execute(
            "SELECT pageno FROM dbstat WHERE name = 'memory_fts_data' AND pagetype = 'leaf' "
            "ORDER BY payload DESC LIMIT 1"
        ).fetchall()[0][0]
    finally:
        conn.close()
    offset = page * page_size - page_size // 4  # inside the cell content, near its end
    with path.open("r+b") as handle:
        handle.seek(offset)
        flipped = bytes(b ^ 0x5A for b in handle.read(256))
        handle.seek(offset)
        handle.write(flipped)


def test_real_damage_in_a_keyword_page_is_still_reported(tmp_path: Path) -> None:
    path = tmp_path / "damaged.db"
    with AgentMemoryManager.open(path, embedder=None) as memory:
        for i in range(300):
            memory.remember(f"note {i} " + " ".join(WORDS[(i + j) % 10] for j in range(6)))
        memory.recall("garden", k=5)
        assert memory.check_integrity().ok
        memory.maintain()  # checkpoint: every page is in the main file
        _flip_bytes_in_a_keyword_page(path)
        result = memory.check_integrity()
        assert not result.ok
        assert any(p.check == "integrity_check" for p in result.problems)
        with pytest.raises(CorruptDatabaseError, match="damaged"):
            memory.backup()

"""``read_only=True``: SQLite's read-only open, and not one byte of the file changes.

Every test takes the sha256 of the database and its -wal (and notes whether -shm exists)
before and after, on real files.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest

from migrations.sqlite import available_migrations
from persistence import (
    ForeignDatabaseError,
    Memory,
    MigrationRequiredError,
    MissingFileError,
    NotADatabaseError,
    ReadOnlyError,
    SchemaTooNewError,
    Tier,
)
from persistence.errors import EmbeddingModelMismatchError
from persistence.sqlite import SQLiteStore
from tests.conftest import FakeClock, file_digest
from tests.support.worker import HashEmbedder
from tiered_memory import AgentMemoryManager

Fingerprint = tuple[str, str | None, bool]


def fingerprint(db: Path) -> Fingerprint:
    """sha256 of the database and its -wal, and whether its -shm exists."""
    wal = Path(f"{db}-wal")
    return (
        file_digest(db),
        file_digest(wal) if wal.exists() else None,
        Path(f"{db}-shm").exists(),
    )


@pytest.fixture
def filled(tmp_path: Path) -> Path:
    """A closed database: embedded memories, two still waiting for a vector, a session,
    a scratchpad entry and a promotion."""
    db = tmp_path / "agent.db"
    clock = FakeClock()
    options: dict[str, Any] = {"embedder": HashEmbedder("test-a", 8), "clock": clock}
    with AgentMemoryManager.open(db, embed_in_background=False, **options) as memory:
        session = memory.start_session()
        first = memory.remember("The user prefers dark mode", session_id=session.session_id)
        memory.remember("Quarterly revenue grew five percent", tags=["finance"])
        memory.scratchpad.put("goal", "Ship v1 on Friday")
        memory.promote(first.id, Tier.SEMANTIC, reason="confirmed")
        memory.flush()
        memory.remember("The garden needs water on mondays")  # no vector yet
        memory.remember("Dark chocolate is the user's favourite")  # no vector yet
    assert not Path(f"{db}-wal").exists() and not Path(f"{db}-shm").exists()
    return db


def open_read_only(db: Path, **config: Any) -> AgentMemoryManager:
    config.setdefault("embedder", HashEmbedder("test-a", 8))
    return AgentMemoryManager.open(db, read_only=True, **config)


def test_reading_everything_changes_no_byte(filled: Path, tmp_path: Path) -> None:
    before = fingerprint(filled)
    out = tmp_path / "elsewhere"
    out.mkdir()
    with open_read_only(filled) as memory:
        assert memory.read_only
        stats = memory.statistics().storage
        assert stats.episodic_count == 3 and stats.unembedded_count == 2
        assert memory.recall("dark mode", k=3)
        assert [h.memory.tags for h in memory.recall("revenue", tags=["finance"])] == [("finance",)]
        assert memory.query(Tier.EPISODIC, tags=("finance",))
        assert memory.scratchpad.get("goal") is not None
        assert memory.check_integrity().ok
        memory.export_json(out / "all.json")
        memory.backup(out / "snap.db")
        assert memory.sessions.all() and memory.due_for_review(before=2**62)
        assert memory.forgetting_log() == []
    assert fingerprint(filled) == before
    assert sorted(p.name for p in filled.parent.iterdir()) == ["agent.db", "elsewhere"]
    with SQLiteStore(out / "snap.db", read_only=True) as snapshot:
        assert snapshot.get_statistics().unembedded_count == 2  # nothing was embedded


def test_recall_embeds_only_the_query_and_says_which_hits_had_no_vector(filled: Path) -> None:
    model = HashEmbedder("test-a", 8)
    before = fingerprint(filled)
    with open_read_only(filled, embedder=model, recall_review_quality=4,
                        recall_review_batch=1) as memory:  # fmt: skip
        hits = memory.recall("dark mode", k=5)
        by_content = {h.memory.content: h for h in hits}
        pending = by_content["Dark chocolate is the user's favourite"]
        embedded = by_content["The user prefers dark mode"]
        assert pending.memory.embedding is None
        assert pending.explanation.notes == ("no vector yet: ranked by keywords only",)
        assert "ranked by keywords only" in str(pending.explanation)
        assert [s.signal for s in pending.explanation.signals] == ["keyword"]
        assert embedded.explanation.notes == ()
        assert "vector" in [s.signal for s in embedded.explanation.signals]
    assert model.seen == ["dark mode"]  # the query, and no memory
    assert fingerprint(filled) == before  # no review was written either


MUTATIONS: dict[str, Callable[[AgentMemoryManager, Path], object]] = {
    "remember": lambda m, _: m.remember("new"),
    "remember scratchpad": lambda m, _: m.remember("new", Tier.SCRATCHPAD, key="k"),
    "remember_many": lambda m, _: m.remember_many(["a", "b"]),
    "update": lambda m, _: m.update(_any_id(m), content="changed"),
    "forget": lambda m, _: m.forget(_any_id(m)),
    "link": lambda m, _: m.link(*[x.id for x in m.query(Tier.EPISODIC)][:2]),
    "promote": lambda m, _: m.promote(_any_id(m), Tier.SEMANTIC),
    "review": lambda m, _: m.review(_any_id(m), 5),
    "decay": lambda m, _: m.decay(),
    "consolidate": lambda m, _: m.consolidate(),
    "start_session": lambda m, _: m.start_session(),
    "end_session": lambda m, _: m.end_session(m.sessions.all()[0].session_id),
    "append_transcript": lambda m, _: m.append_transcript(
        m.sessions.all()[0].session_id, "user", "hi"
    ),
    "scratchpad.put": lambda m, _: m.scratchpad.put("goal", "other"),
    "flush": lambda m, _: m.flush(),
    "maintain": lambda m, _: m.maintain(),
    "import_json": lambda m, doc: m.import_json(doc, "merge"),
    "restore": lambda m, doc: m.restore(doc.with_suffix(".db")),
    "transaction": lambda m, _: m.transaction().__enter__(),
}


def _any_id(memory: AgentMemoryManager) -> str:
    return memory.query(Tier.EPISODIC)[0].id


@pytest.mark.slow
@pytest.mark.parametrize("call", sorted(MUTATIONS))
def test_every_mutating_call_raises_read_only_error_and_changes_nothing(
    filled: Path, tmp_path: Path, call: str
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    with AgentMemoryManager.open(filled, embedder=None, embed_in_background=False) as memory:
        memory.export_json(source / "doc.json")
        memory.backup(source / "doc.db")
    before, listing = fingerprint(filled), sorted(p.name for p in tmp_path.iterdir())
    with open_read_only(filled) as memory:
        held = {m.id: m for m in memory.query()}
        with pytest.raises(ReadOnlyError, match="read-only"):
            MUTATIONS[call](memory, source / "doc.json")
        assert {m.id: m for m in memory.query()} == held  # RAM agrees with the file
        assert memory.scratchpad.get("goal").content == "Ship v1 on Friday"  # type: ignore[union-attr]
    assert fingerprint(filled) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == listing  # no staging file either


def test_the_store_read_only(filled: Path) -> None:
    before = fingerprint(filled)
    with SQLiteStore(filled, read_only=True) as store:
        assert store.memories.count(Tier.EPISODIC) == 3
        with pytest.raises(ReadOnlyError):
            store.put_episodic(Memory.create("x", Tier.EPISODIC))
        with pytest.raises(ReadOnlyError):
            store.set_meta("k", "v")
    assert fingerprint(filled) == before


def test_a_file_that_is_not_ready_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(MissingFileError, match="no database at"):
        AgentMemoryManager.open(missing, read_only=True)
    assert list(tmp_path.iterdir()) == []

    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(NotADatabaseError, match="empty"):
        AgentMemoryManager.open(empty, read_only=True)
    assert empty.stat().st_size == 0

    blank = tmp_path / "blank.db"  # a SQLite file with no tables at all
    conn = apsw.Connection(str(blank))
    conn.pragma("user_version", 1)
    conn.close()
    blank_before = fingerprint(blank)
    with pytest.raises(NotADatabaseError, match="empty SQLite file"):
        AgentMemoryManager.open(blank, read_only=True)
    assert fingerprint(blank) == blank_before

    foreign = tmp_path / "foreign.db"
    conn = apsw.Connection(str(foreign))
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    conn.close()
    with pytest.raises(ForeignDatabaseError):
        AgentMemoryManager.open(foreign, read_only=True)

    old = tmp_path / "old.db"
    SQLiteStore(old, migrations=available_migrations()[:3]).open().close()
    old_before = fingerprint(old)
    with pytest.raises(MigrationRequiredError, match=f"tiered-memory migrate {old}"):
        AgentMemoryManager.open(old, read_only=True)
    assert fingerprint(old) == old_before

    newer = tmp_path / "newer.db"
    SQLiteStore(newer).open().close()
    conn = apsw.Connection(str(newer))
    conn.execute("INSERT INTO schema_version VALUES (999, 0, 'from the future')")
    conn.close()
    newer_before = fingerprint(newer)
    with pytest.raises(SchemaTooNewError):
        AgentMemoryManager.open(newer, read_only=True)
    assert fingerprint(newer) == newer_before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "blank.db", "empty.db", "foreign.db", "newer.db", "old.db",
    ]  # fmt: skip


def test_migrate_upgrades_an_older_file_explicitly(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    SQLiteStore(old, migrations=available_migrations()[:3]).open().close()
    assert SQLiteStore.migrate(old) == (3, available_migrations()[-1].VERSION)
    with AgentMemoryManager.open(old, read_only=True, embedder=None) as memory:
        assert memory.statistics().storage.episodic_count == 0
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(NotADatabaseError):
        SQLiteStore.migrate(empty)
    with pytest.raises(MissingFileError):
        SQLiteStore.migrate(tmp_path / "missing.db")
    assert empty.stat().st_size == 0 and not (tmp_path / "missing.db").exists()


def test_another_model_needs_that_model_or_keywords_only(filled: Path) -> None:
    before = fingerprint(filled)
    with open_read_only(filled, embedder=HashEmbedder("test-b", 8)) as memory:  # noqa: SIM117
        with pytest.raises(EmbeddingModelMismatchError, match="embedder=None"):
            memory.recall("dark mode")
    with open_read_only(filled, embedder=None) as memory:
        hits = memory.recall("dark mode", k=5)
        assert len(hits) == 2 and all(h.explanation.notes == () for h in hits)
    assert fingerprint(filled) == before


def test_a_read_only_manager_sees_a_writers_commits(filled: Path) -> None:
    with (
        AgentMemoryManager.open(filled, embedder=None, embed_in_background=False) as writer,
        open_read_only(filled, embedder=None, external_change_check_ms=0) as reader,
    ):
        added = writer.remember("A hedgehog visited the garden")
        assert reader.get(added.id) is not None
        assert [h.memory.id for h in reader.recall("hedgehog")] == [added.id]
        writer.forget(added.id)
        assert reader.get(added.id) is None


WRITE_AND_DIE = """
import os, sys
from tiered_memory import AgentMemoryManager
memory = AgentMemoryManager.open(sys.argv[1], embedder=None, embed_in_background=False)
memory.remember("Written by a process that was killed before it closed the file")
os._exit(0)
"""


def leave_a_wal(db: Path) -> None:
    """Commit one memory in a process that exits without closing: -wal and -shm stay."""
    subprocess.run([sys.executable, "-c", WRITE_AND_DIE, str(db)], check=True, timeout=120)
    assert Path(f"{db}-wal").stat().st_size > 0 and Path(f"{db}-shm").exists()


@pytest.mark.slow  # 2.9 s measured on a busy machine
@pytest.mark.crash
@pytest.mark.subprocess
def test_a_wal_left_by_a_killed_writer_is_read_and_left_alone(filled: Path) -> None:
    leave_a_wal(filled)
    before = fingerprint(filled)
    with open_read_only(filled, embedder=None) as memory:
        assert [h.memory.content for h in memory.recall("killed", k=1)] == [
            "Written by a process that was killed before it closed the file"
        ]
    assert fingerprint(filled) == before


def test_a_read_only_open_leaves_other_files_beside_it_alone(filled: Path) -> None:
    stale = filled.parent / ".restore-ab12cd34.db"  # as a killed restore leaves it
    stale.write_bytes(b"half a restore")
    elsewhere = filled.parent / "elsewhere"
    elsewhere.mkdir()
    with open_read_only(filled, embedder=None) as memory:
        memory.backup(elsewhere / "snap.db")  # tidies only the folder it writes to
        memory.export_json(elsewhere / "all.json")
    assert stale.exists()  # a read-only open changes nothing beside its database
    with AgentMemoryManager.open(filled, **{"embedder": None, "embed_in_background": False}):
        assert not stale.exists()  # a read-write open tidies it away

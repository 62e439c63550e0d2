"""The PostgreSQL store's file operations (issue 27): a backup is a consistent JSON
snapshot that restores into an empty database, export and import in both modes keep
every table (log ids too), the integrity check finds broken invariants, maintenance
vacuums, and keys are refused."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from persistence import (
    InvalidInputError,
    MissingFileError,
    ReadOnlyError,
    Tier,
    UnsupportedOperationError,
)
from tests.conftest import FakeClock
from tests.support.pg_server import PgServer
from tests.support.populate import populate
from tests.support.worker import HashEmbedder
from tiered_memory import AgentMemoryManager

OPTIONS: dict[str, Any] = {"embedder": HashEmbedder("files-model", 3), "embed_in_background": False}


def _open(location: str, clock: FakeClock, **config: Any) -> AgentMemoryManager:
    return AgentMemoryManager.open(location, clock=clock, **{**OPTIONS, **config})


def _fill(memory: AgentMemoryManager, clock: FakeClock) -> None:
    populate(memory, clock)
    memory.remember("Ana met Bruno in Lisbon", relations=[("Ana", "met", "Bruno")])
    memory.graph.add_entity("Caroline", description="a counsellor")
    memory.flush()
    memory.remember("Dora moved to Oslo")  # no vector yet, queued for the graph


def _doc(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads(path.read_bytes())
    doc.pop("exported_at")
    return doc


def _exported(memory: AgentMemoryManager, tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / f"export-{len(list(tmp_path.iterdir()))}.json"
    return _doc(memory.export_json(out))


@pytest.fixture
def filled(pg_url: str, clock: FakeClock) -> str:
    with _open(pg_url, clock) as memory:
        _fill(memory, clock)
    return pg_url


@pytest.mark.slow  # 3.3 s measured on a busy machine
def test_a_backup_restores_into_an_empty_database(
    filled: str, pg_server: PgServer, tmp_path: Path, clock: FakeClock
) -> None:
    with _open(filled, clock) as memory:
        before = _exported(memory, tmp_path)
        snapshot = memory.backup(tmp_path / "snap.json")
        assert _doc(snapshot) == before  # a backup is the export format
        with pytest.raises(InvalidInputError, match="empty database") as refused:
            memory.restore(snapshot)
        assert "nothing was restored" in str(refused.value)
        assert _exported(memory, tmp_path) == before
    with pg_server.database("restored") as url, _open(url, clock) as fresh:
        result = fresh.restore(snapshot)
        assert result.memories == sum(len(before["tables"][t]) for t in
                                      ("scratchpad", "episodic", "semantic"))  # fmt: skip
        assert _exported(fresh, tmp_path) == before
        assert fresh.check_integrity().ok
        promoted = [p["id"] for p in before["tables"]["promotion_log"]]
        m = fresh.remember("promote me later")
        record = fresh.promote(m.id, Tier.SEMANTIC, reason="after restore")
        assert record.id > max(promoted)  # the log's ids went past the restored ones


def test_restore_checks_the_source_first(pg_url: str, tmp_path: Path, clock: FakeClock) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    with _open(pg_url, clock) as memory:
        with pytest.raises(MissingFileError):
            memory.restore(tmp_path / "missing.json")
        with pytest.raises(InvalidInputError):
            memory.restore(bad)
        assert memory.statistics().storage.episodic_count == 0


@pytest.mark.slow  # 1.2 s measured on a busy machine
def test_backups_are_named_like_sqlites_and_rotated(
    pg_url: str, tmp_path: Path, clock: FakeClock
) -> None:
    with _open(pg_url, clock, backup_dir=tmp_path) as memory:
        memory.remember("one")
        made = []
        for _ in range(3):
            made.append(memory.backup(keep=2))
            clock.advance(1000)
    name = re.compile(r"^tm_\d+_\w+-\d{8}T\d{6}Z\.json$")
    assert all(name.match(p.name) for p in made), made
    assert sorted(p.name for p in tmp_path.glob("*.json")) == sorted(p.name for p in made[1:])
    assert not list(tmp_path.glob(".*partial"))


@pytest.mark.slow  # 2.8 s measured on a busy machine
def test_import_replace_and_merge_keep_every_table(
    filled: str, pg_server: PgServer, tmp_path: Path, clock: FakeClock
) -> None:
    with _open(filled, clock) as memory:
        doc_path = memory.export_json(tmp_path / "all.json")
        full = _doc(doc_path)
        memory.remember("only here, replaced away")
        result = memory.import_json(doc_path)  # replace
        assert result.inserted == sum(len(rows) for rows in full["tables"].values())
        assert _exported(memory, tmp_path) == full
    with pg_server.database("merged") as url, _open(url, clock) as other:
        mine = other.remember("kept by the merge")
        other.import_json(doc_path, mode="merge")
        merged = _exported(other, tmp_path)
        assert [m["id"] for m in merged["tables"]["episodic"]][0] == mine.id
        ids = {m["id"] for t in ("scratchpad", "episodic", "semantic") for m in full["tables"][t]}
        assert ids <= {m["id"] for t in ("scratchpad", "episodic", "semantic")
                       for m in merged["tables"][t]}  # fmt: skip
        assert merged["tables"]["entities"] == full["tables"]["entities"]
        again = other.import_json(doc_path, mode="merge")  # nothing newer: all skipped
        assert again.inserted == 0 and again.updated == 0
        assert other.check_integrity().ok


@pytest.mark.slow  # 1.4 s measured on a busy machine
def test_check_integrity_lists_every_broken_invariant(
    filled: str, pg_server: PgServer, clock: FakeClock
) -> None:
    with _open(filled, clock) as memory:
        result = memory.check_integrity()
        assert result.ok and result.problems == () and "keyword_index_matches" in result.checks
        some = memory.query(Tier.EPISODIC)[0].id
    with pg_server.psycopg.connect(filled, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO tm_schedules (memory_id, next_review_at, interval_ms) "
            "VALUES ('ghost', 0, 0)"
        )
        conn.execute(
            "DELETE FROM tm_kw_docs WHERE seq = (SELECT seq FROM tm_memories WHERE id = %s)",
            (some,),
        )
        conn.execute(
            "UPDATE tm_kw_postings SET tf = tf + 1 WHERE seq = (SELECT max(seq) FROM tm_memories)"
        )
        conn.execute("UPDATE tm_meta SET value = '5' WHERE key = 'embedding_dim'")
        conn.execute("DELETE FROM tm_version")
        conn.execute(
            "INSERT INTO tm_entities (id, name, type, created_at, updated_at) "
            "VALUES ('ent_x', 'X', 'entity', 0, 0)"
        )
    with _open(filled, clock, read_only=True) as memory:
        result = memory.check_integrity()
    found = {(p.check, p.detail) for p in result.problems}
    assert not result.ok
    assert ("schedules_point_at_memories",
            "tm_schedules names memory ghost, which does not exist") in found  # fmt: skip
    assert any(c == "keyword_index_matches" and some in d and "no keyword row" in d
               for c, d in found)  # fmt: skip
    assert any(c == "keyword_index_matches" and "own words, its postings" in d
               for c, d in found)  # fmt: skip
    assert any(c == "embedding_sizes" and "not 5" in d for c, d in found)
    assert any(c == "schema" and "tm_version" in d for c, d in found)
    assert ("graph_invariants", "entity ent_x has no alias") in found


@pytest.mark.slow  # 1.4 s measured on a busy machine
def test_maintenance_vacuums_and_keys_are_refused(
    filled: str, tmp_path: Path, clock: FakeClock
) -> None:
    with _open(filled, clock, backup_dir=tmp_path) as memory:
        (tmp_path / ".x.json.abcdefgh.partial").write_text("left by a killed backup")
        result = memory.maintain(vacuum=True)
        assert result.bytes_before > 0 and result.bytes_after > 0
        assert (result.wal_bytes_before, result.wal_bytes_after) == (0, 0)
        assert result.vacuumed and result.optimized
        assert not (tmp_path / ".x.json.abcdefgh.partial").exists()
        with pytest.raises(UnsupportedOperationError, match="TLS"):
            memory.rekey("new key")
    with _open(filled, clock, read_only=True) as reader, pytest.raises(ReadOnlyError):
        reader.maintain()

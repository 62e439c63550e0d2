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
    Tier,
    UnsupportedOperationError,
)
from tests.conftest import FakeClock
from tests.pg_server import PgServer
from tests.populate import populate
from tests.worker import HashEmbedder
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

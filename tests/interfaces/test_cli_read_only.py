"""The command line's read commands change no byte of the database; only `migrate`
upgrades a file. Real subprocesses on real files, sha256 before and after."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from migrations.sqlite import LATEST_VERSION, available_migrations
from persistence import Tier
from persistence.sqlite import SQLiteStore
from tests.conftest import FakeClock
from tests.engines.sqlite.test_read_only import fingerprint
from tests.interfaces.test_cli import run
from tests.support.worker import HashEmbedder
from tiered_memory import AgentMemoryManager
from tiered_memory.cli import main

ROOT = Path(__file__).resolve().parents[2]


def read_commands(db: Path, out: Path, memory_id: str) -> dict[str, tuple[str, ...]]:
    """Every read command, with arguments that make it do its whole job."""
    return {
        "stats": ("stats", str(db)),
        "check": ("check", str(db)),
        "list": ("list", str(db), "--limit", "50"),
        "show": ("show", str(db), memory_id),
        "sessions": ("sessions", str(db), "--all"),
        "search": ("search", str(db), "memory garden dark", "-k", "10"),
        "search --keywords-only": ("search", str(db), "memory", "--keywords-only"),
        "context": ("context", str(db), "memory garden dark", "--max-tokens", "200"),
        "export": ("export", str(db), str(out / "all.json")),
        "backup": ("backup", str(db), "--to", str(out / "snap.db")),
        "graph": ("graph", str(db), "garden", "--depth", "3"),
        "entities": ("entities", str(db)),
    }


@pytest.fixture
def pending_db(tmp_path: Path) -> Path:
    """A closed database: sessions, transcripts, every tier, a promotion, memories
    embedded by the default model, and 20 still waiting for a vector."""
    db = tmp_path / "agent.db"
    clock = FakeClock()
    with AgentMemoryManager.open(db, clock=clock, embed_in_background=False) as memory:
        session = memory.start_session(metadata={"user": "ann"})
        for i in range(10):
            clock.advance(1000)
            m = memory.remember(f"memory {i} of the dark garden", tags=[f"t{i % 2}"],
                                session_id=session.session_id)  # fmt: skip
            memory.append_transcript(session.session_id, "user", f"line {i}")
            if i % 2:
                memory.promote(m.id, Tier.SEMANTIC, reason=f"because {i}")
        memory.scratchpad.put("goal", "Ship it", tags=["plan"])
        memory.graph.relate("Ana", "tends", "garden")
        memory.end_session(session.session_id)
        memory.flush()
        for i in range(20):
            memory.remember(f"pending memory {i} about the garden")
    return db


@pytest.fixture(params=["closed", "open by a writer"])
def state(request: pytest.FixtureRequest, pending_db: Path) -> Iterator[Path]:
    """The database closed (no -wal, no -shm), or held open by a writer whose last commits
    are only in the -wal."""
    if request.param == "closed":
        assert not Path(f"{pending_db}-wal").exists()
        yield pending_db
        return
    with AgentMemoryManager.open(pending_db, embedder=None, embed_in_background=False) as writer:
        writer.remember("committed to the WAL only, about the garden")
        assert Path(f"{pending_db}-wal").stat().st_size > 0
        yield pending_db


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize(
    "command", ["stats", "check", "list", "show", "sessions", "search",
                "search --keywords-only", "context", "export", "backup", "graph", "entities"],
)  # fmt: skip
def test_read_commands_change_no_byte(state: Path, tmp_path: Path, command: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with SQLiteStore(state, read_only=True) as store:
        memory_id = store.memories.page(Tier.SEMANTIC)[0].id
    before = fingerprint(state)
    listing = sorted(p.name for p in state.parent.iterdir())
    result = run(*read_commands(state, out, memory_id)[command], "--json")
    assert result.returncode == 0, result.stderr
    assert fingerprint(state) == before
    assert sorted(p.name for p in state.parent.iterdir()) == listing


@pytest.mark.slow
@pytest.mark.subprocess
def test_search_ranks_pending_memories_by_keywords_and_says_so(pending_db: Path) -> None:
    before = fingerprint(pending_db)
    # -k 40: every memory (score fusion gives one without a vector its keyword share
    # only, so the embedded ones come first)
    hits = orjson.loads(
        run("search", str(pending_db), "pending garden", "--json", "-k", "40").stdout
    )
    pending = [h for h in hits if h["memory"]["content"].startswith("pending")]
    assert pending and all("no vector yet" in h["explanation"] for h in pending)
    assert all(h["memory"]["embedding_dim"] is None for h in pending)
    others = [h for h in hits if h not in pending]
    assert others and all("no vector yet" not in h["explanation"] for h in others)
    assert fingerprint(pending_db) == before


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("command", ["stats", "check", "list", "show", "sessions", "search",
                                     "export", "backup", "maintain", "migrate"])  # fmt: skip
def test_no_command_makes_a_database_of_an_empty_or_missing_file(
    tmp_path: Path, command: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    empty, missing = tmp_path / "empty.db", tmp_path / "missing.db"
    empty.touch()
    for db, reason in ((empty, "empty"), (missing, "no database at")):
        args = {**read_commands(db, out, "some-id"), "maintain": ("maintain", str(db)),
                "migrate": ("migrate", str(db))}[command]  # fmt: skip
        result = run(*args)
        assert result.returncode == 1 and reason in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    assert empty.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db", "out"]
    assert list(out.iterdir()) == []


@pytest.mark.slow
@pytest.mark.subprocess
def test_an_older_file_is_read_only_after_migrate(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    SQLiteStore(db, migrations=available_migrations()[:3]).open().close()
    before = fingerprint(db)
    for command in ("stats", "list", "check", "search", "maintain"):
        args = (command, str(db), "garden") if command == "search" else (command, str(db))
        result = run(*args)
        assert result.returncode == 1 and f"tiered-memory migrate {db}" in result.stderr
    assert fingerprint(db) == before
    migrated = orjson.loads(run("migrate", str(db), "--json").stdout)
    assert migrated == {"database": str(db), "from_version": 3, "to_version": LATEST_VERSION}
    assert run("stats", str(db)).returncode == 0
    assert "already at schema" in run("migrate", str(db)).stdout


@pytest.mark.slow
@pytest.mark.subprocess
def test_search_keywords_only_reads_a_file_of_another_model(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    model = HashEmbedder("someone-elses-model", 8)
    with AgentMemoryManager.open(db, embedder=model, embed_in_background=False) as memory:
        memory.remember("The user prefers dark mode")
        memory.flush()
    before = fingerprint(db)
    refused = run("search", str(db), "dark mode")
    assert refused.returncode == 1 and "--keywords-only" in refused.stderr
    hits = orjson.loads(run("search", str(db), "dark mode", "--keywords-only", "--json").stdout)
    assert [h["memory"]["content"] for h in hits] == ["The user prefers dark mode"]
    assert [s["signal"] for s in hits[0]["signals"]] == ["keyword"]
    assert fingerprint(db) == before


def test_every_command_is_on_the_command_line_page() -> None:
    page = (ROOT / "docs" / "guides" / "cli.md").read_text()
    documented = set(re.findall(r"tiered-memory (\w+) ", page))
    assert set(main.commands) <= documented, set(main.commands) - documented

"""Reading a database where this user may not write: a folder without write permission,
a ``0444`` file. The read commands work and create no file; a read-only open leaves no
``-wal``/``-shm`` behind.

Tests run as root in CI, and root ignores permissions: the commands run in a child
process that drops to ``nobody`` (``os.setuid``) after importing what it needs (the
interpreter's own folder may not be readable by ``nobody``). Run as another user, the
permissions bind that user and no switch is needed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from persistence import Tier
from persistence.sqlite import SQLiteStore
from tests.engines.sqlite.test_read_only import fingerprint
from tests.interfaces.test_cli_read_only import pending_db, read_commands  # noqa: F401 - fixture
from tiered_memory.embedding import OnnxEmbedder

pytestmark = [pytest.mark.subprocess]

NOBODY = 65534

AS_ANOTHER_USER = """
import os, pkgutil, sys, importlib
import tiered_memory, persistence
for package in (tiered_memory, persistence):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        try:
            importlib.import_module(info.name)
        except ImportError:
            pass  # an optional extra not installed
import difflib, encodings.idna, unicodedata, onnxruntime, tokenizers  # noqa: E401 - imported lazily
from tiered_memory.cli import main
from tiered_memory import AgentMemoryManager
if os.geteuid() == 0:
    os.setgid(NOBODY)
    os.setuid(NOBODY)
assert os.geteuid() != 0
if sys.argv[1] == "open":
    with AgentMemoryManager.open(sys.argv[2], read_only=True, embed_in_background=False) as m:
        print(sum(m.statistics().tier_counts.values()))
else:
    sys.argv = ["tiered-memory", *sys.argv[1:]]
    main()
""".replace("NOBODY", str(NOBODY))


def as_another_user(*args: str, cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the CLI (or an open) as ``nobody``; ``cache``: a model cache it can read (root's
    own, under /root, is closed to other users, as another user's home would be)."""
    env = dict(os.environ)
    if cache is not None:
        env["TIERED_MEMORY_CACHE"] = str(cache)
    return subprocess.run(
        [sys.executable, "-c", AS_ANOTHER_USER, *args],
        capture_output=True, text=True, timeout=300, cwd="/", env=env,
    )  # fmt: skip


def readable_model_cache(tmp_path: Path) -> Path:
    """A copy of this user's built models that ``nobody`` can read (built here if needed)."""
    from tiered_memory.embedding.quality_model import cache_dir

    OnnxEmbedder.compact()  # the default model, built into this user's cache once
    copy = tmp_path / "model-cache"
    shutil.copytree(cache_dir(), copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    open_to_all(copy, 0o755)
    return copy


def open_to_all(path: Path, mode: int) -> None:
    """Let ``nobody`` reach ``path`` (pytest makes its folders 0700)."""
    path.chmod(mode)
    for parent in path.parents:
        if parent == Path("/") or parent.stat().st_mode & 0o005 == 0o005:
            continue
        parent.chmod(parent.stat().st_mode | 0o005)


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.slow
@pytest.mark.parametrize(
    "command", ["stats", "check", "list", "show", "search", "search --keywords-only",
                "export", "backup", "sessions", "graph", "entities"],
)  # fmt: skip
def test_read_commands_work_in_a_folder_this_user_cannot_write(
    pending_db: Path,  # noqa: F811 - the fixture
    tmp_path: Path,
    command: str,
) -> None:
    with SQLiteStore(pending_db, read_only=True) as store:
        memory_id = store.memories.page(Tier.SEMANTIC)[0].id
    cache = readable_model_cache(tmp_path) if command == "search" else None
    out = tmp_path / "out"
    out.mkdir()
    open_to_all(out, 0o777)
    pending_db.chmod(0o444)
    open_to_all(pending_db.parent, 0o555)
    try:
        before, files = fingerprint(pending_db), listing(pending_db.parent)
        result = as_another_user(
            *read_commands(pending_db, out, memory_id)[command], "--json", cache=cache
        )
        assert result.returncode == 0, result.stderr
        assert "error" not in result.stderr
        assert fingerprint(pending_db) == before
        assert listing(pending_db.parent) == files  # no -wal, -shm or anything else
        if command in ("export", "backup"):
            assert len(list(out.iterdir())) == 1  # written where it was told to go
        elif command.startswith("search"):
            assert orjson.loads(result.stdout), "no hit"
    finally:
        pending_db.parent.chmod(0o755)


@pytest.mark.slow  # 7.4 s measured on a busy machine
def test_a_read_only_open_of_a_0444_file_leaves_no_wal_or_shm(
    pending_db: Path,  # noqa: F811 - the fixture
) -> None:
    pending_db.chmod(0o444)
    open_to_all(pending_db.parent, 0o777)  # the folder is writable: only the file is not
    files = listing(pending_db.parent)
    before = fingerprint(pending_db)
    result = as_another_user("open", str(pending_db))
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 20
    assert listing(pending_db.parent) == files == ["agent.db"]
    assert fingerprint(pending_db) == before


@pytest.mark.slow
def test_a_write_there_is_refused_with_the_advice(
    pending_db: Path,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    open_to_all(pending_db.parent, 0o555)
    pending_db.chmod(0o444)
    try:
        before = fingerprint(pending_db)
        result = as_another_user("maintain", str(pending_db))
        assert result.returncode == 1
        assert "read-only" in result.stderr and "Traceback" not in result.stderr
        assert fingerprint(pending_db) == before
    finally:
        pending_db.parent.chmod(0o755)
    assert os.access(pending_db.parent, os.W_OK)


def test_a_read_only_open_of_a_0444_file_by_its_owner_leaves_nothing_behind(
    tmp_path: Path,
) -> None:
    """The same as the file's owner (root ignores the mode, so SQLite may make the
    ``-shm`` while it reads): once the manager closes, and once a read command exits,
    the folder holds the file alone, byte for byte as before."""
    from tiered_memory import AgentMemoryManager

    db = tmp_path / "agent.db"
    with AgentMemoryManager.open(db, embedder=None) as memory:
        for i in range(30):
            memory.remember(f"memory {i} about the lighthouse")
    db.chmod(0o444)
    before = fingerprint(db)
    with AgentMemoryManager.open(db, read_only=True, embedder=None) as memory:
        assert len(memory.recall("lighthouse", k=5)) == 5
        assert sum(memory.statistics().tier_counts.values()) == 30
    assert listing(tmp_path) == ["agent.db"]
    for command in (["stats", str(db), "--json"], ["search", str(db), "lighthouse",
                                                   "--keywords-only", "--json"]):  # fmt: skip
        result = subprocess.run(
            [sys.executable, "-m", "tiered_memory", *command],
            capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[3],
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert listing(tmp_path) == ["agent.db"]
    assert fingerprint(db) == before

"""Forget means forgotten (issue 28 §1): after a forgetting call returns and the manager
closes, no byte of the forgotten content, nor of its vector, is left in the file, its WAL
or anything beside it; content that was not forgotten is still found there (so each
grep can fail)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest

from tests.conftest import FakeClock
from tests.support.worker import HashEmbedder, hash_vector
from tiered_memory import AgentMemoryManager

DAY = 86_400_000
ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from tiered_memory.cli import main; main()"]  # this checkout's
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
MODEL = "erase"
SECRET = "Yxmirva Threnody met Zorblaxian Quellwort about the diagnosis."
SECRET_WORDS = ("zorblaxian", "quellwort", "yxmirva", "threnody")
KEEP = "keepsake harmonium trellis for Brimvale"
KEEP_WORDS = ("keepsake", "harmonium", "brimvale")


def folder_bytes(db: Path) -> bytes:
    """Every file in the database's folder (the file, -wal, -shm, exports...), lowercased."""
    return b"".join(p.read_bytes() for p in sorted(db.parent.iterdir()) if p.is_file()).lower()


def assert_forgotten(
    db: Path, gone: Sequence[str], kept: Sequence[str], dim: int, gone_texts: Sequence[str] = ()
) -> None:
    data = folder_bytes(db)
    for word in gone:
        assert word.lower().encode() not in data, f"{word!r} is still in the files"
    for word in kept:
        assert word.lower().encode() in data, f"{word!r} (not forgotten) is missing: bad grep"
    for text in gone_texts:
        vector = hash_vector(MODEL, dim, text).tobytes().lower()
        assert vector not in data, f"the vector of {text!r} is still in the files"


def assert_kept_vector(db: Path, text: str, dim: int) -> None:
    assert hash_vector(MODEL, dim, text).tobytes().lower() in folder_bytes(db)


def open_manager(db: Path, dim: int = 12, **config: Any) -> AgentMemoryManager:
    config.setdefault("embed_in_background", False)
    return AgentMemoryManager.open(db, embedder=HashEmbedder(MODEL, dim), **config)


def fill(memory: AgentMemoryManager, session_id: str | None = None) -> None:
    for n in range(40):
        memory.remember(f"filler note {n} about the garden", session_id=session_id)


@pytest.mark.parametrize("dim", [12, 16])  # 12: float vectors in vec0; 16: sign bits
def test_forget_leaves_no_byte_of_content_or_vector(tmp_path: Path, dim: int) -> None:
    db = tmp_path / "m.db"
    with open_manager(db, dim) as memory:
        session = memory.start_session().session_id
        fill(memory, session)
        secret = memory.remember(SECRET, session_id=session)
        memory.remember(KEEP, tier="semantic")
        fill(memory, session)
        memory.flush()
        assert secret.id in [hit.memory.id for hit in memory.recall("quellwort Yxmirva", k=50)]
        assert memory.graph.entity("Yxmirva Threnody") is not None  # the graph's provenance has it
        assert memory.forget(secret.id, reason="erasure request 7")
        assert secret.id not in [hit.memory.id for hit in memory.recall("quellwort Yxmirva", k=50)]
        assert memory.graph.entity("Yxmirva Threnody") is None
    assert_forgotten(db, SECRET_WORDS, KEEP_WORDS, dim, [SECRET])
    assert_kept_vector(db, KEEP, dim)
    assert b"erasure request 7" in folder_bytes(db)  # the audit keeps the reason
    with apsw.Connection(str(db)) as conn:  # ... and the id, not the content
        row = conn.execute("SELECT memory_id FROM forgetting_log").fetchall()
    assert [r[0] for r in row] == [secret.id]


def test_update_forgets_the_old_content(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with open_manager(db) as memory:
        fill(memory)
        old = memory.remember(SECRET)
        memory.remember(KEEP)
        memory.flush()
        memory.update(old.id, content="the patient is well", keep_history=False)
        memory.flush()
        assert memory.history(old.id) == []  # nothing kept (the default keeps both)
    assert_forgotten(db, SECRET_WORDS, [*KEEP_WORDS, "patient"], 12, [SECRET])


def test_decay_forgets_what_faded(tmp_path: Path, clock: FakeClock) -> None:
    db = tmp_path / "m.db"
    with open_manager(db, clock=clock) as memory:
        memory.remember(SECRET, importance=0.1)
        memory.remember(KEEP, tier="semantic")
        memory.flush()
        clock.advance(3650 * DAY)
        assert memory.decay().forgotten >= 1
    assert_forgotten(db, SECRET_WORDS, KEEP_WORDS, 12, [SECRET])


class TopicEmbedder:
    """One vector per first word: memories that start alike are near-duplicates."""

    model_id = MODEL

    def __init__(self, dim: int = 12) -> None:
        self.dim = dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([hash_vector(MODEL, self.dim, t.split()[0]) for t in texts])


def test_consolidation_merge_forgets_the_merged_copy(tmp_path: Path, clock: FakeClock) -> None:
    db = tmp_path / "m.db"
    options: dict[str, Any] = {"embed_in_background": False, "clock": clock}
    with AgentMemoryManager.open(db, embedder=TopicEmbedder(), **options) as memory:
        memory.remember("allergy noted: penicillin rash")
        clock.advance(1000)
        memory.remember("allergy noted again: quellwort zorblaxian")
        memory.remember(KEEP)
        memory.flush()
        assert memory.consolidate().merged
    assert_forgotten(db, ["quellwort", "zorblaxian"], ["penicillin", *KEEP_WORDS], 12)


def test_scratchpad_delete_forgets(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with open_manager(db) as memory:
        memory.remember(SECRET, tier="scratchpad", key="note")
        memory.remember(KEEP, tier="scratchpad", key="keep")
        memory.flush()
        assert memory.scratchpad.delete("note")
    assert_forgotten(db, SECRET_WORDS, KEEP_WORDS, 12, [SECRET])


def test_forget_session_removes_memories_and_transcript(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with open_manager(db) as memory:
        session = memory.start_session().session_id
        memory.append_transcript(session, "user", "my quellwort results came back")
        secret = memory.remember(SECRET, session_id=session)
        memory.remember(KEEP)
        memory.flush()
        report = memory.forget_session(session)
        assert report.memories == (secret.id,) and report.sessions == (session,)
        assert memory.get_session(session) is None
    assert_forgotten(db, SECRET_WORDS, KEEP_WORDS, 12, [SECRET])


def test_forget_agent_on_its_scoped_handle(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with open_manager(db) as memory:
        memory.remember(KEEP, agent_id="b")
    with open_manager(db, agent_id="a") as memory:
        session = memory.start_session().session_id
        memory.append_transcript(session, "user", "zorblaxian question")
        memory.remember(SECRET, session_id=session)
        memory.flush()
        report = memory.forget_agent("a")
        assert len(report.memories) == 1 and report.sessions == (session,)
    assert_forgotten(db, SECRET_WORDS, KEEP_WORDS, 12, [SECRET])


def test_export_after_forget_has_nothing(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with open_manager(db) as memory:
        secret = memory.remember(SECRET)
        memory.remember(KEEP)
        memory.flush()
        memory.forget(secret.id)
        memory.export_json(tmp_path / "export.json")
    assert_forgotten(db, SECRET_WORDS, KEEP_WORDS, 12, [SECRET])


def test_a_file_from_before_gets_the_guarantee(tmp_path: Path) -> None:
    """A file whose full-text tables lack the secure-delete option (every file written
    before it) and whose index still holds a term an earlier delete left behind."""
    db = tmp_path / "m.db"
    with open_manager(db) as memory:
        memory.remember(KEEP)
        earlier = memory.remember("earlier gossip about vexmoor")
        memory.flush()
    with apsw.Connection(str(db)) as conn:  # as an old version left it
        conn.execute("DELETE FROM memory_fts_config WHERE k = 'secure-delete'")
        conn.execute("DELETE FROM entity_fts_config WHERE k = 'secure-delete'")
        conn.execute("PRAGMA secure_delete = OFF")
        conn.execute(
            "DELETE FROM memory_fts WHERE rowid = "
            "(SELECT rowid FROM memory_index WHERE memory_id = ?)",
            (earlier.id,),
        )
    assert b"vexmoor" in folder_bytes(db)  # the old leftover the reopen must clean
    with open_manager(db) as memory:
        secret = memory.remember(SECRET)
        memory.flush()
        memory.forget(secret.id)
        memory.forget(earlier.id)
    with apsw.Connection(str(db)) as conn:
        configured = conn.execute("SELECT v FROM memory_fts_config WHERE k = 'secure-delete'")
        assert configured.fetchall() == [(1,)]
    assert_forgotten(db, [*SECRET_WORDS, "vexmoor"], KEEP_WORDS, 12, [SECRET])


@pytest.mark.slow  # 2.8 s measured on a busy machine
def test_a_crash_before_close_is_erased_at_the_next_open(tmp_path: Path) -> None:
    """SIGKILL after forget() returned: the next writable open finishes the erasure."""
    db = tmp_path / "m.db"
    script = f"""
import os, signal, sys
sys.path[:0] = {sys.path!r}
from tests.support.worker import HashEmbedder
from tiered_memory import AgentMemoryManager
m = AgentMemoryManager.open({str(db)!r}, embedder=HashEmbedder({MODEL!r}, 12),
                            embed_in_background=False)
m.remember({KEEP!r})
s = m.remember({SECRET!r})
m.flush()
m.forget(s.id)
os.kill(os.getpid(), signal.SIGKILL)
"""
    done = subprocess.run([sys.executable, "-c", script], check=False, timeout=120)
    assert done.returncode == -9
    with open_manager(db) as memory:
        assert memory.query(limit=None)[0].content == KEEP
    assert_forgotten(db, SECRET_WORDS, KEEP_WORDS, 12, [SECRET])


def _mcp_tool(tmp_path: Path, db: Path, tool: str, **arguments: Any) -> Any:
    """Call one tool of a writable MCP server on ``db`` over stdio; its report, once the
    server has exited."""
    import asyncio

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from tests.interfaces.test_mcp_server import call

    async def main() -> Any:
        params = StdioServerParameters(
            command=sys.executable, args=[*CLI[1:], "mcp", str(db), "--keywords-only"], env=ENV
        )
        with (tmp_path / "server.log").open("a") as err:
            async with (
                stdio_client(params, errlog=err) as (read, write),
                ClientSession(read, write) as client,
            ):
                await client.initialize()
                return await call(client, tool, **arguments)

    report = asyncio.run(main())
    (tmp_path / "server.log").unlink()
    return report


@pytest.mark.slow  # 8.7 s measured on a busy machine
@pytest.mark.subprocess
def test_mcp_forget_session_over_stdio(tmp_path: Path) -> None:
    """The MCP server's erasure tool: after the server exits, nothing of the session."""
    db = tmp_path / "m.db"
    with open_manager(db) as memory:
        session = memory.start_session().session_id
        memory.remember(SECRET, session_id=session)
        memory.remember(KEEP)
    report = _mcp_tool(tmp_path, db, "forget_session", session_id=session)
    assert len(report["memories"]) == 1 and report["sessions"] == [session]
    assert_forgotten(db, SECRET_WORDS, KEEP_WORDS, 12, [SECRET])


@pytest.mark.slow  # 4.1 s measured on a busy machine
def test_cli_forget_by_id_with_json(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with open_manager(db) as memory:
        secret = memory.remember(SECRET)
        memory.remember(KEEP)
    command = [*CLI, "forget", str(db), secret.id, "nope", "--json"]
    done = subprocess.run(command, capture_output=True, check=False, timeout=120, env=ENV)
    assert done.returncode == 1  # one id was not there; the other is forgotten
    assert json.loads(done.stdout) == {"memories": [secret.id], "sessions": [], "missing": ["nope"]}
    assert_forgotten(db, SECRET_WORDS, KEEP_WORDS, 12, [SECRET])


@pytest.mark.slow  # 8.2 s measured on a busy machine
@pytest.mark.parametrize("scope", ["--session", "--agent"])
def test_cli_forget_a_session_or_an_agent_with_json(tmp_path: Path, scope: str) -> None:
    """``tiered-memory forget DB --session S`` / ``--agent A --json``: the report, and no
    byte of what they held (memories, the agent's session and its transcript) once the
    command returns."""
    db = tmp_path / "m.db"
    with open_manager(db, agent_id="bot") as memory:  # the agent's session, its memory
        session = memory.start_session(session_id="s-erase").session_id
        secret = memory.remember(SECRET, session_id=session)
        memory.append_transcript(session, "user", "quellwort transcript line")
        memory.flush()
    with open_manager(db) as memory:
        memory.remember(KEEP)
    target = session if scope == "--session" else "bot"
    command = [*CLI, "forget", str(db), scope, target, "--json"]
    done = subprocess.run(command, capture_output=True, check=False, timeout=120, env=ENV)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report == {"memories": [secret.id], "sessions": [session], "missing": []}
    assert_forgotten(db, SECRET_WORDS, KEEP_WORDS, 12, [SECRET])
    with open_manager(db) as memory:
        assert memory.get(secret.id) is None
        assert [r.memory_id for r in memory.forgetting_log()] == [secret.id]


@pytest.mark.slow  # 11.4 s measured on a busy machine
@pytest.mark.subprocess
def test_mcp_forget_agent_over_stdio(tmp_path: Path) -> None:
    """The writable MCP server's ``forget_agent``: after the server exits, nothing of the
    agent's memories (another agent's stay)."""
    db = tmp_path / "m.db"
    with open_manager(db) as memory:
        secret = memory.remember(SECRET, agent_id="bot")
        memory.remember(KEEP, agent_id="other")
    report = _mcp_tool(tmp_path, db, "forget_agent", agent_id="bot", reason="erasure 9")
    assert report["memories"] == [secret.id]
    assert_forgotten(db, SECRET_WORDS, KEEP_WORDS, 12, [SECRET])
    assert b"erasure 9" in folder_bytes(db)


@pytest.mark.slow  # 1.5 s measured on a busy machine
def test_bulk_erasure_api_on_every_backend(memory: AgentMemoryManager) -> None:
    session = memory.start_session().session_id
    in_session = [memory.remember(f"session fact {n}", session_id=session).id for n in range(3)]
    by_agent = memory.remember("agent fact", agent_id="bot").id
    other = memory.remember("unrelated fact").id
    report = memory.forget_session(session, reason="erasure 1")
    assert sorted(report.memories) == sorted(in_session) and report.sessions == (session,)
    assert memory.get_session(session) is None
    assert memory.forget_agent("bot").memories == (by_agent,)
    assert memory.forget_many([other, "missing"]).to_dict() == {
        "memories": [other], "sessions": [], "missing": ["missing"]
    }  # fmt: skip
    assert {r.memory_id for r in memory.forgetting_log()} == {*in_session, by_agent, other}
    assert memory.query(limit=None) == []


def test_bad_erasure_input_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    from persistence import InvalidInputError, InvalidTypeError

    db = tmp_path / "m.db"
    with open_manager(db) as memory:
        kept = memory.remember(KEEP).id
        with pytest.raises(InvalidTypeError):
            memory.forget_many([kept, 3])  # type: ignore[list-item]
        with pytest.raises(InvalidTypeError):
            memory.forget_many(kept)  # a bare str is not a list of ids
        with pytest.raises(InvalidInputError):
            memory.forget_session("")
        with pytest.raises(InvalidInputError):
            memory.forget_agent("x", reason="")
        assert memory.get(kept) is not None
        assert memory.forgetting_log() == []


def test_a_backup_made_after_forget_has_nothing_and_one_made_before_keeps_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "live" / "m.db"
    for folder in ("live", "before", "after"):
        (tmp_path / folder).mkdir()
    with open_manager(db) as memory:
        secret = memory.remember(SECRET)
        memory.remember(KEEP)
        memory.flush()
        before = memory.backup(tmp_path / "before" / "b.db")
        memory.forget(secret.id)
        after = memory.backup(tmp_path / "after" / "a.db")  # the manager is still open
        assert_forgotten(after, SECRET_WORDS, KEEP_WORDS, 12, [SECRET])
    assert all(w.encode() in folder_bytes(before) for w in SECRET_WORDS)  # as it was
    assert_forgotten(db, SECRET_WORDS, KEEP_WORDS, 12, [SECRET])

"""The tiered-memory command line, run as an operator runs it: real subprocesses."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.conftest import FakeClock
from tests.support.data_checks import data_checksum
from tests.support.populate import populate
from tiered_memory import AgentMemoryManager, Tier

pytestmark = [pytest.mark.subprocess]

CLI = str(Path(sys.executable).with_name("tiered-memory"))


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def ok_json(*args: str) -> object:
    result = run(*args, "--json")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # no progress bar when stderr is not a terminal
    return orjson.loads(result.stdout)


@pytest.fixture
def agent_db(tmp_path: Path) -> Path:
    path = tmp_path / "agent.db"
    clock = FakeClock()
    with AgentMemoryManager.open(path, clock=clock) as memory:
        populate(memory, clock)
    return path


@pytest.mark.slow
def test_the_operator_round_trip(agent_db: Path, tmp_path: Path) -> None:
    snapshot = Path(ok_json("backup", str(agent_db))["backup"])  # type: ignore[index]
    assert snapshot.exists() and snapshot.parent.name == "agent-backups"
    out = tmp_path / "out.json"
    assert ok_json("export", str(agent_db), str(out)) == {"export": str(out)}
    new = tmp_path / "new.db"
    imported = ok_json("import", str(new), str(out))
    assert imported["inserted"] > 0 and imported["mode"] == "replace"  # type: ignore[index]
    restored = ok_json("restore", str(agent_db), str(snapshot))
    assert restored["memories"] > 0  # type: ignore[index]
    check = ok_json("check", str(agent_db))
    assert check["ok"] is True and check["problems"] == []  # type: ignore[index]
    stats_old, stats_new = ok_json("stats", str(agent_db)), ok_json("stats", str(new))
    for key in ("episodic_count", "semantic_count", "scratchpad_count", "transcript_count"):
        assert stats_old["storage"][key] == stats_new["storage"][key]  # type: ignore[index]


@pytest.mark.slow
def test_human_output_and_listing(agent_db: Path) -> None:
    result = run("stats", str(agent_db))
    assert result.returncode == 0 and "semantic" in result.stdout
    listed = ok_json("list", str(agent_db), "--tier", "semantic", "--limit", "2")
    assert len(listed) == 2 and {m["tier"] for m in listed} == {"semantic"}  # type: ignore[index, union-attr, arg-type]
    tagged = ok_json("list", str(agent_db), "--tag", "t1")
    assert tagged and all("t1" in m["tags"] for m in tagged)  # type: ignore[index, union-attr, attr-defined]
    memory_id = listed[0]["id"]  # type: ignore[index]
    shown = ok_json("show", str(agent_db), memory_id)
    assert shown["id"] == memory_id and shown["promotions"]  # type: ignore[index]
    assert memory_id in run("show", str(agent_db), memory_id).stdout
    sessions = ok_json("sessions", str(agent_db), "--all")
    assert len(sessions) == 1  # type: ignore[arg-type]
    maintained = ok_json("maintain", str(agent_db), "--vacuum")
    assert maintained["vacuumed"] is True and maintained["wal_bytes_after"] == 0  # type: ignore[index]


@pytest.mark.slow
def test_an_empty_session_list_says_why(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with AgentMemoryManager.open(db, embedder=None) as memory:
        pass
    empty = run("sessions", str(db))
    assert (empty.returncode, empty.stdout) == (0, "")
    assert f"no sessions in {db}" in empty.stderr
    with AgentMemoryManager.open(db, embedder=None) as memory:
        memory.end_session(memory.start_session().session_id)
        memory.end_session(memory.start_session().session_id)
    ended = run("sessions", str(db))
    assert (ended.returncode, ended.stdout) == (0, "")
    assert "no active sessions" in ended.stderr and "2 ended session(s): pass --all" in ended.stderr
    listed = run("sessions", str(db), "--all")
    assert len(listed.stdout.splitlines()) == 2 and listed.stderr == ""
    assert ok_json("sessions", str(db)) == []  # JSON stays clean


@pytest.mark.slow  # 7.0 s measured on a busy machine
def test_restore_onto_itself_is_refused(agent_db: Path) -> None:
    before = data_checksum(agent_db)
    result = run("restore", str(agent_db), str(agent_db))
    assert result.returncode == 1 and "not a snapshot" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert data_checksum(agent_db) == before


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("stats", "{tmp}/missing.db"), "no database at"),
        (("show", "{db}", "no-such-id"), "no memory no-such-id"),
        (("restore", "{db}", "{tmp}/notes.txt"), "not a SQLite database"),
        (("import", "{db}", "{tmp}/broken.json"), "not valid JSON"),
        (("backup", "{db}", "--to", "{tmp}/nope/snap.db"), "does not exist"),
    ],
)
def test_failures_exit_1_with_one_line(agent_db: Path, tmp_path: Path, args: tuple[str, ...],
                                       reason: str) -> None:  # fmt: skip
    (tmp_path / "notes.txt").write_text("just text\n" * 50)
    (tmp_path / "broken.json").write_text('{"format": "tiered-memory", "tab')
    filled = [a.format(tmp=tmp_path, db=agent_db) for a in args]
    result = run(*filled)
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1 and reason in result.stderr
    assert not (tmp_path / "missing.db").exists()


@pytest.mark.slow
def test_usage_errors_exit_2(agent_db: Path) -> None:
    assert run("stats").returncode == 2
    assert run("import", str(agent_db), "x.json", "--mode", "upsert").returncode == 2
    assert run("frobnicate").returncode == 2


def test_check_exits_1_when_the_file_is_inconsistent(agent_db: Path) -> None:
    with AgentMemoryManager.open(agent_db) as memory, memory.store.transaction() as conn:
        conn.execute("INSERT INTO repetition_schedules (memory_id, next_review_at, interval_ms) "
                     "VALUES ('ghost', 0, 0)")  # fmt: skip
    result = run("check", str(agent_db), "--json")
    assert result.returncode == 1
    assert orjson.loads(result.stdout)["problems"][0]["check"] == "schedules_point_at_memories"


@pytest.mark.slow
def test_progress_bar_only_on_a_terminal(agent_db: Path, tmp_path: Path) -> None:
    with AgentMemoryManager.open(agent_db) as memory, memory.transaction():
        for i in range(1200):
            memory.remember(f"bulk {i}", tier=Tier.SEMANTIC)
    quiet = run("export", str(agent_db), str(tmp_path / "quiet.json"))
    assert quiet.returncode == 0 and quiet.stderr == ""
    leader, follower = pty.openpty()
    process = subprocess.Popen([CLI, "export", str(agent_db), str(tmp_path / "tty.json")],
                               stdout=subprocess.PIPE, stderr=follower, text=True)  # fmt: skip
    os.close(follower)
    process.wait(timeout=120)
    drawn = b""
    try:
        while chunk := os.read(leader, 4096):
            drawn += chunk
    except OSError:
        pass
    os.close(leader)
    assert process.returncode == 0
    assert b"export" in drawn and b"100%" in drawn


@pytest.mark.slow
def test_a_failed_restore_or_import_leaves_no_new_database(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("just text\n" * 50)
    (tmp_path / "broken.json").write_text("{")
    for args in (("restore", "new1.db", "nosuch.db"), ("restore", "new2.db", "notes.txt"),
                 ("import", "new3.db", "broken.json")):  # fmt: skip
        result = run(*args, cwd=tmp_path)
        assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.json", "notes.txt"]


@pytest.mark.slow
def test_export_refuses_to_overwrite(agent_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    out.write_text("keep me")
    assert run("export", str(agent_db), str(agent_db)).returncode == 1
    assert run("export", str(agent_db), str(out)).returncode == 1
    assert out.read_text() == "keep me"
    assert run("export", str(agent_db), str(out), "--force").returncode == 0
    assert check_ok(agent_db)


def check_ok(db: Path) -> bool:
    return bool(ok_json("check", str(db))["ok"])  # type: ignore[index]


@pytest.mark.slow
def test_search_prints_hits_with_their_explanation(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with AgentMemoryManager.open(db) as memory:
        memory.remember("The user prefers dark mode", tags=["ui"])
        memory.remember("Quarterly revenue grew 5%")
        memory.flush()  # search is read only: it embeds nothing itself
    hits = ok_json("search", str(db), "which theme does the user like", "-k", "1")
    assert [h["memory"]["content"] for h in hits] == ["The user prefers dark mode"]  # type: ignore[index]
    assert "keyword #" in hits[0]["explanation"] and hits[0]["score"] > 0  # type: ignore[index]
    human = run("search", str(db), "revenue", "--tier", "episodic")
    assert human.returncode == 0 and "why:" in human.stdout and "revenue" in human.stdout
    tagged = ok_json("search", str(db), "revenue", "--tag", "ui")
    assert [h["memory"]["tags"] for h in tagged] == [["ui"]]  # type: ignore[index, union-attr]


@pytest.mark.slow
def test_context_prints_prompt_text_within_the_budget(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with AgentMemoryManager.open(db, embed_in_background=False) as memory:
        session = memory.start_session("chat").session_id
        asked = memory.remember("Which theme do you like?", session_id=session, speaker="Ann")
        said = memory.remember("I prefer dark mode.", session_id=session, speaker="Bo")
        memory.remember("Quarterly revenue grew 5%")
        memory.flush()
    found = ok_json("context", str(db), "dark mode theme", "--max-tokens", "40")
    assert isinstance(found, dict) and found["tokens"] <= 40 == found["max_tokens"]
    assert found["memory_ids"][:2] == [asked.id, said.id]
    assert "Bo: I prefer dark mode." in found["text"] and found["text"].count("## ") == 1
    human = run("context", str(db), "dark mode", "--max-tokens", "12", "--keywords-only")
    assert human.returncode == 0 and "tokens" in human.stderr
    assert len(human.stdout.rstrip("\n")) <= 48  # 12 tokens of 4 characters
    refused = run("context", str(db), "dark mode", "--max-tokens", "0")
    assert refused.returncode == 2 and "max-tokens" in refused.stderr


@pytest.mark.slow
def test_a_closed_pipe_is_not_a_failure(agent_db: Path) -> None:
    for _ in range(3):
        result = subprocess.run(f"'{CLI}' list '{agent_db}' --limit 50 | head -1", shell=True,
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        assert "error" not in result.stderr and len(result.stdout.splitlines()) == 1


@pytest.mark.slow
def test_search_json_shows_the_embedding_size_not_the_vector(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with AgentMemoryManager.open(db, embed_in_background=False) as memory:
        memory.remember("The user prefers dark mode")
        memory.flush()  # search is read only: it embeds nothing itself
    (hit,) = ok_json("search", str(db), "dark mode", "-k", "1")  # type: ignore[misc]
    assert "embedding" not in hit["memory"] and hit["memory"]["embedding_dim"] == 384


@pytest.mark.slow
def test_search_reinforces_only_when_asked(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with AgentMemoryManager.open(db, clock=FakeClock(), embed_in_background=False) as memory:
        stored = memory.remember("The user prefers dark mode")  # long overdue for review now

    def review_count() -> int:
        with AgentMemoryManager.open(db, embed_in_background=False) as memory:
            schedule = memory.schedule(stored.id)
            return 0 if schedule is None else schedule.review_count

    assert len(ok_json("search", str(db), "dark mode")) == 1  # type: ignore[arg-type]
    assert review_count() == 0
    assert len(ok_json("search", str(db), "dark mode", "--reinforce")) == 1  # type: ignore[arg-type]
    assert review_count() == 1


@pytest.mark.slow
def test_an_empty_search_query_is_a_usage_error(agent_db: Path) -> None:
    for query in ("", "   "):
        result = run("search", str(agent_db), query)
        assert result.returncode == 2 and "QUERY is empty" in result.stderr


@pytest.mark.slow
def test_export_onto_an_existing_file_names_the_force_flag(agent_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    out.write_text("keep me")
    result = run("export", str(agent_db), str(out))
    assert result.returncode == 1 and "--force" in result.stderr
    assert out.read_text() == "keep me"
    assert run("export", str(agent_db), str(out), "--force").returncode == 0
    assert orjson.loads(out.read_bytes())["format"]


@pytest.mark.slow
def test_every_read_command_and_the_file_commands_take_any_location(
    any_location: str, tmp_path: Path
) -> None:
    """A file or a postgresql:// URL: stats, list, show, sessions, search, graph, entities,
    export, backup, check and maintain (commands run side by side: each is a process)."""
    from tests.support.worker import HashEmbedder

    clock = FakeClock()
    with AgentMemoryManager.open(any_location, clock=clock, embed_in_background=False,
                                 embedder=HashEmbedder("cli-model", 3)) as memory:  # fmt: skip
        populate(memory, clock)
        fact = memory.remember("Ana met Bruno in Lisbon", relations=[("Ana", "met", "Bruno")])
        memory.flush()
    out, snap = tmp_path / "out.json", tmp_path / "snap.json"
    commands = {
        "stats": ("stats", any_location),
        "list": ("list", any_location, "--tier", "episodic"),
        "show": ("show", any_location, fact.id),
        "sessions": ("sessions", any_location),
        "search": ("search", any_location, "Lisbon", "--keywords-only", "-k", "1"),
        "graph": ("graph", any_location, "Ana"),
        "entities": ("entities", any_location),
        "export": ("export", any_location, str(out)),
        "backup": ("backup", any_location, "--to", str(snap)),
        "check": ("check", any_location),
        "maintain": ("maintain", any_location),
    }
    running = {name: subprocess.Popen([CLI, *args, "--json"], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
               for name, args in commands.items()}  # fmt: skip
    results = {}
    for name, process in running.items():
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 0 and stderr == "", (name, stderr)
        results[name] = orjson.loads(stdout)
    backend = "postgresql" if any_location.startswith("postgresql") else "sqlite"
    assert results["stats"]["storage"]["backend"] == backend
    assert results["stats"]["storage"]["episodic_count"] == len(results["list"]) > 0
    assert results["show"]["content"] == "Ana met Bruno in Lisbon"
    assert len(results["sessions"]) == 1
    assert [h["memory"]["id"] for h in results["search"]] == [fact.id]
    assert "Bruno" in str(results["graph"]) and len(results["entities"]) >= 2
    assert results["export"] == {"export": str(out)}
    assert results["backup"] == {"backup": str(snap)} and snap.stat().st_size > 0
    assert results["check"]["ok"] is True
    assert results["maintain"]["bytes_after"] > 0
    assert orjson.loads(out.read_bytes())["tables"]["episodic"]

"""Agent-scoped handles: two agents on one location, each sees none of the other's data.

Both backends: memories (get, query, recall, scratchpad, schedules), sessions and
transcripts, the forgetting log, exports and copies, the CLI (``--agent``) and the MCP
server; a memory the operator writes for an agent is that agent's. PostgreSQL also: the
graph (row-level security), a deliberately unfiltered SQL query on a scoped connection,
and a superuser refused a scoped handle. The server's test URLs connect as the superuser
``postgres``, whom row-level security never binds, so the scoped tests connect as an
ordinary role that owns the test database.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp.server.mcpserver.exceptions import ToolError

from migrations.postgres.v004_row_level_security import SCOPED_TABLES as V4_SCOPED
from persistence import InvalidInputError, SessionNotFoundError, UnsupportedOperationError
from tests.support.backends import open_as
from tests.support.pg_server import PgServer, app_url
from tiered_memory import AgentMemoryManager
from tiered_memory.cli import main
from tiered_memory.copying import copy_memory
from tiered_memory.integrations.mcp_server import serving

# v005 adds the embedding queue; v012 replaces the keyword rows with postings and windows
SCOPED_TABLES = (
    *(t for t in V4_SCOPED if t not in ("tm_keywords", "tm_kw_dirty")),
    "tm_unembedded",
    "tm_kw_postings",
    "tm_kw_docs",
)
SECRET = {"a": "vault code alpha 1111", "b": "vault code bravo 2222"}


def _populate(location: str, server: bool) -> dict[str, dict[str, Any]]:
    """Each agent writes a memory, a scratchpad entry, a session with a transcript line,
    a forgotten memory and (on a server) an entity; the operator writes a memory for each
    agent; the ids, per agent."""
    made: dict[str, dict[str, Any]] = {}
    for agent in ("a", "b"):
        with open_as(location, agent) as memory:
            vault = f"Vault {agent.upper()}"
            m = memory.remember(SECRET[agent], importance=0.9,
                                relations=[(vault, "guards", f"Code {agent.upper()}"),
                                           (vault, "stands_in", "Oslo")])  # fmt: skip
            pad = memory.remember(f"pad {SECRET[agent]}", "scratchpad", key=f"k{agent}")
            gone = memory.remember(f"gone {SECRET[agent]}")
            assert memory.forget(gone.id)
            made[agent] = {"memory": m.id, "pad": pad.id, "gone": gone.id}
            assert m.agent_id == agent and pad.agent_id == agent
            s = memory.start_session(f"s-{agent}")
            memory.append_transcript(s.session_id, "user", SECRET[agent])
            if server:  # a graph fact no memory asserts: the scope's on a server
                memory.graph.add_entity(f"Safe {agent.upper()}")
            else:  # a file could not tell whose it is
                with pytest.raises(UnsupportedOperationError, match="agent-scoped"):
                    memory.graph.add_entity(f"Safe {agent.upper()}")
    with open_as(location, None) as operator:
        for agent in ("a", "b"):
            made[agent]["by_operator"] = operator.remember(
                f"operator note {SECRET[agent]}", agent_id=agent
            ).id
    return made


@pytest.mark.slow  # 9.3 s measured on a busy machine
def test_scoped_handles_see_only_their_agent(any_location: str) -> None:
    server = any_location.startswith("postgresql")
    made = _populate(any_location, server)
    for agent, other in (("a", "b"), ("b", "a")):
        with open_as(any_location, agent) as memory:
            assert memory.get(made[agent]["memory"]) is not None
            assert memory.get(made[other]["memory"]) is None
            assert memory.get(made[other]["pad"]) is None
            assert memory.get(made[agent]["by_operator"]) is not None
            assert memory.get(made[other]["by_operator"]) is None
            texts = [m.content for m in memory.query()]
            assert sorted(texts) == sorted(
                [SECRET[agent], f"pad {SECRET[agent]}", f"operator note {SECRET[agent]}"]
            )
            hits = memory.recall("vault code", k=10)
            assert {h.memory.agent_id for h in hits} == {agent}
            assert [k for k, _ in memory.scratchpad.items()] == [f"k{agent}"]
            due = memory.due_for_review(before=2**62)
            assert {m.agent_id for m in due} == {agent}
            assert memory.schedule(made[other]["memory"]) is None
            assert not memory.forget(made[other]["memory"])
            with pytest.raises(InvalidInputError):
                memory.remember("x", agent_id=other)
            with pytest.raises(InvalidInputError):
                memory.query(agent_id=other)
            with pytest.raises(InvalidInputError):
                memory.recall("vault", agent_id=other)
            assert memory.get_session(f"s-{other}") is None
            assert memory.get_session(f"s-{agent}") is not None
            assert [s.session_id for s in memory.active_sessions()] == [f"s-{agent}"]
            with pytest.raises(SessionNotFoundError):
                memory.get_transcript(f"s-{other}")
            with pytest.raises(SessionNotFoundError):
                memory.append_transcript(f"s-{other}", "user", "intrusion")
            assert [e.content for e in memory.get_transcript(f"s-{agent}")] == [SECRET[agent]]
            assert [r.memory_id for r in memory.forgetting_log()] == [made[agent]["gone"]]
            counted = memory.statistics().storage  # counts of the agent's rows only
            tiers = (counted.scratchpad_count, counted.episodic_count, counted.semantic_count)
            assert sum(tiers) == 3 and counted.schedule_count == 3
            assert (counted.session_count, counted.transcript_count) == (1, 1)
            assert counted.forgotten_count == 1
            mine, theirs = agent.upper(), other.upper()
            names = {e.name for e in memory.graph.entities()}
            assert names == {f"Vault {mine}", f"Code {mine}", "Oslo"} | (
                {f"Safe {mine}"} if server else set()
            )
            assert memory.graph.entity(f"Vault {theirs}") is None
            assert memory.graph.entity(f"Code {theirs}") is None
            oslo = memory.graph.entity("Oslo")  # named by both agents' memories
            assert oslo is not None
            near = {n.entity.name for n in memory.graph.neighbors(oslo, depth=2)}
            assert near == {f"Vault {mine}", f"Code {mine}"}
            assert [m.id for m in memory.graph.memories_about(oslo)] == [made[agent]["memory"]]
            assert memory.graph.path(f"Code {mine}", "Oslo") is not None
            assert len(memory.graph.relations(oslo)) == 1
            stats = memory.graph.statistics()
            assert (stats.relations, stats.entities) == (2, 3 + server)
    with open_as(any_location, None) as operator:  # the unscoped handle sees everything
        assert operator.get(made["a"]["memory"]) is not None
        assert operator.get(made["b"]["memory"]) is not None
        assert {s.session_id for s in operator.active_sessions()} == {"s-a", "s-b"}
        assert len(operator.forgetting_log()) == 2


def _doc(path: Path) -> str:
    return json.dumps(json.loads(path.read_text()), sort_keys=True)


@pytest.mark.slow  # 3.9 s measured on a busy machine
def test_scoped_export_and_copy_hold_one_agent(any_location: str, tmp_path: Path) -> None:
    made = _populate(any_location, any_location.startswith("postgresql"))
    for agent, other in (("a", "b"), ("b", "a")):
        with open_as(any_location, agent) as memory:
            out = memory.export_json(tmp_path / f"{agent}.json")
        text = _doc(out)
        tables = json.loads(out.read_text())["tables"]
        assert SECRET[agent] in text and SECRET[other] not in text
        assert made[agent]["by_operator"] in text and made[other]["memory"] not in text
        assert [s["session_id"] for s in tables["sessions"]] == [f"s-{agent}"]
        assert [t["content"] for t in tables["session_transcripts"]] == [SECRET[agent]]
        assert [f["memory_id"] for f in tables["forgetting_log"]] == [made[agent]["gone"]]
        copied = tmp_path / f"copy-{agent}.db"
        copy_memory(any_location, copied, agent_id=agent)
        with open_as(str(copied), None) as alone:
            contents = sorted(m.content for m in alone.query())
            assert contents == sorted(
                [SECRET[agent], f"pad {SECRET[agent]}", f"operator note {SECRET[agent]}"]
            )
            assert [s.session_id for s in alone.active_sessions()] == [f"s-{agent}"]


@pytest.mark.slow  # 6.8 s measured on a busy machine
def test_cli_and_mcp_scoped(any_location: str, tmp_path: Path) -> None:
    made = _populate(any_location, any_location.startswith("postgresql"))
    runner = CliRunner()
    for agent, other in (("a", "b"), ("b", "a")):
        mine, theirs = agent.upper(), other.upper()
        for command in (["sessions", "--all"], ["entities"], ["graph", "Oslo", "--depth", "2"],
                        ["export", str(tmp_path / f"cli-{agent}.json")]):  # fmt: skip
            out = runner.invoke(main, ["--agent", agent, command[0], any_location,
                                       *command[1:], "--json"])  # fmt: skip
            assert out.exit_code == 0, out.output
            text = out.output
            if command[0] == "export":
                text += (tmp_path / f"cli-{agent}.json").read_text()
            assert f"s-{other}" not in text and f"Vault {theirs}" not in text
            assert SECRET[other] not in text
            assert f"s-{agent}" in text or f"Vault {mine}" in text or command[0] == "entities"
        missing = runner.invoke(main, ["--agent", agent, "graph", any_location,
                                       f"Vault {theirs}"])  # fmt: skip
        assert missing.exit_code != 0
        listed = runner.invoke(main, ["--agent", agent, "list", any_location, "--json"])
        assert listed.exit_code == 0, listed.output
        assert SECRET[agent] in listed.output and SECRET[other] not in listed.output
        shown = runner.invoke(main, ["--agent", agent, "show", any_location,
                                     made[other]["memory"]])  # fmt: skip
        assert shown.exit_code != 0
        found = runner.invoke(main, ["--agent", agent, "search", any_location, "vault",
                                     "--keywords-only", "--json"])  # fmt: skip
        assert found.exit_code == 0, found.output
        assert SECRET[agent] in found.output and SECRET[other] not in found.output

        async def through_mcp(agent: str = agent, other: str = other) -> None:
            async with serving(any_location, keywords_only=True, agent_id=agent) as srv:
                got = await srv.call_tool("get", {"memory_id": made[other]["memory"]})
                assert SECRET[other] not in str(got)
                hits = await srv.call_tool("recall", {"query": "vault code", "k": 10})
                text = str(hits)
                assert SECRET[agent] in text and SECRET[other] not in text
                own = await srv.read_resource(f"session://s-{agent}/transcript")
                assert SECRET[agent] in str(own)
                for uri in (f"session://s-{other}/transcript", f"memory://{made[other]['memory']}"):
                    try:
                        leaked = str(await srv.read_resource(uri))
                    except Exception as exc:  # the MCP error for a missing resource
                        leaked = str(exc)
                    assert SECRET[other] not in leaked
                intrusion = {"session_id": f"s-{other}", "role": "user", "content": "x"}
                with pytest.raises(ToolError, match="no session"):
                    await srv.call_tool("append_transcript", intrusion)

        asyncio.run(through_mcp())


def test_whole_file_operations_refused_on_a_scoped_file(tmp_path: Path) -> None:
    with open_as(str(tmp_path / "f.db"), "a") as memory:
        memory.remember("x")
        with pytest.raises(UnsupportedOperationError, match="agent-scoped"):
            memory.backup(tmp_path / "out.db")
        with pytest.raises(UnsupportedOperationError, match="agent-scoped"):
            memory.import_json(tmp_path / "in.json")


def test_a_session_id_is_one_per_file(tmp_path: Path) -> None:
    location = str(tmp_path / "f.db")
    with open_as(location, "a") as memory:
        memory.start_session("shared")
    with open_as(location, "b") as memory, pytest.raises(InvalidInputError, match="taken"):
        memory.start_session("shared")


@pytest.mark.slow  # 1.4 s measured on a busy machine
@pytest.mark.postgres
def test_unfiltered_sql_on_a_scoped_connection_sees_only_its_scope(
    pg_server: PgServer, pg_url: str
) -> None:
    url = app_url(pg_server, pg_url)
    _populate(url, True)
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT set_config('tm.scope', 'a', false)")
        for table in SCOPED_TABLES:
            scopes = conn.execute(f"SELECT DISTINCT scope FROM {table}").fetchall()
            assert set(scopes) <= {("a",)}, table
        assert conn.execute("SELECT count(*) FROM tm_memories").fetchone() == (3,)
        # a write naming another scope is refused by the policy's check
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO tm_sessions (scope, session_id, started_at, last_active_at) "
                "VALUES ('b', 'forged', 0, 0)"
            )
        conn.execute("SELECT set_config('tm.scope', '', false)")
        assert conn.execute("SELECT count(*) FROM tm_memories").fetchone() == (6,)


@pytest.mark.postgres
def test_superuser_refused_a_scoped_handle(pg_server: PgServer, pg_url: str) -> None:
    superuser = pg_url.replace("tm_app:@", "postgres:@", 1)  # pg_url connects as tm_app
    with pytest.raises(UnsupportedOperationError, match="superuser or has BYPASSRLS"):
        open_as(superuser, "a")
    with open_as(superuser, None) as memory:  # the operator's handle is fine
        assert memory.query() == []


@pytest.mark.slow  # 1.4 s measured on a busy machine
@pytest.mark.postgres
def test_a_memory_moved_to_another_agent_takes_its_rows_along(
    pg_server: PgServer, pg_url: str
) -> None:
    """Migration 6: changing a memory's agent (operator's SQL) moves its scope, its
    schedule, content key and keyword rows (v012: postings and window) along, with the
    keyword statistics."""
    url = app_url(pg_server, pg_url)
    made = _populate(url, True)
    import psycopg

    moved = made["a"]["memory"]
    with psycopg.connect(url, autocommit=True) as conn:
        before = dict(conn.execute("SELECT scope, n FROM tm_kw_stats").fetchall())
        conn.execute("UPDATE tm_memories SET agent_id = 'b' WHERE id = %s", (moved,))
        for table in ("tm_memories", "tm_schedules", "tm_content_keys"):
            column = "id" if table == "tm_memories" else "memory_id"
            row = conn.execute(f"SELECT scope FROM {table} WHERE {column} = %s", (moved,))
            assert row.fetchone() == ("b",), table
        for table in ("tm_kw_docs", "tm_kw_postings"):
            row = conn.execute(f"SELECT DISTINCT scope FROM {table} WHERE seq = "
                               "(SELECT seq FROM tm_memories WHERE id = %s)", (moved,))  # fmt: skip
            assert row.fetchall() == [("b",)], table
        after = dict(conn.execute("SELECT scope, n FROM tm_kw_stats").fetchall())
        assert (after["a"], after["b"]) == (before["a"] - 1, before["b"] + 1)
    with open_as(url, "b") as memory:
        assert memory.get(moved) is not None
    with open_as(url, "a") as memory:
        assert memory.get(moved) is None


@pytest.mark.postgres
def test_a_scoped_handle_searches_keywords_without_leakproof_advice(
    pg_server: PgServer, pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Row-level security binds the role (no superuser setting made): opening gives no
    LEAKPROOF advice and recall finds by keyword (the plan itself:
    tests/engines/postgres/test_pg_keyword_rls.py)."""
    url = app_url(pg_server, pg_url)
    with caplog.at_level("INFO", logger="tiered_memory.postgres"), open_as(url, "a") as memory:
        memory.remember("alpha beta gamma")
        assert [h.memory.content for h in memory.recall("alpha", k=1)] == ["alpha beta gamma"]
    assert not [r for r in caplog.records if "LEAKPROOF" in r.getMessage()]


@pytest.mark.slow  # 2.9 s measured on a busy machine
@pytest.mark.postgres
def test_a_scope_with_like_wildcards_matches_only_itself(pg_server: PgServer, pg_url: str) -> None:
    """Migration 8 reads rows through ``scope LIKE tm_scope_pattern()``: ``_``, ``%`` and
    ``\\`` in an agent id are matched literally."""
    url = app_url(pg_server, pg_url)
    agents = ("a_c", "abc", "a%", "a\\", "a\\\\")
    for agent in agents:
        with open_as(url, agent) as memory:
            memory.remember(f"note of {agent}")
    for agent in agents:
        with open_as(url, agent) as memory:
            assert [m.content for m in memory.query()] == [f"note of {agent}"], agent
    with open_as(url, None) as operator:
        assert len(operator.query()) == len(agents)


@pytest.mark.slow  # 6.7 s measured on a busy machine
@pytest.mark.postgres
@pytest.mark.parametrize(("scope", "low", "high"), [("", 400, 400), ("a", 150, 250)])
def test_the_planner_estimates_the_rows_row_security_keeps(
    pg_server: PgServer, pg_url: str, scope: str, low: int, high: int
) -> None:
    """Migration 8: the policy's rows are estimated from the scope column's statistics
    (version 4's rule was guessed at 0.2%: 1 row of 400), so at scale an ordinary role's
    nearest-neighbour search walks HNSW instead of comparing every vector."""
    import psycopg

    url = app_url(pg_server, pg_url)
    with AgentMemoryManager.open(url, embedder=None, embed_in_background=False) as memory:
        memory.remember_many([
            {"content": f"m{i}", "agent_id": "ab"[i % 2], "embedding": [1.0, i % 7, 2.0]}
            for i in range(400)
        ])  # fmt: skip
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")
        conn.execute("SELECT set_config('tm.scope', %s, false)", (scope,))
        top = conn.execute("EXPLAIN SELECT memory_id FROM tm_vectors").fetchone()
    rows = int(re.search(r"rows=(\d+)", top[0]).group(1))  # type: ignore[index, union-attr]
    assert low <= rows <= high, top

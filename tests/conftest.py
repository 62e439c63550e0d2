"""Shared fixtures: a store on a real file, and the same tests against ':memory:'."""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from persistence.sqlite import SQLiteStore
from persistence.sqlite.keyword_index import IDLE_ENV
from tiered_memory import AgentMemoryManager

# A PostgreSQL server per session and a database per test: pg_server, pg_url,
# any_location, and the postgres marker (tests/support/pg_server.py).
pytest_plugins = ["tests.support.pg_server"]


class NetworkAccessError(RuntimeError):
    """Raised when code under test reaches for the network."""


def _loopback(host: object) -> bool:
    """True for a literal loopback address (127.0.0.0/8, ::1): the inspector's tests talk
    to a server they started on this machine (never a name to look up, never another
    address)."""
    try:
        return isinstance(host, str) and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _no_network(event: str, args: tuple[Any, ...]) -> None:
    """Audit hook: the suite runs offline, so any internet lookup or connection fails it."""
    lookups = ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex")
    if event in lookups and not _loopback(args[0]):
        raise NetworkAccessError(f"network access in a test: {event}{args[:2]}")
    sends = ("socket.connect", "socket.sendto")
    if event in sends and isinstance(args[1], tuple) and not _loopback(args[1][0]):
        raise NetworkAccessError(f"network access in a test: {event} {args[1]}")


sys.addaudithook(_no_network)


@pytest.fixture(autouse=True, scope="session")
def _no_idle_merges_unless_asked() -> Iterator[None]:
    """A store's background thread merges the keyword index once the writer has rested
    50 ms: that rewrites FTS5's segment rows, which the byte and row checksums of "a
    failed operation changes nothing" tests would see as a change. In this process every
    store is constructed with the merger waiting an hour (the documented environment
    variable, read as a store is constructed; tests of the idle work pass
    ``idle_merge_s`` themselves); worker subprocesses of the crash tests drop the
    variable (tests/support/worker.py), so SIGKILLs land during merges."""
    saved = os.environ.get(IDLE_ENV)
    os.environ[IDLE_ENV] = "3600"  # before any module's fixtures
    yield
    if saved is None:
        os.environ.pop(IDLE_ENV, None)
    else:
        os.environ[IDLE_ENV] = saved


class FakeClock:
    """A settable clock in epoch milliseconds, so tests never sleep."""

    def __init__(self, start: int = 1_700_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "agent.db"


@pytest.fixture(params=["file", "memory"])
def store(request: pytest.FixtureRequest, db_path: Path, clock: FakeClock) -> Iterator[SQLiteStore]:
    """An open store, once on a file and once in memory."""
    path = str(db_path) if request.param == "file" else ":memory:"
    with SQLiteStore(path, clock=clock) as opened:
        yield opened


@pytest.fixture
def file_store(db_path: Path, clock: FakeClock) -> Iterator[SQLiteStore]:
    with SQLiteStore(db_path, clock=clock) as opened:
        yield opened


# --- one way to run a test on both engines --------------------------------------------

ENGINES = ("sqlite", "postgres")


def location_on(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, label: str = "agent"
) -> str:
    """A new memory's location: ``:memory:`` (SQLite in RAM), a file ``tmp_path/<label>.db``
    that does not exist yet (``sqlite``), or a fresh database on the session's server
    (``postgres``: the server starts only when a test gets here)."""
    if kind == "memory":
        return ":memory:"
    if kind == "sqlite":
        return str(tmp_path / f"{label}.db")
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """The engine a test runs on, ``sqlite`` then ``postgres`` (the test ids): a test that
    asks for it, or for a fixture built on it (``any_location``, ``new_location``), runs
    once on each; the ``postgres`` case gets the ``postgres`` marker
    (tests/support/pg_server.py)."""
    return str(request.param)


@pytest.fixture
def any_location(engine: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where ``AgentMemoryManager.open`` should make a store on :func:`engine`: a new
    file, or a new PostgreSQL database."""
    return location_on(engine, request, tmp_path)


@pytest.fixture
def new_location(
    engine: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[str], str]]:
    """A maker of fresh locations on :func:`engine` for tests that need several:
    ``new_location("a")`` is a new file ``tmp_path/a.db``, or a new database on the
    server (dropped after the test)."""
    with contextlib.ExitStack() as made:

        def make(label: str) -> str:
            if engine == "sqlite":
                return location_on(engine, request, tmp_path, label)
            server = request.getfixturevalue("pg_server")
            url: str = made.enter_context(server.database(f"{request.node.name}_{label}"))
            return url

        yield make


@pytest.fixture(params=["memory", *ENGINES])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """:func:`any_location`, or ``":memory:"`` (a store in RAM, for ``open()`` methods
    that take it): every form a store can be opened in."""
    return location_on(request.param, request, tmp_path)


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes (to prove a file was left untouched)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


BOTH_BACKENDS = "both_backends"
SQLITE_ONLY = "sqlite_only"
MANAGER_KINDS = ("file", "memory")


@pytest.hookimpl(tryfirst=True)  # before the marks and the fixtures' params are applied
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``make_memory`` (and so ``memory``) runs on a file and in memory; in a module or
    test marked ``both_backends`` also on a fresh PostgreSQL database (id ``postgres``),
    unless the test is marked ``sqlite_only(reason)``."""
    if "make_memory" not in metafunc.fixturenames:
        return
    definition = metafunc.definition
    on_both = definition.get_closest_marker(BOTH_BACKENDS) is not None
    if on_both and definition.get_closest_marker(SQLITE_ONLY) is None:
        # a parametrize mark, not metafunc.parametrize: pytest then skips the fixture's
        # own params (a second parametrization of one name is an error)
        kinds = [*MANAGER_KINDS, "postgres"]
        metafunc.definition.add_marker(pytest.mark.parametrize("make_memory", kinds, indirect=True))


@pytest.fixture(params=MANAGER_KINDS)
def make_memory(
    request: pytest.FixtureRequest, db_path: Path, clock: FakeClock
) -> Iterator[Callable[..., AgentMemoryManager]]:
    """Build open managers with extra config: on a file, in memory, and (tests marked
    ``both_backends``) on a PostgreSQL database; all share one location per test."""
    made: list[AgentMemoryManager] = []
    location = str(db_path)
    if request.param == "postgres":
        location = request.getfixturevalue("pg_url")

    def make(**config: Any) -> AgentMemoryManager:
        config.setdefault("clock", clock)
        # Tests compare file checksums and count writes: background embedding is opted
        # into by the tests about it (tests/domain/test_embedding_queue.py).
        config.setdefault("embed_in_background", False)
        if request.param == "memory":
            manager = AgentMemoryManager.in_memory(**config)
        else:
            manager = AgentMemoryManager.open(location, **config)
        made.append(manager)
        return manager

    yield make
    for manager in made:
        manager.shutdown()


@pytest.fixture
def memory(make_memory: Callable[..., AgentMemoryManager]) -> AgentMemoryManager:
    """An open manager on a file and in memory (and on PostgreSQL where the test is
    marked ``both_backends``): all must behave the same."""
    return make_memory()


SPEAKER_TABLES = ("scratchpad", "episodic", "semantic", "session_transcripts")


@contextlib.contextmanager
def old_schema_store(path: Path, version: int) -> Iterator[SQLiteStore]:
    """A store on a file at schema ``version`` (< 9) that today's record SQL can write:
    the ``speaker`` column of version 9 is there while the block runs and dropped after
    it, so the file that is left is exactly a version-``version`` file with those rows."""
    from migrations.sqlite import available_migrations
    from persistence.sqlite.connection import ConnectionOptions, connect

    assert version < 9
    with SQLiteStore(path, migrations=available_migrations()[:version]) as store:
        with store.transaction() as conn:
            for table in SPEAKER_TABLES:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN speaker TEXT")
        yield store
    conn = connect(str(path), ConnectionOptions())
    try:
        with conn:
            for table in SPEAKER_TABLES:
                conn.execute(f"ALTER TABLE {table} DROP COLUMN speaker")
    finally:
        conn.close()

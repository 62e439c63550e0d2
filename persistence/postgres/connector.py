"""How the PostgreSQL engine makes and sets up its connections (a part of
:class:`~persistence.postgres.database.PgDatabase`, apart for size and so the URL lives
in one place).

Each connection carries the handle's scope (``tm.scope``, which row-level security
reads), its writer id (``tm.writer``, in the NOTIFY payload), pgvector's types and the
search and commit settings below. Behind a transaction-mode pooler nothing may live in a
session: the settings are sent with each transaction instead (:meth:`PgConnector.setup`).
The URL may hold a password: it is kept here only; errors and names are made from it
here (:meth:`PgConnector.error`, :meth:`PgConnector.database_name`), never printed.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from persistence.errors import ConnectionLostError, DatabaseBusyError, TieredMemoryError
from persistence.locations import redact
from persistence.postgres import pooler
from persistence.postgres.tracing import connection_class, traced_by
from persistence.postgres.translate import call_error, connect_error
from persistence.postgres.write_count import CountingConnection
from persistence.records import PoolSettings, Synchronous
from persistence.trace_report import TraceReporter

Connection = psycopg.Connection[Any]

CLIENT_CHECK_MS = 500
"""How often a backend working on a statement checks that its client is still there
(``client_connection_check_interval``): a killed client's statement stops, its transaction
rolls back and its agent's writer lock is free within this, not when the statement ends."""
DEFAULT_EF_SEARCH = 100
"""``hnsw.ef_search`` set on every pooled connection when it opens (recall@10 >= 0.95 at
this depth; see ``HnswVectors``): a search at the usual depth sets nothing per call."""
GIN_PENDING_LIST_KB = 128
"""``gin_pending_list_limit`` of the library's connections (PostgreSQL's default: 4 MB).
New keyword entries wait in the GIN index's pending list, which every keyword search
reads through: after a bulk load and 200 single writes (650 kB pending) a 100k-memory
search took 68 ms instead of 40 ms (loaded machine). The writer that fills it past this
merges it (about one ``remember()`` in 40 pays a few ms), so searches read at most 128 kB."""
RECONNECT_S = 2.0
"""How long the pool retries a lost connection in the background (``reconnect_timeout``)
before it leaves the next call to start over, and the slices a call waits for a
connection in (each slice asks the pool to connect again). The pool's retries back off
(1, 2, 4 ... s): with psycopg_pool's 300 s, calls after a server restart waited for the
next retry, as long again as the outage had lasted (8 s down: 5.7 s and 5 failed calls
after it was back)."""


def take(pool: ConnectionPool[Connection], wait_s: float) -> Connection:
    """A connection from ``pool`` within ``wait_s``, waited for in slices of
    :data:`RECONNECT_S`: each asks the pool to connect again, so a call made while the
    server was down gets a connection as soon as it is back."""
    end = time.monotonic() + wait_s
    while True:
        left = end - time.monotonic()
        try:
            return pool.getconn(timeout=max(0.001, min(left, RECONNECT_S)))
        except PoolTimeout:
            if left <= RECONNECT_S:
                raise


def _check_client(conn: Connection) -> None:
    """Have ``conn``'s backend look for a gone client every :data:`CLIENT_CHECK_MS`
    (PostgreSQL 14 and later have the setting; an older server runs the statement out)."""
    if conn.info.server_version >= 140000:
        conn.execute(
            "SELECT set_config('client_connection_check_interval', %s, false)",
            (f"{CLIENT_CHECK_MS}ms",),
        )


class PgConnector:
    """The connections of one engine: single ones (:meth:`connect`) and a pool
    (:meth:`open_pool`), each set up for the handle (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        scope: str,
        writer_id: str,
        read_only: bool,
        settings: PoolSettings,
        pooler: bool,
        synchronous: Synchronous,
        tracer: TraceReporter | None,
    ) -> None:
        self._url = url
        self.location = redact(url)
        self.scope = scope
        self.writer_id = writer_id
        self.read_only = read_only
        self.settings = settings
        self.pooler = pooler
        self._tracer = tracer
        # NORMAL: a commit returns before its WAL reaches the disk (a client crash loses
        # nothing acknowledged; a server crash or power loss may lose the last fraction of a
        # second of commits, never half of one); FULL: it waits for the flush (~4 ms here).
        self._synchronous_commit = "on" if synchronous == "FULL" else "off"
        self._setup_sql: sql.Composed | None = None  # the pooler's per-transaction setup
        self._used: dict[int, float] = {}  # id(connection) -> when last handed out

    def error(self, exc: psycopg.Error, *, committing: bool = False) -> TieredMemoryError:
        """``exc`` as the library's error, the URL's password scrubbed."""
        return call_error(exc, self._url, committing=committing)

    def database_name(self) -> str | None:
        """The database the URL names (``None``: it names none, or cannot be read)."""
        try:
            name = conninfo_to_dict(self._url).get("dbname")
        except psycopg.Error:
            return None
        return None if name is None else str(name)

    def connect(self) -> Connection:
        """One connection outside the pool (migrations, the listener), set up like the
        pool's; errors are translated."""
        try:
            conn: Connection = connection_class(self._tracer, psycopg.Connection).connect(
                self._url, **pooler.connect_kwargs(self.settings, self.pooler)
            )
        except psycopg.Error as exc:
            raise connect_error(exc, self._url) from None
        traced_by(conn, self._tracer)
        if self.pooler:
            return conn  # no session setting: the next transaction may be elsewhere
        try:
            _check_client(conn)
        except psycopg.Error as exc:
            conn.close()
            raise self.error(exc) from None
        return conn

    def setup(self, conn: Connection) -> sql.Composed:
        """Behind a pooler: the settings of :meth:`_configure` for one transaction."""
        if self._setup_sql is None:
            self._setup_sql = pooler.setup_statement([
                ("tm.scope", self.scope), ("tm.writer", self.writer_id),
                ("hnsw.iterative_scan", "relaxed_order"),
                ("lock_timeout", f"{int(self.settings.lock_timeout_s * 1000)}ms"),
                ("synchronous_commit", self._synchronous_commit),
                ("gin_pending_list_limit", str(GIN_PENDING_LIST_KB)),
                ("hnsw.ef_search", str(DEFAULT_EF_SEARCH)),
                *[("transaction_read_only", "on")] * self.read_only,
                *[("client_connection_check_interval", f"{CLIENT_CHECK_MS}ms")]
                * (conn.info.server_version >= 140000),
            ])  # fmt: skip
        return self._setup_sql

    def _configure(self, conn: Connection) -> None:
        """Set up a new pool connection (scope, writer id, vectors, read-only, and how
        soon a backend notices its client is gone); behind a pooler only pgvector's
        types (client-side), the settings come with each transaction."""
        from pgvector.psycopg import register_vector

        traced_by(conn, self._tracer)
        if self.pooler:
            register_vector(conn)
            return
        conn.execute(
            "SELECT set_config('tm.scope', %s, false), set_config('tm.writer', %s, false), "
            "set_config('hnsw.iterative_scan', 'relaxed_order', false), "
            "set_config('lock_timeout', %s, false), "
            "set_config('default_transaction_read_only', %s, false), "
            "set_config('synchronous_commit', %s, false), "
            "set_config('gin_pending_list_limit', %s, false), "
            "set_config('hnsw.ef_search', %s, false)",
            (self.scope, self.writer_id, f"{int(self.settings.lock_timeout_s * 1000)}ms",
             "on" if self.read_only else "off", self._synchronous_commit,
             str(GIN_PENDING_LIST_KB), str(DEFAULT_EF_SEARCH)),
        )  # fmt: skip
        _check_client(conn)
        register_vector(conn)

    def _check(self, conn: Connection) -> None:
        """Ping a connection that has been idle a while (the pool drops it if dead)."""
        last = self._used.get(id(conn), 0.0)
        now = time.monotonic()
        if now - last > self.settings.ping_after_s:
            conn.execute("SELECT 1")
        self._used[id(conn)] = now

    def open_pool(self) -> ConnectionPool[Connection]:
        """A new pool, open, its connections set up; raises the server's specific error
        (password, database ...) or :class:`ConnectionLostError` when none opens in time."""
        s = self.settings
        pool: ConnectionPool[Connection] = ConnectionPool(
            self._url,
            min_size=s.min_size,
            max_size=s.max_size,
            timeout=s.wait_timeout_s,
            reconnect_timeout=RECONNECT_S,
            kwargs=pooler.connect_kwargs(s, self.pooler),
            configure=self._configure,
            check=self._check,
            connection_class=connection_class(self._tracer, CountingConnection),
            open=False,
            name="tiered-memory",
        )
        try:
            pool.open(wait=True, timeout=s.connect_timeout_s + 1)
        except PoolTimeout:
            pool.close()
            probe = self.connect()  # raises the specific error (password, database ...)
            probe.close()
            raise ConnectionLostError(f"cannot open connections to {self.location}") from None
        return pool

    def forget_connections(self) -> None:
        """The pool closed: its connections' last-use times go."""
        self._used.clear()

    def pool_timeout(self) -> TieredMemoryError:
        """The error of a wait for a pool connection that timed out: the server's own
        (down, refusing) if a direct attempt fails too, else the pool is too small."""
        try:
            self.connect().close()
        except TieredMemoryError as exc:
            return exc
        return DatabaseBusyError(
            f"no free connection to {self.location} within "
            f"{self.settings.wait_timeout_s} s: raise pool max_size or wait_timeout_s"
        )

"""PgDatabase: connections, transactions and their hooks, and other processes' commits
on a PostgreSQL server (the PostgreSQL twin of :class:`persistence.sqlite.database.Database`).

- **Connections** come from a :class:`psycopg_pool.ConnectionPool` in autocommit mode,
  made and set up by :class:`~persistence.postgres.connector.PgConnector` (the handle's
  scope, writer id, pgvector's types, search settings). A connection idle for a while is
  pinged before use, so a manager left idle across a server restart carries on.
- **Transactions** (:meth:`transaction`) follow the SQLite engine's rules: one at a time
  per store (an ``RLock``), nested blocks are savepoints, ``join=True`` joins the outer
  transaction, hooks run once when the outermost ends. ``BEGIN`` takes the scope's
  advisory lock (writers of one agent queue, as at SQLite's ``BEGIN IMMEDIATE``; writers
  of different agents do not) and then reads the scope's version row, in a statement
  of its own (a statement that waited for the lock reads the rows as they were when it
  started); a transaction that wrote bumps it in the same round trip as ``COMMIT``.
- **Behind a transaction-mode pooler** (``PoolSettings(pooler=True)`` or the URL's
  ``tm_pooler=transaction``): each transaction may run on another server session, so
  nothing lives in a session. No statement is prepared (``prepare_threshold=None``); the
  settings above are made inside each transaction (``set_config(..., true)``, sent with
  its ``BEGIN``); reads run in a transaction of their own (``BEGIN`` ... ``COMMIT``);
  there is no listener (``LISTEN`` needs a session): other processes' commits are found
  by the version rows (the scope's and those of the scopes it sees,
  :mod:`~persistence.postgres.change_watch`), read at most every
  ``change_check_interval_s``, and the scope's own at every ``BEGIN``. Advisory locks
  are transaction-level in both modes; the engine makes no temporary tables and holds
  no cursor past its transaction.
- **Tracing** (``trace=``): every statement of the store's connections is reported
  (:mod:`persistence.postgres.tracing`); without it the connections pay nothing.
- **Other processes' commits** arrive as ``NOTIFY tm_changes`` on a listening connection
  (:meth:`check_external_changes`) and are confirmed exactly by the version row at every
  ``BEGIN``; either calls the :meth:`on_external_change` callbacks.

Every psycopg error leaves as a :class:`~persistence.errors.TieredMemoryError`.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import pq, sql
from psycopg.abc import Params
from psycopg_pool import ConnectionPool, PoolTimeout

from persistence.errors import (
    ReadOnlyError,
    StoreClosedError,
    TieredMemoryError,
    TransactionAbortedError,
)
from persistence.frames import TransactionFrames, run_hooks
from persistence.locations import split_pooler
from persistence.postgres import pooler
from persistence.postgres.change_watch import Hook, PgChangeWatch, Stamp
from persistence.postgres.connector import PgConnector, take
from persistence.postgres.write_count import writes
from persistence.records import PoolSettings, Synchronous
from persistence.trace_report import TraceCallback, TraceReporter

log = logging.getLogger("tiered_memory.postgres")

Connection = psycopg.Connection[Any]
Row = tuple[Any, ...]
Statement = tuple[str, Params | None]
"""A statement for :meth:`PgDatabase.write_in_one_trip`: its text and parameters."""
_IDLE = pq.TransactionStatus.IDLE
_INERROR = pq.TransactionStatus.INERROR


def _first_row(cur: psycopg.Cursor[Any]) -> Row | None:
    """The first row of a statement's answer (``None``: it returned none)."""
    result = cur.pgresult
    if result is None or result.ntuples == 0:
        return None
    row: Row | None = cur.fetchone()
    return row


class _ThreadSnapshot(threading.local):
    """This thread's open :meth:`PgDatabase.snapshot` (the twin of SQLite's
    ``_ThreadReader.pinned``)."""

    def __init__(self) -> None:
        self.conn: Connection | None = None
        """The snapshot's connection; ``None`` while none is open in this thread."""
        self.pinned: Stamp | None = None
        """The change stamp given just before its ``BEGIN``: no later commit is under it."""


class PgDatabase(TransactionFrames, PgChangeWatch):
    """The engine under one :class:`~persistence.postgres.store.PostgresStore` (see the
    module docstring). ``url`` may hold a password: only its :attr:`connector` keeps it."""

    def __init__(
        self,
        url: str,
        *,
        scope: str = "",
        read_only: bool = False,
        settings: PoolSettings | None = None,
        change_check_interval_s: float = 0.05,
        synchronous: Synchronous = "NORMAL",
        trace: TraceCallback | None = None,
    ) -> None:
        url, named_pooler = split_pooler(url)
        self.scope = scope
        self.read_only = read_only
        self.settings = settings or PoolSettings()
        self.pooler = self.settings.pooler or named_pooler
        """True behind a transaction-mode pooler (see the module docstring)."""
        self.writer_id = uuid.uuid4().hex
        self.connector = PgConnector(
            url, scope=scope, writer_id=self.writer_id, read_only=read_only,
            settings=self.settings, pooler=self.pooler, synchronous=synchronous,
            tracer=None if trace is None else TraceReporter(trace),
        )  # fmt: skip
        """Makes and sets up the connections; the only holder of the URL."""
        self.location = self.connector.location
        self.lock = threading.RLock()
        self._snapshots = _ThreadSnapshot()
        self._pool: ConnectionPool[Connection] | None = None
        self._listener: Connection | None = None
        self._tx: Connection | None = None  # the connection of the open transaction
        TransactionFrames.__init__(self)
        self._change_listeners: list[Hook] = []
        self._seen_version: int | None = None
        self._seen_others: int | None = None  # behind a pooler: the other rows it sees
        self._told = 0  # times the change listeners were called (change_stamp())
        self.change_check_interval_s = change_check_interval_s
        self._next_check = 0.0  # when the version row is next read by check_external_changes
        key = f"tm.scope:{scope}"
        # the version row AFTER the lock, in a statement of its own (see the module doc)
        self._begin_sql = (
            "BEGIN; SELECT pg_advisory_xact_lock(hashtextextended({k}, 0)); "
            "SELECT v FROM tm_version WHERE scope = {s}"
        )
        self._commit_sql = (
            "UPDATE tm_version SET v = v + 1 WHERE scope = {s} "
            "AND pg_current_xact_id_if_assigned() IS NOT NULL RETURNING v; COMMIT"
        )
        self._literals = {"k": sql.Literal(key), "s": sql.Literal(scope)}
        # the same steps as separate statements, for a pipeline (one each)
        _, lock, version = self._begin_sql.split("; ")
        self._lock_sql = sql.SQL(lock).format(**self._literals)
        self._version_sql = sql.SQL(version).format(**self._literals)
        if self.pooler:  # the settings with the BEGIN; the lock and version row last
            self._begin_sql = "BEGIN; {setup}; " + self._begin_sql.split("; ", 1)[1]
        self._one_trip_bump = (  # the scope a parameter: its text may hold a %
            "UPDATE tm_version SET v = v + 1 WHERE scope = %s "
            "AND pg_current_xact_id_if_assigned() IS NOT NULL AND ({wrote}) RETURNING v"
        )

    # --- opening and closing ----------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._pool is not None

    def connect(self) -> Connection:
        """One connection outside the pool (migrations, the listener), set up like the
        pool's; errors are translated."""
        return self.connector.connect()

    def error(self, exc: psycopg.Error, *, committing: bool = False) -> TieredMemoryError:
        """``exc`` as the library's error (no password in it)."""
        return self.connector.error(exc, committing=committing)

    def start(self) -> None:
        """Open the pool and the listener (the schema must be current)."""
        pool = self.connector.open_pool()
        self._pool = pool
        if not self.read_only:
            with self.reading() as conn:
                conn.execute(
                    "INSERT INTO tm_version (scope) VALUES (%s) ON CONFLICT DO NOTHING",
                    (self.scope,),
                )
        self._seen_version, self._seen_others = self._read_version()
        self._listen()

    def close(self) -> None:
        """Close the pool and the listener; twice is harmless."""
        with self.lock:
            pool, listener = self._pool, self._listener
            self._pool = self._listener = None
            if listener is not None:
                listener.close()
            if pool is not None:
                pool.close()
            self.connector.forget_connections()

    def _require_pool(self) -> ConnectionPool[Connection]:
        pool = self._pool
        if pool is None:
            raise StoreClosedError("the store is closed")
        return pool

    # --- reading --------------------------------------------------------------------------

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """A connection for reads: the transaction's inside this thread's transaction (it
        sees its own writes), else one from the pool (autocommit: each statement sees
        the latest commits)."""
        if self.in_transaction:
            assert self._tx is not None
            try:
                yield self._tx
            except psycopg.Error as exc:
                self._aborted = True
                raise self.error(exc) from None
            return
        held = self._snapshots.conn
        if held is not None:
            try:
                yield held
            except psycopg.Error as exc:
                raise self.error(exc) from None
            return
        with self._bare() as conn:
            if self.pooler:  # one transaction, its settings made inside it
                rollback, setup = self._rollback_quietly, self.connector.setup(conn)
                yield from pooler.transaction_block(conn, "BEGIN", setup, rollback)
            else:
                yield conn

    @contextmanager
    def _bare(self) -> Iterator[Connection]:
        """A pool connection with nothing begun (one autocommit statement is one
        transaction, even behind a pooler); errors translated."""
        pool, conn = self._checkout()
        try:
            with conn:  # as pool.connection(): ends a transaction left open
                yield conn
        except psycopg.Error as exc:
            raise self.error(exc) from None
        finally:
            pool.putconn(conn)

    @contextmanager
    def snapshot(self) -> Iterator[Connection]:
        """A connection whose reads see one snapshot until the block ends: ``REPEATABLE
        READ READ ONLY`` on a pooled connection, which :meth:`reading` hands out in this
        thread until the block ends (nested blocks share it; inside this thread's
        transaction, the transaction's view)."""
        if self.in_transaction or self._snapshots.conn is not None:
            with self.reading() as conn:
                yield conn
            return
        pinned = self.change_stamp()  # before the snapshot: no later commit under it
        with self._bare() as conn:
            self._snapshots.pinned = pinned
            begin = sql.SQL("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            setup = self.connector.setup(conn) if self.pooler else None  # the pooler's settings
            conn.execute(begin if setup is None else sql.SQL("{}; {}").format(begin, setup))
            self._snapshots.conn = conn
            try:
                yield conn
            finally:
                self._snapshots.conn = None
                if not conn.closed:
                    conn.execute("ROLLBACK")

    def _as_snapshot_sees(self, stamp: Stamp) -> Stamp | None:
        """``stamp``, or inside this thread's snapshot ``None`` once it moved from the
        one pinned before the snapshot's ``BEGIN`` (the snapshot does not see that
        commit: RAM copies read under it must not be kept as current)."""
        held = self._snapshots
        if held.conn is None or stamp == held.pinned:
            return stamp
        return None

    # --- transactions ---------------------------------------------------------------------

    def require_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyError("the store was opened with read_only=True; nothing was written")

    @contextmanager
    def transaction(self, *, join: bool = False) -> Iterator[Connection]:
        """All or nothing (see the module docstring); yields the transaction's connection.
        A server error raised in the block leaves as a :class:`TieredMemoryError`."""
        with self.lock:
            try:
                if self._depth and self.in_transaction:
                    if join or self._joined:
                        yield from self._joined_block()
                    else:
                        yield from self._savepoint()
                    return
                self.require_writable()
                pool, conn = self._checkout()
                try:
                    yield from self._outer(conn, join)
                finally:
                    self._tx = None
                    pool.putconn(conn)
            except psycopg.Error as exc:
                raise self.error(exc) from None

    def _checkout(self) -> tuple[ConnectionPool[Connection], Connection]:
        """The pool and a connection taken from it (given back by the caller), the
        pool's failures translated."""
        pool = self._require_pool()
        try:
            return pool, take(pool, self.settings.wait_timeout_s)
        except PoolTimeout:
            raise self.connector.pool_timeout() from None
        except psycopg.Error as exc:
            raise self.error(exc) from None

    def write_in_one_trip(
        self, statements: Sequence[Statement], *, wrote: tuple[str, Sequence[Any]]
    ) -> list[Row | None]:
        """Run ``statements`` as one transaction in ONE round trip, and return the first
        row of each (``None`` for a statement that returned none). ``wrote`` is an SQL
        condition (and its parameters) true when the statements changed data: the
        scope's version moves only then (a statement that wrote nothing may still have
        taken a transaction id, through a statement trigger).

        psycopg's pipeline mode sends ``BEGIN``, the scope's writer lock and version
        read, the statements, the version bump and ``COMMIT`` together and reads the
        answers together: the same transaction as :meth:`transaction` runs (writers of one
        agent queue at the lock, other processes learn of it the same way), without a
        round trip per step. Durable when it returns. Outside a transaction only (inside
        one, the caller writes through :meth:`transaction`). A failed statement rolls the
        whole transaction back (nothing written) and raises its translated error; a
        connection lost on the way raises :class:`ConnectionLostError`, saying nothing
        was written when another connection shows ``wrote`` false once the agent's
        writer lock is free, else that the outcome is unknown."""
        with self.lock:
            if self._depth:
                raise RuntimeError("write_in_one_trip() runs outside a transaction only")
            self.require_writable()
            pool, conn = self._checkout()
            try:
                return self._one_trip(conn, statements, wrote)
            finally:
                pool.putconn(conn)

    def _one_trip(
        self, conn: Connection, statements: Sequence[Statement], wrote: tuple[str, Sequence[Any]]
    ) -> list[Row | None]:
        condition, condition_params = wrote
        bump_sql = self._one_trip_bump.format(wrote=condition)
        try:
            with conn.pipeline():
                conn.execute(b"BEGIN")
                if self.pooler:
                    conn.execute(self.connector.setup(conn))
                conn.execute(self._lock_sql)
                head = conn.execute(self._version_sql)  # after the lock (see __init__)
                cursors = [conn.execute(query, params) for query, params in statements]
                bump = conn.execute(bump_sql, (self.scope, *condition_params))
                conn.execute(b"COMMIT")
        except psycopg.Error as exc:
            lost = conn.closed or conn.broken
            self._rollback_quietly(conn)
            unknown = lost and self._committed(wrote) is not False
            raise self.error(exc, committing=unknown) from None
        rows = [_first_row(cur) for cur in cursors]
        read = _first_row(head)
        version = None if read is None or read[0] is None else int(read[0])
        bumped = _first_row(bump)
        self._began_at(version, None if bumped is None else int(bumped[0]))
        return rows

    def _committed(self, wrote: tuple[str, Sequence[Any]]) -> bool | None:
        """After a connection broke during a one-trip write: whether it committed, read on
        another connection once the scope's writer lock is free (a transaction still
        running on the server ends first); ``None`` if that cannot be read either."""
        condition, params = wrote
        try:
            with self._require_pool().connection() as conn, conn.transaction():
                if self.pooler:
                    conn.execute(self.connector.setup(conn))
                conn.execute(self._lock_sql)
                row = conn.execute(f"SELECT {condition}", params).fetchone()
                return bool(row and row[0])
        except (psycopg.Error, PoolTimeout, TieredMemoryError):
            return None

    def _outer(self, conn: Connection, join: bool) -> Iterator[Connection]:
        try:
            self._begin(conn)
        except psycopg.Error as exc:
            self._rollback_quietly(conn)
            raise self.error(exc) from None
        self._tx = conn
        self._open_frame()
        self._joined, self._aborted = join, False
        try:
            yield conn
        except BaseException:
            self._end(conn, commit=False)
            raise
        self._end(conn, commit=True)

    def _joined_block(self) -> Iterator[Connection]:
        if self._aborted:
            raise TransactionAbortedError("an earlier joined block failed; nothing will commit")
        conn = self._tx
        assert conn is not None
        outer_joined, self._joined = self._joined, True
        self._open_frame()
        before = writes(conn)
        try:
            yield conn
        except BaseException:
            # A failed block that wrote (or a failed statement: PostgreSQL aborts the
            # transaction on any error) takes the whole transaction with it.
            if conn.info.transaction_status == _INERROR or self._wrote(conn, before):
                self._aborted = True
            self._close_inner_frame(commit=False)
            raise
        finally:
            self._joined = outer_joined
        self._close_inner_frame(commit=True)

    def _savepoint(self) -> Iterator[Connection]:
        if self._aborted:
            raise TransactionAbortedError("an earlier joined block failed; nothing will commit")
        conn = self._tx
        assert conn is not None
        name = f"tm_sp_{self._depth}"
        self._statement(conn, f"SAVEPOINT {name}")
        self._open_frame()
        try:
            yield conn
        except BaseException:
            self._statement(conn, f"ROLLBACK TO SAVEPOINT {name}; RELEASE SAVEPOINT {name}")
            self._close_inner_frame(commit=False)
            raise
        self._statement(conn, f"RELEASE SAVEPOINT {name}")
        self._close_inner_frame(commit=True)

    def _statement(self, conn: Connection, text: str) -> None:
        try:
            conn.execute(text.encode())
        except psycopg.Error as exc:
            self._aborted = True
            raise self.error(exc) from None

    @staticmethod
    def _wrote(conn: Connection, before: int | None) -> bool:
        """True if the block that started when ``conn`` had counted ``before`` writes
        wrote (a connection that does not count: if the transaction has an id)."""
        if before is not None:
            return writes(conn) != before
        try:
            row = conn.execute("SELECT pg_current_xact_id_if_assigned() IS NOT NULL").fetchone()
            return bool(row and row[0])
        except psycopg.Error:
            return True

    def _begin(self, conn: Connection) -> None:
        """BEGIN, the scope's writer lock and version (one round trip)."""
        setup = self.connector.setup(conn) if self.pooler else sql.SQL("")
        cur = conn.execute(sql.SQL(self._begin_sql).format(setup=setup, **self._literals))
        while cur.nextset():
            pass  # BEGIN's empty result (and the pooler's settings) come first
        row = cur.fetchone()
        self._began_at(None if row is None or row[0] is None else int(row[0]))

    def _end(self, conn: Connection, commit: bool) -> None:
        on_commit, on_rollback, aborted = self._close_outer_frame()
        if commit and (aborted or conn.info.transaction_status == _INERROR):
            self._rollback_quietly(conn)
            run_hooks(reversed(on_rollback))
            raise TransactionAbortedError("rolled back after an earlier error; nothing committed")
        if not commit:
            self._rollback_quietly(conn)
            run_hooks(reversed(on_rollback))
            return
        try:
            cur = conn.execute(sql.SQL(self._commit_sql).format(**self._literals))
            row = cur.fetchone() if cur.pgresult is not None and cur.pgresult.ntuples else None
        except psycopg.Error as exc:
            lost = conn.info.transaction_status != _IDLE or conn.closed
            self._rollback_quietly(conn)
            run_hooks(reversed(on_rollback))
            raise self.error(exc, committing=lost) from None
        except BaseException:
            self._rollback_quietly(conn)
            run_hooks(reversed(on_rollback))
            raise
        if row is not None:
            self._seen_version = int(row[0])
        run_hooks(on_commit)

    @staticmethod
    def _rollback_quietly(conn: Connection) -> None:
        if conn.closed or conn.info.transaction_status == _IDLE:
            return
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            log.debug("ROLLBACK failed on a broken connection", exc_info=True)

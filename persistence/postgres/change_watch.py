"""Other processes' commits, for :class:`~persistence.postgres.database.PgDatabase`
(a part of it, apart for size): they arrive as ``NOTIFY tm_changes`` on a listening
connection and are confirmed exactly by the scope's version row, which every ``BEGIN``
reads too; either calls the :meth:`PgChangeWatch.on_external_change` callbacks (the
domain drops its RAM copies). Behind a transaction-mode pooler there is no listener
(``LISTEN`` needs a session of its own, which such a pooler does not keep): the version
rows alone are read, at most every ``change_check_interval_s`` (the scope's own at every
``BEGIN`` too): the scope's row and, in the same statement, a digest of the other rows
whose commits the handle may see (every scope's for an unscoped handle, which reads every
agent's rows; the unscoped row for an agent's, whose rows the unscoped handle may change).
A commit bumps only its own scope's row: the digest (a sum of hashes of each row's scope
and version, not of the versions, so a row set back or deleted by hand cannot cancel
another's move) changes with each."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from persistence.errors import StoreClosedError, TieredMemoryError

log = logging.getLogger("tiered_memory.postgres")

Hook = Callable[[], None]
Connection = psycopg.Connection[Any]
CHANNEL = "tm_changes"
_VERSION = "SELECT v FROM tm_version WHERE scope = %s"
_VERSIONS_ALL = (
    "SELECT max(v) FILTER (WHERE scope = ''), "
    "coalesce(sum(hashtextextended(scope || '=' || v, 0)) FILTER (WHERE scope <> ''), 0) "
    "FROM tm_version"
)
_VERSIONS_AGENT = (
    "SELECT max(v) FILTER (WHERE scope = %(s)s), "
    "coalesce(max(v) FILTER (WHERE scope = ''), 0) "
    "FROM tm_version WHERE scope IN ('', %(s)s)"
)
"""Behind a pooler: the scope's row and a digest of the other rows it sees (module
docstring): an unscoped handle sees every agent's row, an agent's handle the unscoped
row. Two statements, not one taking the scope as a parameter: a generic plan of that one
scans the whole table."""
Stamp = tuple[int | None, int]
"""A change stamp: the version row as last seen, and how many times the listeners were
called (:meth:`PgChangeWatch.change_stamp`)."""


class PgChangeWatch:
    """The listener and the version row of one :class:`PgDatabase` (which sets these
    attributes and provides :meth:`connect` and :meth:`reading`)."""

    scope: str
    pooler: bool
    writer_id: str
    location: str
    lock: threading.RLock
    change_check_interval_s: float
    _pool: ConnectionPool[Connection] | None
    _listener: Connection | None
    _change_listeners: list[Hook]
    _seen_version: int | None
    _seen_others: int | None
    _told: int
    _next_check: float
    _depth: int
    _owner: int | None

    def connect(self) -> Connection:
        raise NotImplementedError

    def reading(self) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    def _bare(self) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    def _as_snapshot_sees(self, stamp: Stamp) -> Stamp | None:
        raise NotImplementedError

    @property
    def seen_version(self) -> int | None:
        """The scope's version as this handle last saw it (its own commits and the
        change watch move it); ``None`` before the first look."""
        return self._seen_version

    def _listen(self) -> None:
        if self.pooler:
            return  # LISTEN lives in a session: the version row is polled instead
        listener = self.connect()
        listener.execute(f"LISTEN {CHANNEL}")
        self._listener = listener

    def _read_version(self) -> tuple[int | None, int | None]:
        """The scope's version row and, behind a pooler, the digest of the other rows whose
        commits this handle may see (module docstring; ``None`` with a listener: it
        announces them), in one statement (``tm_version`` has no row security)."""
        with self._bare() as conn:
            if not self.pooler:
                row = conn.execute(_VERSION, (self.scope,)).fetchone()
                return (None if row is None else int(row[0])), None
            query = _VERSIONS_AGENT if self.scope else _VERSIONS_ALL
            row = conn.execute(query, {"s": self.scope}).fetchone()
            if row is None:  # (an aggregate always answers a row)
                return None, None
            return (None if row[0] is None else int(row[0])), int(row[1])

    def on_external_change(self, callback: Hook) -> None:
        self._change_listeners.append(callback)

    def _tell_listeners(self) -> None:
        self._told += 1
        for callback in self._change_listeners:
            callback()

    def change_stamp(self) -> Stamp | None:
        """A value that moves with every commit of this handle that wrote (the version
        row it bumped) and every change the change watch sees (another process's, as
        :meth:`check_external_changes` finds it: announcements at every call, the row
        every ``change_check_interval_s``), so RAM copies read at one stamp hold while it
        stays, as fresh as the manager's other RAM copies; ``None`` inside this thread's
        transaction or while another thread's held the handle (copy nothing then), and
        inside this thread's snapshot once a commit since its ``BEGIN`` was seen. A
        closed handle raises :class:`~persistence.errors.StoreClosedError`, as a read would."""
        if self._pool is None:
            raise StoreClosedError("the store is closed")
        if self._depth > 0 and self._owner == threading.get_ident():
            return None
        if not self.check_external_changes():
            return None
        return self._as_snapshot_sees((self._seen_version, self._told))

    def _began_at(self, version: int | None, after: int | None = None) -> None:
        """A write's exact look at its scope's version row (read after the scope's writer
        lock): the listeners are called if it moved since this handle last saw it, or if
        another scope's commit was announced (that moves another row); the announcements
        it covers are taken off the listener. ``after``: the row once this write's own
        commit bumped it."""
        try:
            elsewhere = self._drain(covered=True)
        except psycopg.Error:
            elsewhere = False
            self._drop_listener()  # a broken listener is not this write's failure
        changed = elsewhere or (self._seen_version is not None and version != self._seen_version)
        self._seen_version = version if after is None else after
        if changed:
            self._tell_listeners()

    def _drain(self, covered: bool = False) -> bool:
        """True if another writer's commit of a scope this handle sees was announced
        (``covered``: not counting this handle's own scope, whose version row the caller
        has just read exactly; another scope's commit, an unscoped writer's seen by an
        agent's handle or the reverse, moves only that scope's row)."""
        listener = self._listener
        if listener is None:
            return False
        # libpq straight (1.4 us; psycopg's notifies() generator costs 10 us): read what
        # the socket holds without waiting, then take every queued notification.
        pgconn = listener.pgconn
        pgconn.consume_input()
        other = False
        while (note := pgconn.notifies()) is not None:
            writer, _, scope = note.extra.decode().partition(" ")
            if writer == self.writer_id or (covered and scope == self.scope):
                continue
            if not self.scope or scope in ("", self.scope):
                other = True
        return other

    def check_external_changes(self, wait_s: float = 0.05) -> bool:
        """Look for other processes' commits and call the listeners if there were any:
        the listener's announcements at every call (non-blocking), and the version row
        itself at most every ``change_check_interval_s`` (an announcement travels
        asynchronously: the row makes the look exact, as SQLite's ``data_version``). A
        lost listener is reopened and the listeners called (changes may have been
        missed). ``False`` when another thread's transaction held the handle ``wait_s``
        seconds: RAM copies may be stale then (read the store)."""
        if self._pool is None or (self._depth > 0 and self._owner == threading.get_ident()):
            return True
        lock = self.lock
        if not lock.acquire(False) and not lock.acquire(timeout=wait_s):
            return False
        try:
            if self._pool is not None:
                self._look()
            return True
        finally:
            lock.release()

    def _look(self) -> None:
        """:meth:`check_external_changes` under the lock."""
        changed = lost = False
        if self._listener is not None:
            try:
                changed = self._drain()
            except psycopg.Error:
                changed = lost = True
                self._drop_listener()
        if self._listener is None and not self.pooler:  # announcements may have been missed
            lost = True
            self._reopen_listener()
        now = time.monotonic()
        if not (changed or lost) and now < self._next_check:
            return
        self._next_check = now + self.change_check_interval_s
        version: int | None = None
        others = self._seen_others
        if not lost:  # one round trip: the row, read on the listener, which proves it alive
            try:
                version = self._listener_version()
            except psycopg.Error:  # a restarted server's listener reads as quiet
                changed = True
                self._reopen_listener()
        if version is None:
            try:
                version, others = self._read_version()
            except TieredMemoryError:
                version = others = None  # the server is away: look again next time
        changed = changed or version is None or version != self._seen_version
        changed = changed or others != self._seen_others
        self._seen_version, self._seen_others = version, others
        if changed:
            self._tell_listeners()

    def _listener_version(self) -> int | None:
        """The scope's version row read on the listener (``tm_version`` has no row-level
        security: every handle reads its own scope's row), or ``None`` without a
        listener; a dead listener raises :class:`psycopg.Error`."""
        listener = self._listener
        if listener is None:
            return None
        row = listener.execute(_VERSION, (self.scope,)).fetchone()
        return None if row is None else int(row[0])

    def _drop_listener(self) -> None:
        """Forget a broken listener (the next look reopens it)."""
        old, self._listener = self._listener, None
        if old is not None:
            old.close()

    def _reopen_listener(self) -> None:
        self._drop_listener()
        try:
            self._listen()
        except TieredMemoryError:
            log.warning("cannot listen for other processes' changes at %s yet", self.location)

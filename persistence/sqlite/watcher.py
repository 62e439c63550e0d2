"""Other connections' commits (another process writing the same file), noticed through
SQLite's ``data_version``: RAM copies of the file (caches, the vector mirror) listen,
and drop what may be stale."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import apsw

Hook = Callable[[], None]

DATA_VERSION = "PRAGMA data_version"
"""Changes when another connection commits (looked at as every write transaction begins)."""


class ChangeWatcher:
    """Looks at the writer's ``data_version`` at most every ``interval_s`` seconds (and
    as every write transaction begins) and calls the listeners when another connection
    has committed since. In memory there is no other connection: nothing is looked at."""

    def __init__(
        self,
        in_memory: bool,
        interval_s: float,
        lock: threading.RLock,
        idle_writer: Callable[[], apsw.Connection | None],
    ) -> None:
        self.in_memory = in_memory
        self.interval_s = interval_s
        self._lock = lock  # the writer's
        self._idle_writer = idle_writer  # the writer, or None while closed or in a transaction
        self.listeners: list[Hook] = []
        self._next_check = 0.0
        self._busy_until = 0.0
        self._seen_version: int | None = None

    def opened(self, conn: apsw.Connection) -> None:
        """The writer opened: what it sees is nobody else's change."""
        self._seen_version = int(conn.pragma("data_version"))

    def check(self, wait_s: float = 0.05) -> bool:
        """Look now if a look is due, taking the writer's lock. ``False`` when the lock
        stayed taken ``wait_s`` seconds: RAM copies may be stale then. (Called on every
        read through RAM: the store calls it directly, one call from the reader.)"""
        now = time.monotonic()
        if now < self._next_check or self.in_memory:
            return True
        if now < self._busy_until:
            return False  # a write held the connection moments ago: don't wait again yet
        lock = self._lock
        if not lock.acquire(timeout=wait_s):
            self._busy_until = time.monotonic() + self.interval_s
            return False
        try:
            writer = self._idle_writer()
            if writer is not None:
                self.notice(writer)
            return True
        finally:
            lock.release()

    def notice(self, conn: apsw.Connection) -> None:
        """Look at ``conn``'s ``data_version`` (under the writer's lock); the listeners
        are called if another connection committed since the last look."""
        self._next_check = time.monotonic() + self.interval_s
        if self.in_memory:
            return
        row = conn.execute(DATA_VERSION).fetchone()  # (conn.pragma() costs 2.5x as much)
        version = None if row is None else int(row[0])
        changed = self._seen_version is not None and version != self._seen_version
        self._seen_version = version
        if changed:
            for callback in self.listeners:
                callback()

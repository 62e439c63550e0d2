"""SQLite's own log, routed to :mod:`logging` under the logger ``tiered_memory.sqlite``.

SQLite says some things only in its log: a WAL recovered after a crash, a file it could
not open, damage it found. The log callback is process-global, so it is installed once
per process (on the first open) and logs at INFO at most: most of SQLite's messages are
routine (a constraint failure the library handles, a schema change), and the library
installs no handler, so nothing is printed unless the application configures logging.
An application that installs its own SQLite log callback after opening a store keeps it.
"""

from __future__ import annotations

import logging
import threading

import apsw
import apsw.ext

LOGGER = logging.getLogger("tiered_memory.sqlite")
_lock = threading.Lock()
_routed = False


def route_sqlite_log() -> None:
    """Send SQLite's log to ``tiered_memory.sqlite`` (once per process; never raises)."""
    global _routed
    with _lock:
        if _routed:
            return
        _routed = True
        try:
            apsw.ext.log_sqlite(level=logging.INFO, logger=LOGGER)
        except apsw.Error as exc:  # this SQLite refused the callback: the log stays unrouted
            LOGGER.debug("SQLite's log is not routed to logging: %s", exc)

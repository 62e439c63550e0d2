"""SQLite's own log, routed to :mod:`logging` under the logger ``tiered_memory.sqlite``.

SQLite says some things only in its log: a WAL recovered after a crash, a file it could
not open, damage it found. The log callback is process-global, so it is installed once
per process (on the first open). Levels: SQLite's routine notices (a statement
re-prepared after a schema change, an automatic index built for one query) go at DEBUG,
so an application (an MCP server, say) that shows INFO on its stderr does not show them;
everything else at INFO at most: most of SQLite's other messages are handled by the
library (a constraint failure, a missing table it probes for). The library installs no
handler, so nothing is printed unless the application configures logging. An
application that installs its own SQLite log callback after opening a store keeps it.

A damaged schema can make SQLite log a message that is not UTF-8 (it quotes the broken
``CREATE`` text); APSW cannot hand it to the callback and reports the decode error to
``sys.unraisablehook``, whose default prints a traceback on stderr, while the call itself
raises the library's damage error. :func:`route_sqlite_log` also puts a filter in front of
the hook that logs exactly those at DEBUG here (a decode error raised in a call the
library made into SQLite); everything else goes to the hook as before.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw

LOGGER = logging.getLogger("tiered_memory.sqlite")
_lock = threading.Lock()
_routed = False
_HERE = str(Path(__file__).resolve().parent.parent)  # persistence/: its statements run SQL too

ROUTINE_CODES = frozenset({apsw.SQLITE_SCHEMA, apsw.SQLITE_WARNING_AUTOINDEX})
"""Extended result codes of log messages that say nothing to act on (logged at DEBUG)."""


def level_of(code: int) -> int:
    """The :mod:`logging` level of a SQLite log message with extended result ``code``."""
    if code in ROUTINE_CODES or code & 0xFF == apsw.SQLITE_SCHEMA:
        return logging.DEBUG
    return logging.INFO


def _log(code: int, message: str) -> None:
    """SQLite's log callback (it must never raise)."""
    try:
        level = level_of(code)
        if LOGGER.isEnabledFor(level):
            name = apsw.mapping_result_codes.get(code & 0xFF, str(code))
            LOGGER.log(level, "SQLITE_LOG: %s (%d) %s", message, code, name,
                       extra={"sqlite_code": code})  # fmt: skip
    except Exception:  # noqa: BLE001, S110 - a log callback must not fail SQLite's call
        pass


def _in_library(tb: Any) -> bool:
    """True if the innermost frame of ``tb`` is the storage code's (``persistence/``:
    the SQLite engine's or the statements it runs through :mod:`persistence.statements`)."""
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename.startswith(_HERE)


def _filtered(previous: Callable[[Any], object]) -> Callable[[Any], object]:
    def unraisable(args: Any) -> object:
        exc = args.exc_value
        if (isinstance(exc, UnicodeDecodeError) and args.object is None
                and _in_library(args.exc_traceback)):  # fmt: skip
            LOGGER.debug("SQLITE_LOG: a message that is not UTF-8 (damaged text): %r",
                         exc.object[:200])  # fmt: skip
            return None
        return previous(args)

    return unraisable


def route_sqlite_log() -> None:
    """Send SQLite's log to ``tiered_memory.sqlite`` (once per process; never raises)."""
    global _routed
    with _lock:
        if _routed:
            return
        _routed = True
        sys.unraisablehook = _filtered(sys.unraisablehook)
        try:
            apsw.config(apsw.SQLITE_CONFIG_LOG, _log)
        except apsw.Error as exc:  # this SQLite refused the callback: the log stays unrouted
            LOGGER.debug("SQLite's log is not routed to logging: %s", exc)

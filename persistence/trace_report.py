"""Handing traced statements to the user's ``trace=`` callback, the same on both engines.

Each engine hears its own driver (APSW's execution tracer and profile event on SQLite,
the pooled connections' cursors on PostgreSQL) and reports what it heard here, as a
:class:`~persistence.records.TracedStatement`. A callback that raises is logged once
(logger ``tiered_memory.trace``) and never fails the call being traced.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from persistence.records import TracedStatement
from persistence.validation import require_callable

__all__ = ["TraceCallback", "TraceReporter", "parameter_count"]

TraceCallback = Callable[[TracedStatement], None]
_log = logging.getLogger("tiered_memory.trace")


def parameter_count(bindings: Any) -> int:
    """How many parameters a statement was given (0 for none, or a form not counted)."""
    return len(bindings) if isinstance(bindings, tuple | list | Mapping) else 0


class TraceReporter:
    """Calls ``callback`` with each statement reported; counts the callback's failures."""

    __slots__ = ("callback", "_lock", "_errors")

    def __init__(self, callback: TraceCallback) -> None:
        require_callable(callback, "trace")
        self.callback = callback
        self._lock = threading.Lock()
        self._errors = 0

    def report(self, sql: str, parameters: int, nanoseconds: int) -> None:
        """Hand one statement to the callback (at least 1 ns: it ran)."""
        try:
            self.callback(TracedStatement(sql, parameters, max(nanoseconds, 1)))
        except Exception:  # a broken callback must not break the traced call
            with self._lock:
                self._errors += 1
                first = self._errors == 1
            if first:
                _log.exception("the trace callback failed (later failures are not logged)")

    @property
    def errors(self) -> int:
        """How many times the callback raised."""
        return self._errors

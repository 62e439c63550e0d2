"""SQL tracing for whoever debugs a slow call: every statement the library runs on a
store's connections, with how many parameters it was given and how long it took.

Modelled on ``apsw.ext.Trace`` and sqlite-utils' ``tracer``: a :class:`StatementTracer`
attached to a connection hears APSW's execution tracer (the statement's text and its
bindings, as it starts) and SQLite's profile event (as it finished: its rows read, its
work done), and reports each top-level statement once as a :class:`TracedStatement`,
timed from start to finish with ``time.perf_counter_ns``. Statements that
SQLite runs inside another one (FTS5's shadow tables, triggers) are part of
their parent's time and are not reported on their own. Nothing is traced unless a
callback is given, so an untraced store pays nothing.

A statement that sets an encryption key (``PRAGMA key``/``rekey``, their ``hex`` forms)
holds the key in its text and is never reported; parameters are counted, never shown. A
callback that raises is logged (logger ``tiered_memory.trace``) and never fails the call
being traced (:mod:`persistence.trace_report`, shared with PostgreSQL).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import apsw

from persistence.records import TracedStatement
from persistence.trace_report import TraceCallback, TraceReporter, parameter_count

__all__ = ["StatementTracer", "TraceCallback", "TracedStatement"]

_KEY_PRAGMA = re.compile(
    r"""\s*pragma\s+(?:["'`\[]?\w+["'`\]]?\.)?["'`\[]?(?:hex)?(?:re)?key\b""", re.I
)
"""A statement that sets an encryption key carries it in its text: never reported."""


@dataclass(slots=True)
class _Pending:
    """The statement a connection is running: its text and its parameters' count."""

    sql: str
    parameters: int
    started: int  # time.perf_counter_ns() as it began


class StatementTracer(TraceReporter):
    """Reports each statement run on the connections it is attached to."""

    __slots__ = ("_pending",)

    def __init__(self, callback: TraceCallback) -> None:
        super().__init__(callback)
        self._pending: dict[int, _Pending] = {}  # id(connection) -> statement under way

    def attach(self, conn: apsw.Connection) -> None:
        """Trace ``conn`` from now on (until it is closed)."""
        conn.exec_trace = self._executing
        conn.trace_v2(apsw.SQLITE_TRACE_PROFILE, self._profiled, id=self)

    def _executing(self, cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
        if _KEY_PRAGMA.match(sql):
            self._pending.pop(id(cursor.connection), None)
            return True  # run it, untraced: its text holds a key
        started = time.perf_counter_ns()
        self._pending[id(cursor.connection)] = _Pending(sql, parameter_count(bindings), started)
        return True  # go ahead and run it

    def _profiled(self, event: dict[str, Any]) -> None:
        key = id(event["connection"])
        pending = self._pending.get(key)
        if pending is None or pending.sql != event["sql"]:
            return  # a statement run inside the traced one: part of its time
        del self._pending[key]
        # SQLite's own figure (event["nanoseconds"]) comes from a millisecond clock on
        # most systems, 0 for most statements: the time is measured here instead.
        elapsed = max(time.perf_counter_ns() - pending.started, event["nanoseconds"], 1)
        self.report(event["sql"], pending.parameters, elapsed)

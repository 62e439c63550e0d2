"""SQL tracing on PostgreSQL: ``trace=`` hears every statement the store's connections
run, as on SQLite (:mod:`persistence.sqlite.tracing`).

psycopg has no statement hook, so a traced store's connections are
:class:`TracedConnection`\\ s, whose cursors time each ``execute``/``executemany`` with
``time.perf_counter_ns`` and report its text (as written, ``%s`` placeholders and all),
its parameters' count and its time through :class:`~persistence.trace_report.TraceReporter`.
An untraced store uses the plain counting connections and pays nothing.

Where the engines' reports differ, as their drivers do:

- a string of several statements (``BEGIN; SELECT ...``) is one round trip and one report;
- an ``executemany`` is one report (psycopg sends its rows in one pipeline): its
  parameters are all its rows' together;
- statements sent together in a pipeline (the one-trip ``remember()``) are answered
  together: each one's time runs from when it was sent to when the answers arrived;
- what the server runs inside a statement (triggers, functions) is part of its time.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import pq, sql
from psycopg.abc import Params, Query

from persistence.postgres.write_count import CountingConnection, CountingCursor
from persistence.trace_report import TraceReporter, parameter_count

__all__ = ["TracedConnection", "TracedCursor", "connection_class", "traced_by"]

_PIPELINE_OFF = pq.PipelineStatus.OFF


class TracedCursor(CountingCursor):
    """A counting cursor that reports each statement to its connection's tracer."""

    def execute(
        self,
        query: Query,
        params: Params | None = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> TracedCursor:
        started = time.perf_counter_ns()
        try:
            super().execute(query, params, prepare=prepare, binary=binary)
        finally:
            _report(self.connection, query, parameter_count(params), started)
        return self

    def executemany(
        self, query: Query, params_seq: Iterable[Params], *, returning: bool = False
    ) -> None:
        rows = list(params_seq)
        started = time.perf_counter_ns()
        try:
            super().executemany(query, rows, returning=returning)
        finally:
            _report(self.connection, query, sum(parameter_count(r) for r in rows), started)


class TracedConnection(CountingConnection):
    """A counting connection whose statements are reported to :attr:`tracer` (set by
    the database when it opens the connection; ``None``: not reported)."""

    tracer: TraceReporter | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cursor_factory = TracedCursor
        self._sent: list[tuple[str, int, int]] = []  # a pipeline's statements, unanswered

    @contextmanager
    def pipeline(self) -> Iterator[psycopg.Pipeline]:
        """Pipeline mode; the statements sent in it are reported once it is answered."""
        try:
            with super().pipeline() as pipeline:
                yield pipeline
        finally:
            if self.pgconn.pipeline_status == _PIPELINE_OFF:
                sent, self._sent = self._sent, []
                ended = time.perf_counter_ns()
                for text, parameters, started in sent:
                    self._tell(text, parameters, ended - started)

    def _tell(self, text: str, parameters: int, nanoseconds: int) -> None:
        if self.tracer is not None:
            self.tracer.report(text, parameters, nanoseconds)


def connection_class(
    tracer: TraceReporter | None, untraced: type[psycopg.Connection[Any]]
) -> type[psycopg.Connection[Any]]:
    """The class of a store's connections: ``untraced`` unless the store has a tracer."""
    return untraced if tracer is None else TracedConnection


def traced_by(conn: psycopg.Connection[Any], tracer: TraceReporter | None) -> None:
    """Report ``conn``'s statements to ``tracer`` from now on (a traced connection)."""
    if isinstance(conn, TracedConnection):
        conn.tracer = tracer


def _report(conn: psycopg.Connection[Any], query: Query, parameters: int, started: int) -> None:
    """Report a statement ``conn`` ran (or sent, in a pipeline: reported when answered)."""
    if not isinstance(conn, TracedConnection) or conn.tracer is None:
        return
    text = _text(query, conn)
    if conn.pgconn.pipeline_status != _PIPELINE_OFF:
        conn._sent.append((text, parameters, started))
    else:
        conn._tell(text, parameters, time.perf_counter_ns() - started)


def _text(query: Query, conn: psycopg.Connection[Any]) -> str:
    """A statement's text as the library wrote it."""
    if isinstance(query, bytes):
        return query.decode()
    if isinstance(query, sql.Composable):
        return query.as_string(conn)
    return str(query)

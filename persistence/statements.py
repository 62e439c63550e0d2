"""Statements: SQL built apart from running it.

An engine's SQL modules (``persistence/<engine>/sql/*_sql.py``) only *build*: each
function returns a :class:`Statement` (the SQL text in the engine's dialect and its
parameters) or a :class:`Batch` (one statement for many parameter rows), and decodes the
rows a statement returns. The shared stores (:mod:`persistence.stores`) *run* them with
the functions below, on the connection their :class:`~persistence.engine.Engine` block
yields. LangGraph's store packages are the model (``_prepare_batch_*`` build the queries,
the store runs them).

The functions work on both engines' connections (``apsw.Connection`` and
``psycopg.Connection`` both run ``execute(sql, params)`` and hand back a cursor with
``fetchone``/``fetchall``; both make cursors with ``executemany``), so this module imports
no driver. A statement whose count of touched rows matters says so in SQL (``RETURNING``)
and is run with :func:`count`: the drivers report changed rows differently, SQL does not.
Driver errors are not translated here: the engine's ``reading()``/``transaction()``
blocks turn them into :class:`~persistence.errors.TieredMemoryError`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from persistence.engine import Connection

Row = tuple[Any, ...]
"""A row as the drivers return it (a tuple)."""


class Statement(NamedTuple):
    """One SQL statement and its parameters: ``sql, params = statement`` unpacks it.
    Positional parameters (``?``, ``%s``) take a sequence; PostgreSQL's named ones
    (``%(name)s``) a mapping."""

    sql: str
    params: Sequence[Any] | Mapping[str, Any] = ()


class Batch(NamedTuple):
    """One SQL statement run once per parameter row (``executemany``)."""

    sql: str
    rows: Sequence[Sequence[Any]]


def _params(statement: Statement) -> Sequence[Any] | Mapping[str, Any] | None:
    """The parameters as the drivers take them (``None`` when there are none, so that
    psycopg reads a literal ``%`` in parameterless SQL as itself)."""
    return statement.params if statement.params else None


def run(conn: Connection, statement: Statement) -> None:
    """Run a statement that returns no rows (or whose rows are not wanted)."""
    conn.execute(statement.sql, _params(statement))


def run_all(conn: Connection, statements: Sequence[Statement]) -> None:
    """Run statements in order, none of them returning rows."""
    for statement in statements:
        conn.execute(statement.sql, _params(statement))


def run_batch(conn: Connection, batch: Batch) -> None:
    """Run ``batch.sql`` once per row of ``batch.rows`` (nothing when there are none)."""
    if not batch.rows:
        return
    if len(batch.rows) == 1:
        conn.execute(batch.sql, batch.rows[0])
        return
    cursor = conn.cursor()
    try:
        cursor.executemany(batch.sql, batch.rows)
    finally:
        cursor.close()


def rows(conn: Connection, statement: Statement) -> list[Row]:
    """Every row the statement returns."""
    found: list[Row] = conn.execute(statement.sql, _params(statement)).fetchall()
    return found


def row(conn: Connection, statement: Statement) -> Row | None:
    """The first row the statement returns, or ``None``."""
    found: Row | None = conn.execute(statement.sql, _params(statement)).fetchone()
    return found


def value(conn: Connection, statement: Statement) -> Any:
    """The first column of the first row (``None`` when there is no row)."""
    found = row(conn, statement)
    return None if found is None else found[0]


def column(conn: Connection, statement: Statement) -> list[Any]:
    """The first column of every row."""
    return [found[0] for found in rows(conn, statement)]


def count(conn: Connection, statement: Statement) -> int:
    """How many rows the statement returns: for a write, its ``RETURNING`` rows (the
    rows it touched)."""
    return len(rows(conn, statement))


def stream(conn: Connection, statement: Statement) -> Iterator[Row]:
    """The statement's rows one at a time (the cursor is read as the caller iterates)."""
    yield from conn.execute(statement.sql, _params(statement))

"""Behind a transaction-mode pooler (PgBouncer, Supavisor, pgcat), for
:class:`~persistence.postgres.database.PgDatabase`: each transaction may run on another
server session, so nothing may live in a session. These are the steps that differ:
psycopg's connection arguments (no server-side prepared statements), the statement that
makes the handle's settings for one transaction (``set_config(..., true)``), and a read
block run as a transaction of its own."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg import pq, sql

from persistence.records import PoolSettings

Connection = psycopg.Connection[Any]
_IDLE = pq.TransactionStatus.IDLE
_INERROR = pq.TransactionStatus.INERROR


def connect_kwargs(settings: PoolSettings, pooler: bool) -> dict[str, Any]:
    """psycopg's connection arguments: autocommit, the connect timeout, and behind a
    pooler no server-side prepared statements (a prepared statement lives in one server
    session; the pooler may send its next use to another: "prepared statement "_pg3_0"
    does not exist")."""
    kwargs: dict[str, Any] = {
        "autocommit": True,
        "connect_timeout": max(1, round(settings.connect_timeout_s)),
    }
    if pooler:
        kwargs["prepare_threshold"] = None
    return kwargs


def setup_statement(settings: Sequence[tuple[str, str]]) -> sql.Composed:
    """One ``SELECT`` that makes each ``(name, value)`` of ``settings`` for the current
    transaction only (literals: it travels with ``BEGIN`` in one simple query)."""
    return sql.SQL("SELECT {}").format(
        sql.SQL(", ").join(
            sql.SQL("set_config({}, {}, true)").format(sql.Literal(k), sql.Literal(v))
            for k, v in settings
        )
    )


def transaction_block(
    conn: Connection, begin: str, setup: sql.Composable, rollback: Callable[[Connection], None]
) -> Iterator[Connection]:
    """``conn`` inside a transaction opened with ``begin`` and ``setup`` (one round trip),
    committed when the block ends, rolled back (``rollback``) if it raised or failed."""
    conn.execute(sql.SQL("{}; {}").format(sql.SQL(begin), setup))
    try:
        yield conn
    except BaseException:
        rollback(conn)
        raise
    if conn.info.transaction_status == _INERROR:
        rollback(conn)
    elif conn.info.transaction_status != _IDLE:
        conn.execute(b"COMMIT")

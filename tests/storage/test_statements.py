"""Statements built apart from running them (persistence.statements): the same runner
functions on both engines' connections."""

from __future__ import annotations

import pytest

from persistence.errors import TieredMemoryError
from persistence.statements import (
    Batch,
    Statement,
    column,
    count,
    row,
    rows,
    run,
    run_all,
    run_batch,
    stream,
    value,
)
from tests.support.backends import open_as


def _ph(engine: str) -> str:
    return "?" if engine == "sqlite" else "%s"


def test_the_runner_on_each_engine(engine: str, any_location: str) -> None:
    p = _ph(engine)
    manager = open_as(any_location, None)
    try:
        with manager.store.engine.transaction() as conn:
            run(conn, Statement("CREATE TEMP TABLE t_runner (k TEXT PRIMARY KEY, n INTEGER)"))
            run_batch(conn, Batch(f"INSERT INTO t_runner VALUES ({p}, {p})", []))
            run_batch(conn, Batch(f"INSERT INTO t_runner VALUES ({p}, {p})", [("a", 1)]))
            run_batch(conn, Batch(f"INSERT INTO t_runner VALUES ({p}, {p})", [("b", 2), ("c", 3)]))
            run_all(conn, [Statement(f"UPDATE t_runner SET n = n + 10 WHERE k = {p}", ("c",))])
            order = Statement(f"SELECT k, n FROM t_runner WHERE n >= {p} ORDER BY k", (2,))
            assert [tuple(r) for r in rows(conn, order)] == [("b", 2), ("c", 13)]
            assert tuple(row(conn, order) or ()) == ("b", 2)
            assert row(conn, Statement(f"SELECT k FROM t_runner WHERE k = {p}", ("z",))) is None
            assert value(conn, Statement("SELECT count(*) FROM t_runner")) == 3
            assert value(conn, Statement(f"SELECT n FROM t_runner WHERE k = {p}", ("z",))) is None
            assert column(conn, Statement("SELECT k FROM t_runner ORDER BY k")) == ["a", "b", "c"]
            assert [tuple(r) for r in stream(conn, order)] == [("b", 2), ("c", 13)]
            # a parameterless statement keeps a literal % (psycopg reads it as itself)
            assert value(conn, Statement("SELECT count(*) FROM t_runner WHERE k LIKE '%'")) == 3
            deleted = Statement(f"DELETE FROM t_runner WHERE n < {p} RETURNING k", (10,))
            assert count(conn, deleted) == 2
            assert count(conn, deleted) == 0
            sql, params = Statement("SELECT 1")
            assert (sql, params) == ("SELECT 1", ())
    finally:
        manager.shutdown()


def test_a_failing_statement_rolls_back_the_block(engine: str, any_location: str) -> None:
    p = _ph(engine)
    manager = open_as(any_location, None)
    try:
        with manager.store.engine.transaction() as conn:
            run(conn, Statement("CREATE TEMP TABLE t_fail (k TEXT PRIMARY KEY)"))
        with pytest.raises(TieredMemoryError), manager.store.engine.transaction() as conn:
            run_batch(conn, Batch(f"INSERT INTO t_fail VALUES ({p})", [("a",), ("a",)]))
        with manager.store.engine.transaction() as conn:  # a temp table: this connection's
            assert value(conn, Statement("SELECT count(*) FROM t_fail")) == 0
    finally:
        manager.shutdown()

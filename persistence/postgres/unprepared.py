"""Running a recall statement unprepared: psycopg prepares a statement server-side once
it has run a few times, and PostgreSQL may then plan it once for any parameters; the
keyword and vector searches' best plans depend on theirs (the filter, the limit, the
query's words), so they are always planned afresh (``prepare=False``, which
:mod:`persistence.statements` has no word for: it is psycopg's alone)."""

from __future__ import annotations

from typing import Any

import psycopg

from persistence.statements import Row, Statement


def rows(conn: psycopg.Connection[Any], statement: Statement) -> list[Row]:
    """Every row ``statement`` returns, planned for its parameters."""
    found: list[Row] = conn.execute(
        statement.sql, statement.params or None, prepare=False
    ).fetchall()
    return found

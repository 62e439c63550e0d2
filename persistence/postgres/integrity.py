"""``check_integrity`` on PostgreSQL: the library's invariants, run over the statements
:mod:`~persistence.postgres.sql.integrity_sql` builds.

:data:`CHECKS` are run from one committed snapshot; :data:`IMPORT_CHECKS` inside an
import's transaction, before it commits (the graph's collection is done at COMMIT by
deferred triggers, so those checks leave it out, and the keyword index with it).
"""

from __future__ import annotations

from typing import Any

import psycopg

from migrations.postgres import read_schema_version
from persistence.postgres import vector_column
from persistence.postgres.sql import integrity_sql as sql
from persistence.stores.integrity import Check, checking, found, memory_checks

Connection = psycopg.Connection[Any]


def schema(conn: Connection) -> list[str]:
    """The schema is this code's, and the change-tracking row of the scope exists."""
    return sql.schema_problems(read_schema_version(conn)) + found(conn, (sql.SCOPE_VERSION,))


def vector_column_problems(conn: Connection, dim: int) -> list[str]:
    """The vector column is typed with the store's dimension ``dim``."""
    return sql.column_problems(vector_column.column_dimension(conn), dim)


CHECKS: dict[str, Check] = {
    "schema": schema,
    **memory_checks(
        sql,
        {
            "schedules_point_at_memories": "tm_schedules",
            "content_keys_point_at_memories": "tm_content_keys",
        },
        vector_column_problems,
    ),
    "keyword_index_matches": checking(*sql.KEYWORD_INDEX),
    "graph_invariants": checking(*sql.graph_invariants(committed=True)),
}
"""Check name -> the check (run outside a write transaction)."""

_IMPORTED = memory_checks(
    sql, {"schedules_point_at_memories": "tm_schedules"}, vector_column_problems
)

IMPORT_CHECKS: dict[str, Check] = {
    **_IMPORTED,
    "graph_invariants": checking(*sql.graph_invariants(committed=False)),
}
"""The checks an import runs inside its transaction, before it commits."""

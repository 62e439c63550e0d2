"""Bulk writes: the tier tables' index triggers off while many memories are written,
then every index rebuilt from the tier tables with a few set-based statements.

Row-by-row triggers keep the keyword index (with each memory's context) and the
vector change log exact on every write, and cost about half the time of
an import. For a write that replaces most of the file, rebuilding them afterwards is
cheaper. Everything happens inside the caller's transaction: other connections never
see the file without its triggers, and a failure rolls all of it back. (The keyword
index's invariants, this rebuild among them, are stated in keyword_index.py.)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import apsw

from persistence.records import Tier
from persistence.sqlite.connection import query_all
from persistence.sqlite.sql import index_sql, vector_codes_sql
from persistence.sqlite.sql.memory_sql import TABLE


@contextmanager
def triggers_suspended(conn: apsw.Connection) -> Iterator[None]:
    """Inside: writes to the tier tables update no index. On leaving normally: every
    index is rebuilt and the triggers are back. ``conn`` must be in a transaction."""
    if not conn.in_transaction:
        raise RuntimeError("triggers_suspended() needs an open transaction")
    tables = [TABLE[tier] for tier in Tier]
    marks = ", ".join("?" for _ in tables)
    saved = query_all(
        conn,
        f"SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' AND tbl_name IN ({marks})",
        tables,
    )
    for name, _ in saved:
        conn.execute(f'DROP TRIGGER "{name}"')
    yield
    index_sql.fill_keyword_index(conn)
    for table in tables:
        conn.execute(
            f"INSERT INTO vector_changes (memory_id) SELECT id FROM {table} "
            "WHERE embedding IS NOT NULL"
        )
    vector_codes_sql.drop_all(conn)  # rows went without their triggers: codes may be stale
    for _, sql in saved:
        conn.execute(sql)

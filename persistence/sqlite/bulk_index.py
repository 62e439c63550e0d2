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

from persistence.sqlite import keyword_upkeep
from persistence.sqlite.sql import cell_sql, index_sql, vector_codes_sql
from persistence.statements import Statement, rows, run_all


@contextmanager
def triggers_suspended(conn: apsw.Connection) -> Iterator[None]:
    """Inside: writes to the tier tables update no index. On leaving normally: every
    index is rebuilt and the triggers are back. ``conn`` must be in a transaction."""
    if not conn.in_transaction:
        raise RuntimeError("triggers_suspended() needs an open transaction")
    saved = rows(conn, index_sql.TIER_TRIGGERS)
    run_all(conn, [index_sql.drop_trigger(name) for name, _ in saved])
    yield
    keyword_upkeep.fill_keyword_index(conn)
    run_all(conn, index_sql.LOG_EVERY_EMBEDDING)
    run_all(conn, vector_codes_sql.DROP_ALL)  # rows went without their triggers: codes may be stale
    run_all(conn, cell_sql.DROP_ALL)  # and so may the vector cells: trained again
    run_all(conn, [Statement(sql) for _, sql in saved])

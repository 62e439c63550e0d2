"""The memory family's compound write on a server: a memory's row and its vector.

A scratchpad memory first evicts (unlogged) another entry under its key, then its row
and its vector (or, for none, the removal of the stored one) go in. Every statement is
built by :mod:`~persistence.postgres.sql.memory_sql`; here they run, in the caller's
transaction.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from persistence.engine import Connection
from persistence.postgres.sql import memory_sql
from persistence.statements import column, run, run_all


def upsert(conn: Connection, columns: tuple[Any, ...], vector: np.ndarray | None) -> None:
    """Insert or update one memory row (:func:`memory_sql.encode_row`) and its vector; a
    scratchpad one first evicts (unlogged) another entry under the same key."""
    if memory_sql.is_scratchpad(columns):
        stale = column(conn, memory_sql.stale_keys(columns))
        if stale:
            run(conn, memory_sql.forget_rows(stale, None, None, None, None))
    run_all(conn, memory_sql.upsert(columns, vector))

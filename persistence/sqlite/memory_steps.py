"""The memory family's compound writes on a file: the steps SQLite takes its own way.

A tier is a table and tags are rows of ``memory_tags``, so writing a memory replaces its
tag rows and deleting one deletes its tags and schedule by hand (PostgreSQL keeps tags
on the row and hangs the rest off one statement). Every statement is built by
:mod:`~persistence.sqlite.sql.memory_sql`; here they run, in the caller's transaction.
"""

from __future__ import annotations

from typing import Any

import apsw

from persistence.records import Memory, Tier
from persistence.sqlite.sql import dedup_sql, memory_sql
from persistence.statements import column, count, rows, run, run_all, run_batch


def write(conn: apsw.Connection, memory: Memory, row: tuple[Any, ...]) -> None:
    """Insert or update ``memory`` (``row``: :func:`memory_sql.encode_row`) in its tier's
    table and replace its tags; a scratchpad one first evicts another under its key."""
    if memory.tier is Tier.SCRATCHPAD:
        for stale_id in column(conn, memory_sql.stale_keys(memory)):
            delete(conn, Tier.SCRATCHPAD, stale_id)
    upsert, untag, tag = memory_sql.write(memory, row)
    run(conn, upsert)
    run(conn, untag)
    run_batch(conn, tag)


def delete(conn: apsw.Connection, tier: Tier, memory_id: str) -> bool:
    """Delete a memory of ``tier`` with its tags and schedule (its promotion-log rows
    stay); False if ``tier`` did not hold it."""
    if not count(conn, memory_sql.delete_row(tier, memory_id)):
        return False
    run_all(conn, memory_sql.delete_attached(memory_id))
    return True


def rebuild_content_keys(conn: apsw.Connection) -> None:
    """Recompute every memory's content key from the tier tables (after an import)."""
    clear, contents = dedup_sql.rebuild()
    run(conn, clear)
    for statement in contents:
        run_batch(conn, dedup_sql.rebuilt(rows(conn, statement)))

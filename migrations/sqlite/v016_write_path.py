"""Version 16: a lighter write path.

- The sqlite-vec table ``memory_vec`` and its twelve triggers go. Every write of a
  memory with an embedding kept a bit-quantized copy there, but no query read it: vector
  search uses the in-RAM copy (``persistence.sqlite.vector_mirror``), whose codes are
  kept in ``vector_codes`` (v015), and re-ranks from the tier tables' floats. A file
  with 100k 384-d memories loses the table's pages (about 10 MB) and every embedded
  write its b-tree updates.
- The agent and category indexes of the episodic and semantic tables become partial
  (``WHERE agent_id IS NOT NULL`` / ``WHERE category IS NOT NULL``): most memories have
  neither, and each such write updated two index b-trees for a NULL key no query looks
  up. Every query that uses them compares the column with ``=`` (which implies ``IS NOT
  NULL``), so SQLite still uses them (tests/test_vector_table_dropped.py checks the plans).

The table is a ``vec0`` virtual table: dropping it normally needs the sqlite-vec
extension loaded, which the library no longer does. Without it, its shadow tables (plain
tables) are dropped and its schema row is deleted, as SQLite's documentation says to
remove a virtual table whose module is not available.
"""

from __future__ import annotations

import apsw

VERSION = 16
DESCRIPTION = "drop the unread sqlite-vec table memory_vec; partial agent and category indexes"

TIERS = ("scratchpad", "episodic", "semantic")
VECTOR_EVENTS = ("insert", "delete", "update", "unset")
VECTOR_TABLE = "memory_vec"


def drop_vector_table(conn: apsw.Connection) -> None:
    """Drop ``memory_vec`` and its triggers, with or without sqlite-vec loaded."""
    for tier in TIERS:
        for event in VECTOR_EVENTS:
            conn.execute(f"DROP TRIGGER IF EXISTS {tier}_vector_{event}")
    found = "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?"
    if conn.execute(found, (VECTOR_TABLE,)).fetchone() is None:
        return
    try:
        conn.execute(f"DROP TABLE {VECTOR_TABLE}")
        return
    except apsw.SQLError as exc:
        if "no such module" not in str(exc):
            raise
    shadows = [
        str(r[0])
        for r in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name GLOB ?",
            (f"{VECTOR_TABLE}_*",),
        )
    ]
    for name in shadows:
        conn.execute(f'DROP TABLE "{name}"')
    conn.execute("PRAGMA writable_schema = ON")
    try:
        conn.execute("DELETE FROM sqlite_schema WHERE type = 'table' AND name = ?", (VECTOR_TABLE,))
    finally:
        conn.execute("PRAGMA writable_schema = RESET")


PARTIAL_INDEXES = tuple(
    (f"idx_{tier}_{name}", tier, column)
    for tier in ("episodic", "semantic")
    for name, column in (("agent", "agent_id"), ("category", "category"))
)
"""``(index, table, column)`` of the indexes made partial here."""


def up(conn: apsw.Connection) -> None:
    """Drop the vector table and its triggers; make the agent and category indexes
    partial."""
    drop_vector_table(conn)
    for index, table, column in PARTIAL_INDEXES:
        conn.execute(f"DROP INDEX IF EXISTS {index}")
        conn.execute(f"CREATE INDEX {index} ON {table}({column}) WHERE {column} IS NOT NULL")

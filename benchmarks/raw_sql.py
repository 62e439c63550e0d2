"""Raw APSW statements the benchmarks use as floors (the SQL the library must run)."""

from __future__ import annotations

import apsw

from persistence import memory_sql

_COLUMNS = ", ".join(memory_sql._COLUMNS)


def raw_promote(conn: apsw.Connection, memory_id: str) -> None:
    """Move one row from episodic to semantic and log it, in one transaction."""
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(
        f"INSERT INTO semantic ({_COLUMNS}) SELECT {_COLUMNS} FROM episodic WHERE id = ?",
        (memory_id,),
    )
    conn.execute("DELETE FROM episodic WHERE id = ?", (memory_id,))
    conn.execute(
        "INSERT INTO promotion_log (memory_id, from_tier, to_tier, promoted_at) "
        "VALUES (?, 'episodic', 'semantic', 0)",
        (memory_id,),
    )
    conn.execute("COMMIT")

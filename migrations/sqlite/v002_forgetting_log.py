"""Version 2: an audit log of forgotten memories (by decay or by an explicit forget).

Only ids, tiers, retention and the reason are kept: forgetting must really forget the
content.
"""

from __future__ import annotations

import apsw

VERSION = 2
DESCRIPTION = "forgetting_log: audit rows for forgotten memories"


def up(conn: apsw.Connection) -> None:
    """Create the forgetting log and its indexes."""
    conn.execute(
        """CREATE TABLE forgetting_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            memory_id TEXT NOT NULL,
            tier TEXT NOT NULL,
            forgotten_at INTEGER NOT NULL,
            retention REAL,
            reason TEXT NOT NULL
        )"""
    )
    conn.execute("CREATE INDEX idx_forgetting_memory ON forgetting_log(memory_id)")
    conn.execute("CREATE INDEX idx_forgetting_time ON forgetting_log(forgotten_at)")

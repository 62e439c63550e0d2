"""Version 15: the vector copy's 3-bit codes, kept in the file.

- ``vector_codes``: one code per embedded memory, as ``persistence.sqlite.vector_codes``
  makes them (its first byte the memory's tier). Derived data: written by the library
  after embeddings are stored and by ``maintain()``; a process opening the file loads
  these instead of encoding every float vector again.
- ``vector_fit``: the one fit the codes were made with, and the ``vector_changes``
  position (``seq``, and the id logged there) they stand at: a reader takes the codes
  and then every change logged after that position. Codes whose position has left the
  log are not used.
- Triggers delete a memory's code in the transaction that deletes the memory or changes
  its vector, so a forgotten memory leaves no code behind.
"""

from __future__ import annotations

import apsw

VERSION = 15
DESCRIPTION = "the vector copy's codes kept in the file"

TIERS = ("scratchpad", "episodic", "semantic")


def _triggers(tier: str) -> list[str]:
    drop = "DELETE FROM vector_codes WHERE id = OLD.id"
    return [
        f"""CREATE TRIGGER {tier}_vector_code_delete AFTER DELETE ON {tier}
            BEGIN {drop}; END""",
        f"""CREATE TRIGGER {tier}_vector_code_update AFTER UPDATE OF embedding ON {tier}
            WHEN OLD.embedding IS NOT NEW.embedding BEGIN {drop}; END""",
    ]


def up(conn: apsw.Connection) -> None:
    """Create the code and fit tables and the triggers that drop stale codes."""
    conn.execute(
        "CREATE TABLE vector_codes (id TEXT PRIMARY KEY, code BLOB NOT NULL) WITHOUT ROWID"
    )
    conn.execute(
        """CREATE TABLE vector_fit (
            only INTEGER PRIMARY KEY CHECK (only = 1),
            dim INTEGER NOT NULL,
            fitted INTEGER NOT NULL,
            sqrt_factor REAL NOT NULL,
            fit BLOB NOT NULL,
            seq INTEGER NOT NULL,
            seq_id TEXT
        )"""
    )
    for tier in TIERS:
        for statement in _triggers(tier):
            conn.execute(statement)

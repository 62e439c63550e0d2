"""Version 18: a memory can be superseded by a newer one (facts that change).

Each tier table gains ``superseded_by`` (the newer memory's id), ``valid_to`` (its
time) and ``superseded_reason``; an existing memory reads ``NULL`` in all three: current.
Two partial indexes per tier hold only the superseded rows, so a write of a current
memory costs nothing more: one on ``superseded_by`` answers "does the file hold any
superseded memory" (recall then needs no condition when it does not) and "which
memories did this one supersede" (a timeline); one on ``id`` tells which of a vector
search's candidates are superseded without reading their rows. Idempotent: a file whose
version rows were rolled back past 18 runs it again.
"""

from __future__ import annotations

import apsw

VERSION = 18
DESCRIPTION = "superseded_by, valid_to and superseded_reason on memories"

TIERS = ("scratchpad", "episodic", "semantic")
COLUMNS = (("superseded_by", "TEXT"), ("valid_to", "INTEGER"), ("superseded_reason", "TEXT"))


def up(conn: apsw.Connection) -> None:
    for tier in TIERS:
        present = {row[1] for row in conn.execute(f"PRAGMA table_info({tier})")}
        for column, kind in COLUMNS:
            if column not in present:
                conn.execute(f"ALTER TABLE {tier} ADD COLUMN {column} {kind}")
        conn.execute(
            f"CREATE INDEX IF NOT EXISTS idx_{tier}_superseded_by ON {tier} (superseded_by) "
            "WHERE superseded_by IS NOT NULL"
        )
        conn.execute(
            f"CREATE INDEX IF NOT EXISTS idx_{tier}_superseded ON {tier} (id) "
            "WHERE superseded_by IS NOT NULL"
        )

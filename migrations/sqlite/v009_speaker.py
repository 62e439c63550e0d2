"""Version 9: who said a memory or a transcript line (``speaker``, optional).

Recall boosts a speaker's memories when the query names exactly that speaker
(:mod:`tiered_memory.conversation`). Existing rows read ``NULL``: speaker unknown.
"""

from __future__ import annotations

import apsw

VERSION = 9
DESCRIPTION = "speaker column on memories and transcript lines"


def up(conn: apsw.Connection) -> None:
    for table in ("scratchpad", "episodic", "semantic", "session_transcripts"):
        conn.execute(f"ALTER TABLE {table} ADD COLUMN speaker TEXT")

"""Version 17: the vector codes also kept in packs, so opening a large file is cheap.

Loading the in-RAM vector copy from ``vector_codes`` (v015) reads one row per memory:
~60-150 ms at 100k memories, most of an open + first recall. ``maintain()`` now also
writes ``vector_code_packs``: the same codes in id order, ``PACK_ROWS`` per row, as two
blobs a reader maps into its arrays without a Python call per memory:

- ``ids``: the chunk's ids, each UTF-8 with a 0x01 end byte, NUL-padded to ``width``
  bytes (numpy's fixed-width bytes layout, as the copy keys its slots);
- ``codes``: their codes, ``vector_fit``'s code width each, in the same order.

Each row names its ``chunk`` number, the ``chunks`` written, the first and last id it
holds and the ``vector_changes`` position (``seq``, ``seq_id``) the packs stand at; a
reader takes the packs, the ``vector_codes`` rows of any chunk that is gone, then every
change logged after that position.

Derived data, and never stale: the triggers that drop a memory's code when it is deleted
or its vector changes (v015) now also delete the pack row holding it, so a forgotten
memory leaves no code behind (``secure_delete`` zeroes the freed pages); ``maintain()``
writes the packs again.
"""

from __future__ import annotations

import apsw

VERSION = 17
DESCRIPTION = "the vector codes also kept in packs of a thousand, read in a few rows"

TIERS = ("scratchpad", "episodic", "semantic")

DROP_CODE = "DELETE FROM vector_codes WHERE id = OLD.id"
DROP_PACK = (
    "DELETE FROM vector_code_packs WHERE chunk = (SELECT chunk FROM vector_code_packs "
    "WHERE last_id >= OLD.id ORDER BY last_id LIMIT 1) AND first_id <= OLD.id"
)
"""The pack row whose id range holds ``OLD.id`` (found through ``idx_vector_code_packs_last``)."""


def triggers(tier: str) -> list[str]:
    """v015's two triggers of ``tier``, now dropping the pack row too."""
    body = f"BEGIN {DROP_CODE}; {DROP_PACK}; END"
    return [
        f"CREATE TRIGGER {tier}_vector_code_delete AFTER DELETE ON {tier} {body}",
        f"""CREATE TRIGGER {tier}_vector_code_update AFTER UPDATE OF embedding ON {tier}
            WHEN OLD.embedding IS NOT NEW.embedding {body}""",
    ]


def up(conn: apsw.Connection) -> None:
    """Create the pack table and its index; replace v015's triggers. Idempotent: a file
    whose version rows were rolled back past 17 runs it again."""
    conn.execute(
        """CREATE TABLE IF NOT EXISTS vector_code_packs (
            chunk INTEGER PRIMARY KEY,
            chunks INTEGER NOT NULL,
            first_id TEXT NOT NULL,
            last_id TEXT NOT NULL,
            width INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            seq_id TEXT,
            ids BLOB NOT NULL,
            codes BLOB NOT NULL
        )"""
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS idx_vector_code_packs_last ON vector_code_packs(last_id)"
    )
    for tier in TIERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {tier}_vector_code_delete")
        conn.execute(f"DROP TRIGGER IF EXISTS {tier}_vector_code_update")
        for statement in triggers(tier):
            conn.execute(statement)

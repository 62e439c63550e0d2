"""Version 5: a staging table for re-embedding a file with another model.

Vectors of the new model are built here in committed batches (a crash loses at most
one batch) while the live embeddings and indexes stay untouched; one transaction then
swaps them in. ``store_meta`` says which model is being built.
"""

from __future__ import annotations

import apsw

VERSION = 5
DESCRIPTION = "embedding_rebuild staging table"


def up(conn: apsw.Connection) -> None:
    """Create the staging table."""
    conn.execute(
        """CREATE TABLE embedding_rebuild (
            memory_id TEXT PRIMARY KEY,
            content_hash BLOB NOT NULL,
            embedding BLOB NOT NULL
        ) WITHOUT ROWID"""
    )

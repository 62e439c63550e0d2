"""Version 19: the vector stage on disk (issue 46): k-means cells of 3-bit codes.

A search that keeps nothing per memory in RAM reads the codes of the few cells nearest
its query from the file (``persistence.sqlite.cell_vectors``). Derived data, written by
the library (``persistence.sqlite.cell_sync``) in the transactions that store vectors and
by ``maintain()``:

- ``vector_cell_state``: the one fit the codes are made with (as ``vector_fit``), how
  many cells there are, how many vectors they were trained on and hold now, a random ``generation``
  that changes whenever the centroids do (readers cache them by it), and the
  ``vector_changes`` position (``seq``, ``seq_id``) the cells stand at: every change
  logged up to it is in them, a reader compares what was logged after it exactly.
- ``vector_cells``: each cell's centroid (float32, unit length): all a reader keeps.
- ``vector_cell_packs``: each cell's codes in one row: ``ids`` (UTF-8 + 0x01, NUL-padded
  to ``width`` bytes, in id order) and ``codes`` (the fit's code width each, its first
  byte the memory's tier, in the same order).
- ``vector_cell_tail``: codes written since their cell was packed, one row each, keyed
  ``(cell, id)``: a write costs a row, not a pack; folded into the pack past a bound.
- ``vector_cell_members``: which cell holds each memory's code (pack or tail), so a
  changed or forgotten vector leaves its cell without a search.
"""

from __future__ import annotations

import apsw

VERSION = 19
DESCRIPTION = "the vector stage on disk: k-means cells of 3-bit codes"


def up(conn: apsw.Connection) -> None:
    """Create the cell tables (idempotent)."""
    conn.execute(
        """CREATE TABLE IF NOT EXISTS vector_cell_state (
            only INTEGER PRIMARY KEY CHECK (only = 1),
            dim INTEGER NOT NULL,
            fitted INTEGER NOT NULL,
            sqrt_factor REAL NOT NULL,
            fit BLOB NOT NULL,
            cells INTEGER NOT NULL,
            trained_on INTEGER NOT NULL,
            members INTEGER NOT NULL,
            generation INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            seq_id TEXT
        )"""
    )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS vector_cells (cell INTEGER PRIMARY KEY, centroid BLOB NOT NULL)"
    )
    conn.execute(
        """CREATE TABLE IF NOT EXISTS vector_cell_packs (
            cell INTEGER PRIMARY KEY,
            size INTEGER NOT NULL,
            width INTEGER NOT NULL,
            ids BLOB NOT NULL,
            codes BLOB NOT NULL
        )"""
    )
    conn.execute(
        """CREATE TABLE IF NOT EXISTS vector_cell_tail (
            cell INTEGER NOT NULL,
            id TEXT NOT NULL,
            code BLOB NOT NULL,
            PRIMARY KEY (cell, id)
        ) WITHOUT ROWID"""
    )
    conn.execute(
        """CREATE TABLE IF NOT EXISTS vector_cell_members (
            id TEXT PRIMARY KEY,
            cell INTEGER NOT NULL
        ) WITHOUT ROWID"""
    )

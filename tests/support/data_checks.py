"""Checksums of a database's data, to prove an operation changed nothing (or exactly what)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import apsw

from persistence.sqlite.erasure import PENDING_KEY


def open_raw(path: Path, readonly: bool = False) -> apsw.Connection:
    """A plain APSW connection (no library policy)."""
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
    conn = apsw.Connection(str(path), flags=flags)
    return conn


def data_checksum(path: Path, *, fts_segments: bool = True, erasure_mark: bool = True) -> str:
    """sha256 over every row of every table, in a stable order (planner stats excluded).
    ``fts_segments=False`` leaves out FTS5's segment tables too, whose layout the keyword
    index's merges change without changing what it holds. ``erasure_mark=False`` leaves
    out the ``erasure_pending`` mark a delete sets and the close (or the next writable
    open) clears once it has erased what the delete left in FTS5's segments."""
    conn = open_raw(path, readonly=True)
    try:
        digest = hashlib.sha256()
        skip = (
            "" if fts_segments else (" AND name NOT LIKE '%fts_data' AND name NOT LIKE '%fts_idx'")
        )
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' "
            f"AND name NOT LIKE 'sqlite_stat%'{skip} ORDER BY name")]  # fmt: skip
        for table in tables:
            digest.update(table.encode())
            kept = (
                row
                for row in conn.execute(f'SELECT * FROM "{table}"')
                if erasure_mark or table != "store_meta" or row[0] != PENDING_KEY
            )
            rows = sorted(repr(row) for row in kept)
            for row in rows:
                digest.update(row.encode())
        return digest.hexdigest()
    finally:
        conn.close()

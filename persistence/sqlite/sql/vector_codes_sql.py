"""SQL for ``vector_codes`` and ``vector_fit``: the vector copy's codes kept in the file
(see :mod:`persistence.sqlite.code_sync`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import apsw

from persistence.sqlite.connection import query_one

FitRow = tuple[int, int, float, bytes, int, str | None]
"""``(dim, fitted, sqrt_factor, fit blob, seq, seq_id)``."""

_READ_FIT = "SELECT dim, fitted, sqrt_factor, fit, seq, seq_id FROM vector_fit WHERE only = 1"
_WRITE_FIT = (
    "INSERT INTO vector_fit (only, dim, fitted, sqrt_factor, fit, seq, seq_id) "
    "VALUES (1, ?, ?, ?, ?, ?, ?) ON CONFLICT (only) DO UPDATE SET dim = excluded.dim, "
    "fitted = excluded.fitted, sqrt_factor = excluded.sqrt_factor, fit = excluded.fit, "
    "seq = excluded.seq, seq_id = excluded.seq_id"
)
_MOVE = "UPDATE vector_fit SET seq = ?, seq_id = ? WHERE only = 1"
_PUT = "INSERT OR REPLACE INTO vector_codes (id, code) VALUES (?, ?)"


def read_fit(conn: apsw.Connection) -> FitRow | None:
    """The stored fit and the log position its codes stand at, or ``None``."""
    row = query_one(conn, _READ_FIT)
    if row is None:
        return None
    dim, fitted, factor, blob, seq, seq_id = row
    return int(dim), int(fitted), float(factor), bytes(blob), int(seq), seq_id


def write_fit(conn: apsw.Connection, row: FitRow) -> None:
    """Store the fit and the position its codes stand at."""
    conn.execute(_WRITE_FIT, row)


def move_to(conn: apsw.Connection, seq: int, seq_id: str | None) -> None:
    """The codes now stand at log position ``seq``."""
    conn.execute(_MOVE, (seq, seq_id))


def drop_all(conn: apsw.Connection) -> None:
    """No codes and no fit: a reader encodes the vectors itself."""
    conn.execute("DELETE FROM vector_codes")
    conn.execute("DELETE FROM vector_fit")


def drop(conn: apsw.Connection, memory_ids: Sequence[str]) -> None:
    """Delete the codes of ``memory_ids``."""
    conn.executemany("DELETE FROM vector_codes WHERE id = ?", [(i,) for i in memory_ids])


def put(conn: apsw.Connection, rows: Sequence[tuple[str, bytes]]) -> None:
    """Store ``(id, code)`` rows."""
    conn.executemany(_PUT, rows)


def keyed_rows(conn: apsw.Connection, end: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Every stored ``(UTF-8 id + end, code)``, streamed in id order: the ids as the
    vector copy keys them, made by SQLite rather than one Python call per row."""
    sql = "SELECT CAST(id || ? AS BLOB), code FROM vector_codes"
    return iter(conn.execute(sql, (end.decode(),)))

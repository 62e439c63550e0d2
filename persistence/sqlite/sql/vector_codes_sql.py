"""SQL for ``vector_codes``, ``vector_code_packs`` and ``vector_fit``: the vector copy's
codes kept in the file (see :mod:`persistence.sqlite.code_sync`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import apsw

from persistence.sqlite.connection import query_all, query_one

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
    """No codes, no packs and no fit: a reader encodes the vectors itself."""
    conn.execute("DELETE FROM vector_codes")
    conn.execute("DELETE FROM vector_code_packs")
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


def count_of_width(conn: apsw.Connection, width: int) -> int:
    """How many stored codes are ``width`` bytes long (made with the stored fit)."""
    row = query_one(conn, "SELECT count(*) FROM vector_codes WHERE length(code) = ?", (width,))
    return int(row[0]) if row else 0


def keyed_rows_of_width(
    conn: apsw.Connection, end: bytes, width: int
) -> Iterator[tuple[bytes, bytes]]:
    """:func:`keyed_rows` of the codes ``width`` bytes long, in id order."""
    sql = "SELECT CAST(id || ? AS BLOB), code FROM vector_codes WHERE length(code) = ? ORDER BY id"
    return iter(conn.execute(sql, (end.decode(), width)))


def keyed_rows_between(
    conn: apsw.Connection, end: bytes, after: str | None, before: str | None
) -> Iterator[tuple[bytes, bytes]]:
    """:func:`keyed_rows` of the ids strictly between ``after`` and ``before`` (``None``:
    no bound on that side)."""
    sql = (
        "SELECT CAST(id || ? AS BLOB), code FROM vector_codes "
        "WHERE (?2 IS NULL OR id > ?2) AND (?3 IS NULL OR id < ?3) ORDER BY id"
    )
    return iter(conn.execute(sql, (end.decode(), after, before)))


@dataclass(frozen=True, slots=True)
class Pack:
    """One row of ``vector_code_packs`` (migration v017 says what each column holds)."""

    chunk: int
    chunks: int
    first_id: str
    last_id: str
    width: int
    seq: int
    seq_id: str | None
    ids: bytes
    codes: bytes


PackHead = tuple[int, int, str, str, int, int, str | None, int, int]
"""A pack row without its blobs: ``(chunk, chunks, first_id, last_id, width, seq, seq_id,
bytes of ids, bytes of codes)``."""

_PACK_HEADS = (
    "SELECT chunk, chunks, first_id, last_id, width, seq, seq_id, length(ids), length(codes) "
    "FROM vector_code_packs ORDER BY chunk"
)
_PACK_BLOBS = "SELECT chunk, ids, codes FROM vector_code_packs ORDER BY chunk"
_PUT_PACK = (
    "INSERT INTO vector_code_packs (chunk, chunks, first_id, last_id, width, seq, seq_id, "
    "ids, codes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_PACK_STATE = (
    "SELECT count(*), min(chunks), max(chunks), total(seq = ? AND seq_id IS ?) "
    "FROM vector_code_packs"
)


def pack_heads(conn: apsw.Connection) -> list[PackHead]:
    """Every pack row's columns but its blobs (their lengths instead), in chunk order."""
    return [
        (int(c), int(n), str(a), str(b), int(w), int(s), i, int(li), int(lc))
        for c, n, a, b, w, s, i, li, lc in query_all(conn, _PACK_HEADS)
    ]


def pack_blobs(conn: apsw.Connection) -> Iterator[tuple[int, bytes, bytes]]:
    """``(chunk, ids, codes)`` of every pack row, streamed in chunk order (a million
    memories' packs are ~150 MB: never all in RAM at once)."""
    return iter(conn.execute(_PACK_BLOBS))


def packs_complete_at(conn: apsw.Connection, seq: int, seq_id: str | None) -> bool:
    """True if every pack written is still there and they stand at log position
    ``(seq, seq_id)``."""
    row = query_one(conn, _PACK_STATE, (seq, seq_id))
    if row is None or not row[0]:
        return False
    count, fewest, most, current = row
    return bool(fewest == most == count == int(current))


def drop_packs(conn: apsw.Connection) -> None:
    """Delete every pack row."""
    conn.execute("DELETE FROM vector_code_packs")


def put_packs(conn: apsw.Connection, rows: Sequence[Pack]) -> None:
    """Store pack rows."""
    conn.executemany(
        _PUT_PACK,
        [(p.chunk, p.chunks, p.first_id, p.last_id, p.width, p.seq, p.seq_id, p.ids, p.codes)
         for p in rows],
    )  # fmt: skip

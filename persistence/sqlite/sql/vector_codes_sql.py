"""SQL for ``vector_codes``, ``vector_code_packs`` and ``vector_fit``: the vector copy's
codes kept in the file (run by :mod:`persistence.sqlite.code_sync` and
:mod:`persistence.sqlite.vector_mirror`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from persistence.statements import Batch, Row, Statement

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


READ_FIT = Statement(_READ_FIT)
"""The stored fit and the log position its codes stand at: :func:`to_fit` decodes it."""


def to_fit(row: Row | None) -> FitRow | None:
    """:data:`READ_FIT`'s row, typed (``None``: no fit stored)."""
    if row is None:
        return None
    dim, fitted, factor, blob, seq, seq_id = row
    return int(dim), int(fitted), float(factor), bytes(blob), int(seq), seq_id


def write_fit(row: FitRow) -> Statement:
    """Store the fit and the position its codes stand at."""
    return Statement(_WRITE_FIT, row)


def move_to(seq: int, seq_id: str | None) -> Statement:
    """The codes now stand at log position ``seq``."""
    return Statement(_MOVE, (seq, seq_id))


DROP_ALL = (
    Statement("DELETE FROM vector_codes"),
    Statement("DELETE FROM vector_code_packs"),
    Statement("DELETE FROM vector_fit"),
)
"""No codes, no packs and no fit: a reader encodes the vectors itself."""


def drop(memory_ids: Sequence[str]) -> Batch:
    """Delete the codes of ``memory_ids``."""
    return Batch("DELETE FROM vector_codes WHERE id = ?", [(i,) for i in memory_ids])


def put(rows: Sequence[tuple[str, bytes]]) -> Batch:
    """Store ``(id, code)`` rows."""
    return Batch(_PUT, rows)


def keyed_rows(end: bytes) -> Statement:
    """Every stored ``(UTF-8 id + end, code)`` (stream it), in id order: the ids as the
    vector copy keys them, made by SQLite rather than one Python call per row."""
    return Statement("SELECT CAST(id || ? AS BLOB), code FROM vector_codes", (end.decode(),))


def count_of_width(width: int) -> Statement:
    """How many stored codes are ``width`` bytes long (made with the stored fit)."""
    return Statement("SELECT count(*) FROM vector_codes WHERE length(code) = ?", (width,))


def keyed_rows_of_width(end: bytes, width: int) -> Statement:
    """:func:`keyed_rows` of the codes ``width`` bytes long, in id order."""
    sql = "SELECT CAST(id || ? AS BLOB), code FROM vector_codes WHERE length(code) = ? ORDER BY id"
    return Statement(sql, (end.decode(), width))


def keyed_rows_between(end: bytes, after: str | None, before: str | None) -> Statement:
    """:func:`keyed_rows` of the ids strictly between ``after`` and ``before`` (``None``:
    no bound on that side)."""
    sql = (
        "SELECT CAST(id || ? AS BLOB), code FROM vector_codes "
        "WHERE (?2 IS NULL OR id > ?2) AND (?3 IS NULL OR id < ?3) ORDER BY id"
    )
    return Statement(sql, (end.decode(), after, before))


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


PACK_HEADS = Statement(_PACK_HEADS)
"""Every pack row's columns but its blobs (their lengths instead), in chunk order:
:func:`to_pack_heads` decodes them."""


def to_pack_heads(rows: Sequence[Row]) -> list[PackHead]:
    """:data:`PACK_HEADS`' rows, typed."""
    return [
        (int(c), int(n), str(a), str(b), int(w), int(s), i, int(li), int(lc))
        for c, n, a, b, w, s, i, li, lc in rows
    ]


PACK_BLOBS = Statement(_PACK_BLOBS)
"""``(chunk, ids, codes)`` of every pack row in chunk order: stream it (a million
memories' packs are ~150 MB: never all in RAM at once)."""


def pack_state(seq: int, seq_id: str | None) -> Statement:
    """How the packs stand against log position ``(seq, seq_id)``: decoded by
    :func:`complete`."""
    return Statement(_PACK_STATE, (seq, seq_id))


def complete(row: Row | None) -> bool:
    """From :func:`pack_state`'s row: True if every pack written is still there and they
    stand at the position asked about."""
    if row is None or not row[0]:
        return False
    count, fewest, most, current = row
    return bool(fewest == most == count == int(current))


DROP_PACKS = Statement("DELETE FROM vector_code_packs")
"""Delete every pack row."""


def put_packs(rows: Sequence[Pack]) -> Batch:
    """Store pack rows."""
    return Batch(
        _PUT_PACK,
        [(p.chunk, p.chunks, p.first_id, p.last_id, p.width, p.seq, p.seq_id, p.ids, p.codes)
         for p in rows],
    )  # fmt: skip

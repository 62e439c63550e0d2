"""The vector cells' packs (migration v019): each cell's codes in one row, the ids in
order beside them, and folding a cell's tail of single-row codes into its pack.

A pack is written again whenever a code leaves it (a changed or forgotten vector): no
tombstones, so a search never reads a dead code, and a forgotten memory's code leaves
the file in the transaction that forgets it. Run by :mod:`persistence.sqlite.cell_sync`.
"""

from __future__ import annotations

import apsw
import numpy as np

from persistence import statements
from persistence.sqlite.sql import cell_sql
from persistence.sqlite.vector_codes import ID_END, CodeFit
from persistence.statements import rows, run


class DamagedPack(Exception):
    """A pack whose ids and codes do not add up (a damaged file): the cells are dropped
    and trained again (:func:`persistence.sqlite.cell_sync.sync`), searches use the RAM
    copy meanwhile, and ``check`` reports it."""


def pack_keys(cell: int, size: int, width: int, ids: bytes, codes: bytes) -> np.ndarray:
    """The keys (id + end byte, fixed width) of a pack row, checked against its codes
    (and that its ids are text)."""
    size, width = int(size), int(width)
    if (
        size <= 0
        or width <= 0
        or len(ids) % size
        or len(ids) < 2 * size
        or (len(codes) != size * width)
    ):
        raise DamagedPack(
            f"cell {cell}'s pack holds {len(ids)} id bytes and {len(codes)} code bytes "
            f"for {size} codes of {width} bytes"
        )
    try:  # every key ends in an ASCII byte: the whole decodes exactly when each does
        bytes(ids).decode()
    except UnicodeDecodeError as exc:
        raise DamagedPack(f"cell {cell}'s pack holds an id that is not UTF-8") from exc
    return np.frombuffer(bytes(ids), dtype=f"S{len(ids) // size}")


def pack_rows(conn: apsw.Connection, cell: int) -> tuple[np.ndarray, bytes, int]:
    """``cell``'s packed keys (id + end byte, fixed width), codes and code width."""
    found = statements.row(conn, cell_sql.packs_of([cell]))
    if found is None:
        return np.zeros(0, dtype="S1"), b"", 0
    _, size, width, ids, codes = found
    return pack_keys(cell, size, width, bytes(ids), bytes(codes)), bytes(codes), int(width)


def rewrite_pack(conn: apsw.Connection, cell: int, gone: set[str]) -> None:
    """Write ``cell``'s pack again without the codes of ``gone`` memories."""
    keys, codes, width = pack_rows(conn, cell)
    if not len(keys):
        return
    drop = np.array([g.encode() + ID_END for g in gone])
    keep = ~np.isin(keys, drop)
    raw = np.frombuffer(codes, dtype=np.uint8).reshape(len(keys), width)
    put_pack(conn, cell, keys[keep], raw[keep], width)


def put_pack(
    conn: apsw.Connection, cell: int, keys: np.ndarray, raw: np.ndarray, width: int
) -> None:
    """Write ``cell``'s pack: ``keys`` and their ``[n, width]`` codes, in key order (none:
    no pack)."""
    if not len(keys):
        run(conn, cell_sql.drop_pack(cell))
        return
    order = np.argsort(keys, kind="stable")
    keys, raw = keys[order], raw[order]
    run(conn, cell_sql.put_pack(cell, len(keys), width, keys.tobytes(),
                                np.ascontiguousarray(raw).tobytes()))  # fmt: skip


def fold(conn: apsw.Connection, fit: CodeFit, cell: int) -> None:
    """Fold ``cell``'s tail into its pack (codes of another width are dropped)."""
    width = fit.code_bytes
    keys, codes, old_width = pack_rows(conn, cell)
    tail = [(str(i), bytes(c)) for i, c in rows(conn, cell_sql.tail_of(cell))]
    if any(len(c) != width for _, c in tail):
        raise DamagedPack(f"cell {cell}'s tail holds a code that is not {width} bytes")
    if old_width not in (0, width):
        raise DamagedPack(f"cell {cell}'s pack holds codes of {old_width} bytes, not {width}")
    tail_keys = np.array([i.encode() + ID_END for i, _ in tail], dtype="S1" if not tail else None)
    all_keys = np.concatenate([keys.astype(f"S{max(keys.itemsize, tail_keys.itemsize)}"),
                               tail_keys])  # fmt: skip
    raw = np.frombuffer(codes + b"".join(c for _, c in tail), dtype=np.uint8)
    put_pack(conn, cell, all_keys, raw.reshape(len(all_keys), width), width)
    run(conn, cell_sql.drop_tail(cell))


def fold_all(conn: apsw.Connection, fit: CodeFit) -> None:
    """Fold every tail into its pack."""
    for cell in sorted(int(c) for (c,) in rows(conn, cell_sql.TAIL_CELLS)):
        fold(conn, fit, cell)


def held(conn: apsw.Connection, cell: int) -> int:
    """How many codes ``cell`` holds (its pack and its tail)."""
    size = statements.value(conn, cell_sql.pack_size(cell))
    return int(size or 0) + int(statements.value(conn, cell_sql.tail_count(cell)) or 0)

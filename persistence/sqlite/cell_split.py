"""Splitting an over-full vector cell inside the write that filled it (issue 46).

A file that grows by writes is trained inside them only up to
:data:`~persistence.sqlite.cell_sync.FIRST_TRAIN_MAX` vectors (into one cell below
:data:`~persistence.sqlite.cell_sync.CELLS_FROM`); past that, ``maintain()`` trains it.
Until then the cells keep up here: once the file holds ``CELLS_FROM`` vectors, a cell a
sync touched that holds more than :func:`split_above` codes (the fixed
:data:`~persistence.sqlite.cell_train.CELL_SIZE` a trained cell holds at most: a file grown
by writes keeps cells of the size training makes) is split in two by 2-means
on its own vectors, in the same transaction: its members stay or move to a new cell (the
next number), each pack is written again, the centroids and the state's count and
generation follow (readers load the new centroids). Codes do not change (the fit is the
file's), so ``check_integrity``'s ``vector_cells_match`` holds after a split as before.
The cost is bounded by the cell: its floats read once, 2-means over them, two packs and
the moved members written (a 16k-vector cell, the largest one a write may meet, when a
file first passes ``CELLS_FROM``: about 0.2 s, and halves of it in the next writes that
reach them; cells of ``split_above`` codes after that: a few ms, once every few hundred
vectors a cell takes in). One exception: training keeps alike vectors (one text
remembered again and again) in one cell however many there are, and the first write
that reaches it reads all of their floats to halve it.
"""

from __future__ import annotations

import secrets

import apsw
import numpy as np

from persistence.sqlite import cell_packs, cell_train, vector_reads
from persistence.sqlite.cell_kmeans import kmeans, nearest_cells, normalised
from persistence.sqlite.sql import cell_sql
from persistence.sqlite.sql.cell_sql import CellState
from persistence.sqlite.vector_codes import CodeFit
from persistence.statements import run, run_batch

SPLIT_SAMPLE = 4_096
"""The 2-means of a split is trained on at most about this many of the cell's vectors."""


def split_above() -> int:
    """Codes a cell may hold before a write that reaches it splits it: the size training
    bisects cells to (fixed: a search probes a fixed number of cells at any size)."""
    return cell_train.CELL_SIZE


def split(conn: apsw.Connection, fit: CodeFit, cell: int, new_cell: int) -> bool:
    """Split ``cell`` (its tail folded first) in two: the members nearer the second of
    its 2-means centroids move to ``new_cell``; vectors 2-means does not divide (all
    alike) are halved by key order, both halves at their mean. False, and nothing
    changed, when one is missing (the next sync sees it)."""
    cell_packs.fold(conn, fit, cell)
    keys, codes, width = cell_packs.pack_rows(conn, cell)
    ids = [bytes(k)[:-1].decode() for k in keys.tolist()]
    vectors = vectors_of(conn, ids, fit.dim) if len(ids) >= 2 else None
    if vectors is None:
        return False
    sample = vectors[:: max(1, len(vectors) // SPLIT_SAMPLE)]
    two = kmeans(np.ascontiguousarray(sample), 2, seed=cell)
    moving = nearest_cells(vectors, two) == 1
    if moving.all() or not moving.any():  # alike (one text remembered again and again):
        # halved by key order, both halves at their mean, so no write re-reads it at once
        moving = np.arange(len(ids)) >= len(ids) // 2
        two = kmeans(np.ascontiguousarray(sample), 1, seed=cell).repeat(2, axis=0)
    raw = np.frombuffer(codes, dtype=np.uint8).reshape(len(keys), width)
    cell_packs.put_pack(conn, cell, keys[~moving], raw[~moving], width)
    cell_packs.put_pack(conn, new_cell, keys[moving], raw[moving], width)
    moved = [(new_cell, memory_id) for memory_id, m in zip(ids, moving.tolist(), strict=True) if m]
    run_batch(conn, cell_sql.move_members(moved))
    run_batch(conn, cell_sql.put_centroids([(new_cell, two[1].tobytes())]))
    run(conn, cell_sql.replace_centroid(cell, two[0].tobytes()))
    return True


def vectors_of(conn: apsw.Connection, ids: list[str], dim: int) -> np.ndarray | None:
    """The normalised vectors of ``ids`` in their order, read a chunk at a time (one
    float32 array in memory, not the cell's blobs as well); ``None`` if one is missing."""
    out = np.empty((len(ids), dim), dtype=np.float32)
    step = vector_reads.IDS_PER_READ
    for start in range(0, len(ids), step):
        chunk = ids[start : start + step]
        found = {m: blob for m, _, blob in vector_reads.embeddings_of(conn, chunk)}
        if any(len(found.get(i, b"")) != 4 * dim for i in chunk):
            return None
        out[start : start + len(chunk)] = normalised([found[i] for i in chunk], dim)
    return out


def split_full(conn: apsw.Connection, state: CellState, fit: CodeFit, cells: list[int]) -> int:
    """Split each of ``cells`` past :func:`split_above` (``state`` as the sync leaves
    it; the caller splits only a file of ``CELLS_FROM`` vectors or more); the state
    records the new count of cells and a new generation. How many were split."""
    bound = split_above()
    count = state.cells
    for cell in cells:
        if cell_packs.held(conn, cell) > bound and split(conn, fit, cell, count):
            count += 1
    if count != state.cells:
        run(conn, cell_sql.count_cells(count, secrets.randbits(62)))
    return count - state.cells

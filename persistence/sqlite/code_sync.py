"""Keeping the vector copy's codes in the file, so opening a large file is cheap.

Loading the in-RAM vector copy (:mod:`persistence.sqlite.vector_mirror`) by reading and
encoding every float vector took ~0.5 s at 100k memories here (~1 s on a loaded machine).
The file therefore keeps each embedded memory's 3-bit code (``vector_codes``, 144 bytes
at 384 dimensions) and the one fit they were made with (``vector_fit``), with the
``vector_changes`` position they stand at. A reader loads the codes, then takes in
what the log records after that position, as it does between searches.

Who writes them: :func:`sync`, inside a write transaction that already writes, brings the
codes up to the log's head. The embedding queue's writes run it (a few codes each time);
``maintain()`` runs it with ``rebuild=True``, which also makes the first fit on a large
file, or a new one after the model changed. Codes are only ever a cache: a reader that
finds none, or finds them behind a trimmed log, encodes the vectors as before.
"""

from __future__ import annotations

import logging
from itertools import islice

import apsw
import numpy as np

from persistence import statements
from persistence.records import Tier
from persistence.sqlite import vector_reads
from persistence.sqlite.sql import index_sql, meta_sql, vector_codes_sql
from persistence.sqlite.sql.meta_sql import EMBEDDING_DIM_KEY
from persistence.sqlite.vector_codes import (
    CAL_ROWS,
    EXACT_BELOW,
    FIT_ROWS,
    ID_END,
    CodeFit,
    code_blobs,
)
from persistence.statements import run, run_all, run_batch, stream, value

log = logging.getLogger("tiered_memory")

INCREMENTAL_MAX = 16_384
"""Changes a sync without ``rebuild`` takes on; a bigger backlog waits for ``maintain()``
(or is read from the float vectors by each reader, as before codes were kept)."""
FIRST_FIT_MAX = 4 * FIT_ROWS
"""A file with at most this many embedded memories gets its first fit in any sync."""
_CHUNK = 4_096
PACK_ROWS = 1_024
"""Codes per pack row (migration v017): a forget rewrites one pack's ~150 KB of pages,
and a million memories are a thousand rows."""


def stored_fit(conn: apsw.Connection, dim: int) -> tuple[CodeFit, int, str | None] | None:
    """The stored fit with the log position ``(seq, seq_id)`` its codes stand at, if it
    is for ``dim`` dimensions and that position is still in the change log."""
    row = _read_fit(conn)
    if row is None:
        return None
    fit_dim, fitted, factor, blob, seq, seq_id = row
    fit = CodeFit.from_row(fit_dim, fitted, factor, blob)
    if fit is None or fit_dim != dim or not position_kept(conn, seq, seq_id):
        return None
    return fit, seq, seq_id


def _read_fit(conn: apsw.Connection) -> vector_codes_sql.FitRow | None:
    return vector_codes_sql.to_fit(statements.row(conn, vector_codes_sql.READ_FIT))


def position_kept(conn: apsw.Connection, seq: int, seq_id: str | None) -> bool:
    """True if every change logged after position ``(seq, seq_id)`` is still in the log,
    and it is the log that position was taken from."""
    if vector_reads.change_floor(conn) > seq + 1:
        return False  # changes after ``seq`` were trimmed from the log
    # A different id at ``seq``: not the log the codes followed (the file was replaced).
    return not seq or vector_reads.change_at(conn, seq) == seq_id


def sync(conn: apsw.Connection, *, rebuild: bool = False) -> int:
    """Bring the stored codes up to the change log's head in the caller's write
    transaction; the number of codes written.

    Without ``rebuild`` only cheap work is done: at most :data:`INCREMENTAL_MAX` changes,
    and a first fit only for a file of at most :data:`FIRST_FIT_MAX` embedded memories.
    With it, codes no reader can use (none yet, another model, a log trimmed past them)
    are made again from every vector.
    """
    dim_text = value(conn, meta_sql.read(EMBEDDING_DIM_KEY))
    if dim_text is None or int(dim_text) < EXACT_BELOW:
        return 0  # no vectors yet, or too few dimensions for codes (scanned exactly)
    dim = int(dim_text)
    head_seq, head_id = vector_reads.change_head(conn)
    stored = stored_fit(conn, dim)
    if stored is not None:
        fit, seq, _ = stored
        if seq == head_seq:
            return 0
        changed = vector_reads.changed_since(conn, seq)
        if len(changed) > INCREMENTAL_MAX and not rebuild:
            return 0
        written = _write(conn, fit, changed)
        run(conn, vector_codes_sql.move_to(head_seq, head_id))
        return written
    unembedded = int(value(conn, index_sql.unembedded_count()) or 0)
    # Counted only as far as the rule needs: a sync runs with every embedding batch.
    bound = None if rebuild else FIRST_FIT_MAX + unembedded + 1
    embedded = vector_reads.memory_count(conn, at_most=bound) - unembedded
    if embedded > FIRST_FIT_MAX and not rebuild:
        return 0
    if embedded < FIT_ROWS:
        if _read_fit(conn) is not None:
            run_all(conn, vector_codes_sql.DROP_ALL)
        return 0
    return _rebuild(conn, dim, head_seq, head_id)


def sync_alone(conn: apsw.Connection) -> int:
    """:func:`sync` with ``rebuild=True`` in a transaction of its own on ``conn`` (which
    has none open), as ``maintain()`` runs it."""
    # Statements, not ``with conn``: the SQL tracer hears every statement as a cursor's.
    conn.execute("BEGIN IMMEDIATE")
    try:
        written = sync(conn, rebuild=True)
        repack(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return written


def repack(conn: apsw.Connection) -> int:
    """Write the packs (migration v017) again from the code rows, in the caller's write
    transaction, unless all of them are there at the codes' position; the number of
    pack rows written. Without codes there are no packs."""
    row = _read_fit(conn)
    fit = None if row is None else CodeFit.from_row(*row[:4])
    if row is None or fit is None:
        run(conn, vector_codes_sql.DROP_PACKS)
        return 0
    seq, seq_id = row[4], row[5]
    if vector_codes_sql.complete(statements.row(conn, vector_codes_sql.pack_state(seq, seq_id))):
        return 0
    run(conn, vector_codes_sql.DROP_PACKS)
    width = fit.code_bytes
    count = int(value(conn, vector_codes_sql.count_of_width(width)) or 0)
    chunks = -(-count // PACK_ROWS)
    rows = stream(conn, vector_codes_sql.keyed_rows_of_width(ID_END, width))
    for chunk in range(chunks):
        batch = list(islice(rows, PACK_ROWS))
        keys = np.array([key for key, _ in batch])
        pack = vector_codes_sql.Pack(
            chunk, chunks, batch[0][0][:-1].decode(), batch[-1][0][:-1].decode(),
            keys.itemsize, seq, seq_id, keys.tobytes(), b"".join(code for _, code in batch),
        )  # fmt: skip
        run_batch(conn, vector_codes_sql.put_packs([pack]))
    log.info("vector codes packed: %d codes in %d rows", count, chunks)
    return chunks


def _normalised(blobs: list[bytes], dim: int) -> np.ndarray:
    vectors = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dim)
    norms = np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
    normalised: np.ndarray = vectors / norms
    return normalised


def _put(conn: apsw.Connection, fit: CodeFit, rows: list[tuple[str, Tier, bytes]]) -> int:
    rows = [row for row in rows if len(row[2]) == 4 * fit.dim]
    if not rows:
        return 0
    bits, low = fit.encode(_normalised([blob for _, _, blob in rows], fit.dim))
    codes = code_blobs([tier for _, tier, _ in rows], bits, low)
    run_batch(
        conn, vector_codes_sql.put([(i, c) for (i, _, _), c in zip(rows, codes, strict=True)])
    )
    return len(rows)


def _write(conn: apsw.Connection, fit: CodeFit, changed: list[str]) -> int:
    """Codes of the current vectors of ``changed`` memories (gone ones lose theirs)."""
    written = 0
    for start in range(0, len(changed), _CHUNK):
        chunk = changed[start : start + _CHUNK]
        run_batch(conn, vector_codes_sql.drop(chunk))
        written += _put(conn, fit, vector_reads.embeddings_of(conn, chunk))
    return written


def _rebuild(conn: apsw.Connection, dim: int, seq: int, seq_id: str | None) -> int:
    """Every code made again, with a new fit (on the first ``FIT_ROWS`` vectors in tier
    order, as a reader without codes fits) calibrated on a sample."""
    run_all(conn, vector_codes_sql.DROP_ALL)
    first: list[bytes] = []
    for tier in Tier:
        for _, blob in vector_reads.embedded_rows(conn, tier):
            if len(blob) == 4 * dim:
                first.append(blob)
                if len(first) == FIT_ROWS:
                    break
        if len(first) == FIT_ROWS:
            break
    fit = CodeFit.of(_normalised(first, dim))
    total = vector_reads.memory_count(conn)
    every = max(total // CAL_ROWS, 1)
    sample: list[bytes] = []
    written = seen = 0
    for tier in Tier:
        rows = vector_reads.embedded_rows(conn, tier)
        batch: list[tuple[str, Tier, bytes]] = []
        for memory_id, blob in rows:
            batch.append((memory_id, tier, blob))
            if seen % every == 0 and len(blob) == 4 * dim:
                sample.append(blob)
            seen += 1
            if len(batch) == _CHUNK:
                written += _put(conn, fit, batch)
                batch = []
        written += _put(conn, fit, batch)
    fit = fit.calibrated(_normalised(sample, dim))
    fit_row = (dim, fit.fitted, fit.sqrt_factor, fit.to_blob(), seq, seq_id)
    run(conn, vector_codes_sql.write_fit(fit_row))
    log.info("vector codes rebuilt: %d codes, first stage %.1f * sqrt(size)", written,
             fit.sqrt_factor)  # fmt: skip
    return written

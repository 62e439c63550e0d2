"""Keeping the vector cells (migration v019) in step with the file's vectors.

The cells are partitions of the normalised vectors of a fixed size: ``sqrt(N)`` k-means
cells bisected into cells of at most :data:`~persistence.sqlite.cell_train.CELL_SIZE`
(:func:`train_cells`); one below :data:`CELLS_FROM` vectors, where a search then scores
every code, as the RAM copy does. Each cell's 3-bit codes
(:class:`~persistence.sqlite.vector_codes.CodeFit`) sit packed in one row; codes written
since the pack sit in a tail of one row each.

Who writes them: :func:`sync`, inside the transaction that stores vectors, brings the
cells to the ``vector_changes`` head: a changed or deleted vector leaves its cell (its
tail row, or its cell's pack is written again without it: no tombstones, so a search
never reads a dead code and a forgotten memory's code is gone once its change is
synced), a current vector joins the tail of its nearest cell, and a tail past
:func:`tail_bound` is folded into its pack. A small file is trained here as well (at
most :data:`FIRST_TRAIN_MAX` vectors) and, from :data:`CELLS_FROM` vectors on, a cell
it touched that grew past ``CELL_SIZE`` is split in two
(:mod:`persistence.sqlite.cell_split`), so a file grown by writes keeps cells of the size
training makes; :func:`sync_alone`
(``maintain()``) trains a large one, trains again once the file holds four times the
vectors the cells were trained on or its cells are :func:`oversized` (trained the
``sqrt(N)`` way), and folds every tail. What the cells do not hold yet
(the changes logged after their position) a reader compares exactly
(:mod:`persistence.sqlite.cell_vectors`).
"""

from __future__ import annotations

import logging
import math
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace

import apsw
import numpy as np

from persistence import statements
from persistence.records import Tier
from persistence.sqlite import cell_packs, cell_split, cell_train, vector_reads
from persistence.sqlite.cell_centroids import Centroids
from persistence.sqlite.cell_kmeans import cell_sums, kmeans, nearest_cells, normalised
from persistence.sqlite.code_sync import position_kept
from persistence.sqlite.sql import cell_sql, index_sql, meta_sql
from persistence.sqlite.sql.cell_sql import CellState
from persistence.sqlite.sql.meta_sql import EMBEDDING_DIM_KEY
from persistence.sqlite.vector_codes import (
    CAL_ROWS,
    EXACT_BELOW,
    FIT_ROWS,
    CodeFit,
    code_blobs,
)
from persistence.statements import rows, run, run_all, run_batch, value

log = logging.getLogger("tiered_memory")

TRAIN_MIN = 1_024
"""Fewer embedded memories: no cells (the RAM copy of so few is small)."""
FIRST_TRAIN_MAX = 16_384
"""A sync inside a write trains (or trains again) a file of at most this many."""
CELLS_FROM = 20_000
"""Fewer vectors: one cell (a search scores every code, as the RAM copy does)."""
INCREMENTAL_MAX = 16_384
"""Changes a sync without ``rebuild`` takes on; more wait for ``maintain()``."""
TAIL_MIN = 256
"""A cell's tail is folded into its pack past this many rows, or an eighth of the pack."""
SAMPLE_PER_CELL = 64
_CHUNK = 4_096
_CENTROID_ROWS = 256


def coarse_cells_for(count: int) -> int:
    """How many coarse cells ``count`` vectors are first trained into (each then bisected
    into cells of at most ``CELL_SIZE``: :func:`train_cells`)."""
    return 1 if count < CELLS_FROM else round(math.sqrt(count))


def oversized(state: CellState) -> bool:
    """True if the cells hold more than ``CELL_SIZE`` codes each on average: trained the
    old way (``sqrt(N)`` cells of ``sqrt(N)``, before issue 46's fixed size) or grown
    past what writes' splits keep up with; ``maintain()`` trains them again."""
    return state.members >= CELLS_FROM and state.members > cell_train.CELL_SIZE * state.cells


def tail_bound(pack_size: int) -> int:
    """Tail rows a cell with ``pack_size`` packed codes holds before it is folded."""
    return max(TAIL_MIN, pack_size // 8)


def read_state(conn: apsw.Connection) -> CellState | None:
    """The cells' state, or ``None`` when there are none."""
    return cell_sql.to_state(statements.row(conn, cell_sql.READ_STATE))


def fit_of(state: CellState) -> CodeFit | None:
    """The code fit the state records (``None``: damaged)."""
    return CodeFit.from_row(state.dim, state.fitted, state.sqrt_factor, state.fit)


def fit_of_checked(state: CellState) -> CodeFit:
    """The fit of a state :func:`usable` accepted."""
    fit = fit_of(state)
    assert fit is not None  # usable() checked it
    return fit


def usable(conn: apsw.Connection, state: CellState | None, dim: int | None) -> bool:
    """True if ``state``'s cells are for ``dim`` and every change after their position is
    still in the log (a reader can cover the rest exactly)."""
    return (
        state is not None
        and state.dim == dim
        and fit_of(state) is not None
        and position_kept(conn, state.seq, state.seq_id)
    )


def stored_dim(conn: apsw.Connection) -> int | None:
    found = value(conn, meta_sql.read(EMBEDDING_DIM_KEY))
    return None if found is None else int(found)


def sync(conn: apsw.Connection, *, rebuild: bool = False, train: bool = True) -> int | None:
    """:func:`_sync`; damaged cells (:class:`~persistence.sqlite.cell_packs.DamagedPack`)
    are dropped in the same transaction and trained again where :func:`_sync` may
    (else ``maintain()`` does), so a damaged pack blocks no write."""
    try:
        return _sync(conn, rebuild=rebuild, train=train)
    except cell_packs.DamagedPack as exc:
        log.warning("the vector cells are damaged (%s): dropped, to be trained again", exc)
        run_all(conn, cell_sql.DROP_ALL)
        return _sync(conn, rebuild=rebuild, train=train)


def _sync(conn: apsw.Connection, *, rebuild: bool, train: bool) -> int | None:
    """Bring the cells to the change log's head in the caller's write transaction; the
    number of codes written, or ``None`` when the file is too large to train here (then
    ``maintain()`` must). Without ``rebuild`` only bounded work is done (at most
    :data:`INCREMENTAL_MAX` changes; training only up to :data:`FIRST_TRAIN_MAX`
    vectors, and not at all without ``train``); with it the cells are trained (again)
    when they must be, and every tail is folded. Cells in step cost two reads."""
    state = read_state(conn)
    head_seq, head_id = vector_reads.change_head(conn)
    if state is not None and not rebuild and (state.seq, state.seq_id) == (head_seq, head_id):
        return 0  # in step (a log replaced since could only hold another id at head)
    dim = stored_dim(conn)
    if dim is None or dim < EXACT_BELOW:
        if state is not None:
            run_all(conn, cell_sql.DROP_ALL)
        return 0
    if rebuild and state is not None and fit_of(state) is not None:
        # maintain() keeps no damaged pack or centroid (raises: dropped and trained again)
        if len(centroids_of(conn, state.dim)) != state.cells:
            raise cell_packs.DamagedPack(f"the vector cells count {state.cells} centroids")
        damaged = statements.row(conn, cell_sql.damaged_pack(fit_of_checked(state).code_bytes))
        if damaged is not None:
            cell, size, width, ids, codes = damaged
            raise cell_packs.DamagedPack(
                f"cell {cell}'s pack holds {ids} id bytes and {codes} code bytes "
                f"for {size} codes of {width} bytes"
            )
    if state is not None and usable(conn, state, dim):
        grown = state.members >= 4 * state.trained_on or oversized(state)
        small = state.members <= FIRST_TRAIN_MAX
        if not (grown and (rebuild or (small and train))):
            written = 0
            if state.seq != head_seq:
                changed = vector_reads.changed_since(conn, state.seq)
                if len(changed) > INCREMENTAL_MAX and not rebuild:
                    return None
                written, members = _apply(conn, state, changed)
                run(conn, cell_sql.move_to(head_seq, head_id, members))
            if rebuild:
                cell_packs.fold_all(conn, fit_of_checked(state))
            return written
    if not (train or rebuild):
        return None
    embedded = _embedded(conn, None if rebuild else FIRST_TRAIN_MAX + 1)
    if embedded > FIRST_TRAIN_MAX and not rebuild:
        return None
    if embedded < TRAIN_MIN:
        if state is not None:
            run_all(conn, cell_sql.DROP_ALL)
        return 0
    return train_cells(conn, dim, embedded, head_seq, head_id)


def sync_alone(conn: apsw.Connection) -> int:
    """:func:`sync` with ``rebuild=True`` in a transaction of its own on ``conn``."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        written = sync(conn, rebuild=True) or 0
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return written


def _embedded(conn: apsw.Connection, at_most: int | None) -> int:
    """Embedded memories (counted no further than about ``at_most``)."""
    unembedded = int(value(conn, index_sql.unembedded_count()) or 0)
    bound = None if at_most is None else at_most + unembedded
    return vector_reads.memory_count(conn, at_most=bound) - unembedded


def centroids_of(conn: apsw.Connection, dim: int) -> np.ndarray:
    """Every centroid as float32, in cell order ``[cells, dim]``; :class:`DamagedPack`
    when one is not ``dim`` floats."""
    chunks = list(_centroid_chunks(conn, dim))
    return np.concatenate(chunks) if chunks else np.zeros((0, dim), dtype=np.float32)


def _centroid_chunks(conn: apsw.Connection, dim: int) -> Iterator[np.ndarray]:
    """The centroids in cell order, ``_CENTROID_ROWS`` float32 rows at a time (a reader
    builds its compact copy without holding the float32 one); :class:`DamagedPack` when
    one is not ``dim`` floats."""
    blobs: list[bytes] = []
    for _, centroid in statements.stream(conn, cell_sql.CENTROIDS):
        blobs.append(bytes(centroid))
        if len(blobs[-1]) != 4 * dim:
            raise cell_packs.DamagedPack(f"a centroid of the vector cells is not {dim} floats")
        if len(blobs) == _CENTROID_ROWS:
            yield np.frombuffer(b"".join(blobs), dtype="<f4").reshape(-1, dim)
            blobs = []
    if blobs:
        yield np.frombuffer(b"".join(blobs), dtype="<f4").reshape(-1, dim)


CACHE_BYTES = 32 << 20
"""Centroids a process keeps for the files it searches: a few files' alternate searches
read each one's once, while a 10M file's 22 MiB stays the only copy held."""
_cached: OrderedDict[str, tuple[int, Centroids]] = OrderedDict()
"""File -> (generation, centroids) of the latest generation read, least recent first:
one generation a file (a split makes a new one; the old copy is garbage)."""
_cache_lock = threading.Lock()


def forget_cached_centroids() -> None:
    """Drop every cached copy (tests)."""
    with _cache_lock:
        _cached.clear()


def cached_centroids(conn: apsw.Connection, state: CellState) -> Centroids:
    """The centroids in the compact form RAM keeps them (:class:`Centroids`: int16, half
    of float32's bytes), read once per generation of the cells (a generation is random,
    so centroids of a rolled-back training are never taken for those of another); the
    latest generation of each file searched is kept, up to :data:`CACHE_BYTES` in all
    (a process searching a few files does not read them again at every search), the
    file's older copy and the least recent files' dropped before a new one is read (peak
    RSS)."""
    key = conn.filename
    with _cache_lock:
        found = _cached.get(key)
        if found is not None and found[0] == state.generation:
            _cached.move_to_end(key)
            return found[1]
        _cached.pop(key, None)
        held = int(value(conn, cell_sql.CENTROID_COUNT) or 0)  # not state.cells (damaged)
        size = held * (2 * state.dim + 4)
        while _cached and sum(c.nbytes for _, c in _cached.values()) + size > CACHE_BYTES:
            _cached.popitem(last=False)
        centroids = Centroids.read(_centroid_chunks(conn, state.dim), held, state.dim)
        _cached[key] = (state.generation, centroids)
        return centroids


def embedded_stream(conn: apsw.Connection, dim: int) -> Iterable[tuple[str, Tier, bytes]]:
    for tier in Tier:
        for memory_id, blob in vector_reads.embedded_rows(conn, tier):
            if len(blob) == 4 * dim:
                yield memory_id, tier, blob


def train_cells(conn: apsw.Connection, dim: int, total: int, seq: int, seq_id: str | None) -> int:
    """Train the cells again from every vector; the number of codes written. A sample
    gives the fit and the coarse centroids, every code joins its coarse cell and the
    tails are folded; then (:mod:`persistence.sqlite.cell_train`) each coarse cell's
    vectors, read back by id, are bisected into leaves of at most ``CELL_SIZE``, and
    every vector joins the nearest leaf in a second pass, each leaf's centroid the mean
    of its members. Memory: the sample, one coarse cell's floats, a chunk of vectors."""
    run_all(conn, cell_sql.DROP_ALL)
    coarse_count = coarse_cells_for(total)
    wanted = max(SAMPLE_PER_CELL * coarse_count, CAL_ROWS)
    every = max(total // wanted, 1)
    kept = [blob for n, (_, _, blob) in enumerate(embedded_stream(conn, dim)) if n % every == 0]
    sample = normalised(kept, dim)
    coarse_count = min(coarse_count, len(sample))
    fit = CodeFit.of(sample[:FIT_ROWS]).calibrated(sample[:CAL_ROWS])
    coarse = kmeans(sample, coarse_count)
    del kept, sample
    centroids, written = _join_all(conn, fit, coarse, lambda v: nearest_cells(v, coarse))
    cell_packs.fold_all(conn, fit)
    leaves = _leaves(conn, fit, coarse) if coarse_count > 1 else None  # one: all scanned
    if leaves is not None and len(leaves) > coarse_count:  # bisected: every vector again
        run_all(conn, cell_sql.DROP_ALL)
        centroids = leaves.centroids
        for _ in range(cell_train.LLOYD_ROUNDS - 1):  # rounds that only move the centroids
            centroids = _recentred(conn, fit, centroids)
        centroids, written = _join_all(conn, fit, centroids, cell_train.Leaves(centroids).nearest)
        cell_packs.fold_all(conn, fit)
    cells = len(centroids)
    run_batch(conn, cell_sql.put_centroids([(c, centroids[c].tobytes()) for c in range(cells)]))
    generation = secrets.randbits(62)
    state = CellState(dim, fit.fitted, fit.sqrt_factor, fit.to_blob(), cells, written, written,
                      generation, seq, seq_id)  # fmt: skip
    run(conn, cell_sql.write_state(state))
    log.info("vector cells trained: %d codes in %d cells", written, cells)
    return written


def _leaves(conn: apsw.Connection, fit: CodeFit, coarse: np.ndarray) -> cell_train.Leaves:
    """Each coarse cell (as its pack holds it) bisected into leaves of at most
    ``CELL_SIZE`` of its vectors, read back by id: at most ``LEAF_READ`` of them, evenly
    spread, bisected into leaves as much smaller (one bounded read at a time)."""
    leaves_of: list[list[np.ndarray]] = []
    for cell in range(len(coarse)):
        keys, _, _ = cell_packs.pack_rows(conn, cell)
        ids = [bytes(k)[:-1].decode() for k in keys.tolist()]
        if len(ids) <= cell_train.CELL_SIZE:
            leaves_of.append([coarse[cell]])
            continue
        read = ids[:: -(-len(ids) // cell_train.LEAF_READ)]
        vectors = cell_split.vectors_of(conn, read, fit.dim)
        if vectors is None:
            leaves_of.append([coarse[cell]])
            continue
        bound = max(1, cell_train.CELL_SIZE * len(read) // len(ids))
        leaves_of.append(cell_train.bisect(vectors, bound, seed=cell))
    return cell_train.Leaves.of(leaves_of)


def _recentred(conn: apsw.Connection, fit: CodeFit, centroids: np.ndarray) -> np.ndarray:
    """One Lloyd round that writes nothing: each centroid moved to the mean of the vectors
    nearest it (an empty cell's kept)."""
    sums = np.zeros_like(centroids)
    batch: list[bytes] = []
    for _, _, blob in embedded_stream(conn, fit.dim):
        batch.append(blob)
        if len(batch) == _CHUNK:
            vectors = normalised(batch, fit.dim)
            sums += cell_sums(vectors, nearest_cells(vectors, centroids), len(sums))
            batch = []
    if batch:
        vectors = normalised(batch, fit.dim)
        sums += cell_sums(vectors, nearest_cells(vectors, centroids), len(sums))
    return _means(centroids, sums)


def _join_all(
    conn: apsw.Connection, fit: CodeFit, centroids: np.ndarray,
    assign: Callable[[np.ndarray], np.ndarray],
) -> tuple[np.ndarray, int]:  # fmt: skip
    """Every vector's code into the tail of the cell ``assign`` picks for it, a chunk at a
    time; the centroids (each cell's the mean of its members; an empty cell's as given)
    and the number of codes written."""
    sums = np.zeros_like(centroids)
    written = 0
    batch: list[tuple[str, Tier, bytes]] = []
    for found in embedded_stream(conn, dim=fit.dim):
        batch.append(found)
        if len(batch) == _CHUNK:
            written += _join(conn, fit, batch, assign, sums)
            batch = []
    written += _join(conn, fit, batch, assign, sums)
    return _means(centroids, sums), written


def _means(centroids: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """Each cell's centroid the normalised sum of its members (an empty cell's kept)."""
    norms = np.linalg.norm(sums, axis=1)
    out = centroids.copy()
    out[norms > 0] = sums[norms > 0] / norms[norms > 0, None]
    return out.astype(np.float32)


def _join(
    conn: apsw.Connection, fit: CodeFit, found: list[tuple[str, Tier, bytes]],
    assign: Callable[[np.ndarray], np.ndarray], sums: np.ndarray | None = None,
) -> int:  # fmt: skip
    """Codes of ``found`` vectors into the tails of the cells ``assign`` picks (their
    vectors added to ``sums``, if given); how many joined."""
    return len(_joined(conn, fit, found, assign, sums))


def _joined(
    conn: apsw.Connection, fit: CodeFit, found: list[tuple[str, Tier, bytes]],
    assign: Callable[[np.ndarray], np.ndarray], sums: np.ndarray | None = None,
) -> list[int]:  # fmt: skip
    """:func:`_join`; the cell of each joined vector."""
    found = [row for row in found if len(row[2]) == 4 * fit.dim]
    if not found:
        return []
    vectors = normalised([blob for _, _, blob in found], fit.dim)
    cells = assign(vectors)
    if sums is not None:
        sums += cell_sums(vectors, cells, len(sums))
    bits, low = fit.encode(vectors)
    codes = code_blobs([tier for _, tier, _ in found], bits, low)
    joined = [(int(c), i, code) for (i, _, _), c, code in zip(found, cells, codes, strict=True)]
    for batch in cell_sql.join(joined):
        run_batch(conn, batch)
    return [int(c) for c in cells]


def _apply(conn: apsw.Connection, state: CellState, changed: list[str]) -> tuple[int, int]:
    """Take in the current vectors of ``changed`` memories (gone ones leave their cells);
    the codes written and how many the cells hold after."""
    fit = fit_of_checked(state)
    centroids = cached_centroids(conn, state)
    members = state.members
    written = 0
    touched: set[int] = set()
    for start in range(0, len(changed), _CHUNK):
        chunk = changed[start : start + _CHUNK]
        members -= _leave(conn, chunk)
        found = vector_reads.embeddings_of(conn, chunk)
        joined = _joined(conn, fit, found, lambda v: nearest_cells(v, centroids))
        written += len(joined)
        members += len(joined)
        touched.update(joined)
    for cell in sorted(touched):
        size = int(value(conn, cell_sql.pack_size(cell)) or 0)
        if int(value(conn, cell_sql.tail_count(cell)) or 0) > tail_bound(size):
            cell_packs.fold(conn, fit, cell)
    if members >= CELLS_FROM:  # an over-full cell splits (a file grown by writes)
        cell_split.split_full(conn, replace(state, members=members), fit, sorted(touched))
    return written, members


def _leave(conn: apsw.Connection, memory_ids: list[str]) -> int:
    """``memory_ids`` leave the cells holding them: their tail rows go, and each pack that
    held one is written again without it; how many left."""
    held = [
        (int(cell), str(memory_id))
        for memory_id, cell in rows(conn, cell_sql.members_of(memory_ids))
    ]
    if not held:
        return 0
    in_tail = {
        (cell, memory_id)
        for cell, memory_id in held
        if statements.row(conn, cell_sql.in_tail(cell, memory_id)) is not None
    }
    for batch in cell_sql.leave(held):
        run_batch(conn, batch)
    packed: dict[int, set[str]] = {}
    for cell, memory_id in held:
        if (cell, memory_id) not in in_tail:
            packed.setdefault(cell, set()).add(memory_id)
    for cell, gone in packed.items():
        cell_packs.rewrite_pack(conn, cell, gone)
    return len(held)

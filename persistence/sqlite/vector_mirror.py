"""An in-RAM copy of the vector index as 3-bit codes, scanned with numpy.

Vectors of fewer than ``EXACT_BELOW`` dimensions are kept as normalised floats instead
and scanned exactly (their codes say too little).

Why: sqlite-vec 0.1.9's KNN cost grows with ``k`` (bit KNN over 100k rows here: 4 ms at
k=10, 89 ms at k=400), and fusion wants a few hundred candidates.

Each normalised vector is centred on the per-dimension mean and quantised per dimension
to 3 bits (8 steps of ``STEP`` standard deviations; the code math is in
:mod:`persistence.sqlite.vector_codes`): the top bit is the sign of the
centred component, kept as a column-major bit matrix; the low two bits sit row-major
beside it. A search runs in two stages: (1) every vector is scored by the float query
against its sign bits (asymmetric: the query keeps 4 bits of precision per dimension,
weighted by what a sign bit is worth in that dimension; a popcount per query bit plane),
and the best ``first_stage_depth`` survive, a depth measured on the file when the copy
is fitted (``CodeFit.calibrated``); (2) those are scored on their full 3-bit codes and
the best ``count`` go to the caller, which re-ranks them exactly from the float vectors
in the file. Plain sign bits compared by Hamming distance (the previous design) found
0.64 of the true 10 nearest among 256 candidates on random 384-d vectors at 10k, and
almost none for vectors whose components are all positive; centring fixes the latter,
the float query and the second stage the former (recall@10 >= 0.95 on both at 100k,
see benchmarks/test_vector_recall_bench.py).

The centre and scales are fitted on the first ``FIT_ROWS`` vectors met while loading;
a copy fitted on fewer reloads (and refits) once the file holds four times as many.
Files keep their codes and fit (:mod:`persistence.sqlite.code_sync`): a copy loads those
(0.5 s -> well under 0.1 s at 100k memories here) and encodes only what changed since.

RAM per memory: the codes (144 bytes at 384-d), the id as fixed-width bytes in a numpy
array (33 bytes for the default 32-character ids) and one tier byte; no Python object
per memory. Ids are found by binary search: slots up to ``_sorted`` are kept in id order
(sorted at load and when compacting), later ones sit in a small dict until the next
compaction.

The file stays the source of truth. The copy loads on first use (the stored codes, or
every vector from the tier tables),
then catches up from ``vector_changes`` (written by triggers in the same transactions as
the embeddings) before every search, so commits of other processes are seen too. When
the log no longer reaches back to where the copy stands (trimmed, or the file was
replaced), the copy reloads. Codes only choose candidates: the caller re-ranks them by
exact cosine on the float vectors read from the file.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from itertools import islice

import apsw
import numpy as np

from persistence.records import Tier
from persistence.sqlite import code_sync, vector_reads
from persistence.sqlite.sql import meta_sql, vector_codes_sql
from persistence.sqlite.sql.meta_sql import EMBEDDING_DIM_KEY
from persistence.sqlite.vector_codes import (
    CAL_ROWS,
    EXACT_BELOW,
    FIRST_STAGE_SQRT,
    FIT_ROWS,
    ID_END,
    TIER_BYTE,
    CodeFit,
    first_stage_depth,
    sign_bits,
    split_codes,
    split_packed_codes,
    two_stages,
    words_for,
)
from persistence.statements import rows, stream, value

_TIERS = tuple(Tier)
_CODE = TIER_BYTE  # a slot's tier byte, as stored codes keep it
assert [_CODE[t] for t in _TIERS] == list(range(len(_TIERS)))  # _TIERS[byte] is its tier
_DEAD = 255
_CHUNK = 4_096
RESORT_AFTER = 65_536
"""The default ``resort_after``: ids appended since the last sort; more, and the copy
re-sorts (compacts) at its next catch-up."""
_END = ID_END  # ends every stored id, so numpy keeps trailing NULs (and ids sort as in SQL)
_MOVE_BLOCK = 65_536  # slots copied at once when the arrays are resized or compacted

log = logging.getLogger("tiered_memory")

__all__ = ["EXACT_BELOW", "RESORT_AFTER", "VectorMirror", "first_stage_depth", "sign_bits"]


class VectorMirror:
    """3-bit codes of every embedded memory, kept in step with one file. Thread-safe.

    ``resort_after``: ids appended since the last sort that make the next catch-up
    re-sort (see :data:`RESORT_AFTER`)."""

    def __init__(self, resort_after: int = RESORT_AFTER) -> None:
        self.resort_after = resort_after
        self._lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        self._loaded = False
        self._dim: int | None = None
        self._words = 0
        self._ids = np.zeros(0, dtype="S1")
        self._used = 0
        self._sorted = 0
        self._recent: dict[bytes, int] = {}
        self._live = 0
        self._tier = np.zeros(0, dtype=np.uint8)
        self._bits = np.zeros((0, 0), dtype=np.uint64)
        self._low = np.zeros((0, 0), dtype=np.uint8)
        self._fit: CodeFit | None = None
        self._sqrt_factor = FIRST_STAGE_SQRT
        self._sample_every = 0  # while loading: keep every n-th vector to calibrate on
        self._sample = np.zeros((0, 0), dtype=np.float32)  # the kept vectors, in one array
        self._sampled = 0
        self._floats = np.zeros((0, 0), dtype=np.float32)
        self._exact = False
        self._dead = 0
        self._seq = 0
        self._seq_id: str | None = None

    def reset(self) -> None:
        """Forget everything; the next search reloads from the file."""
        with self._lock:
            self._clear()

    @property
    def size(self) -> int:
        """How many live vectors the copy holds."""
        return self._live

    @property
    def nbytes(self) -> int:
        """RAM held by the copy's used slots. Room reserved past them is never written
        until used, so the OS gives it no memory; the dict of recent ids is not counted."""
        per_slot = self._words * 8 + self._low.shape[1] + self._ids.itemsize + 1
        if self._exact:
            per_slot += self._floats.shape[1] * 4
        return per_slot * self._used

    def candidates(
        self, conn: apsw.Connection, query: np.ndarray, count: int, tier: Tier | None
    ) -> list[tuple[str, Tier]]:
        """``(id, tier)`` of the ``count`` memories nearest to ``query`` (by their codes,
        or exactly for small dimensions).

        ``conn`` must be inside a read transaction, so catching up and the caller's
        re-rank see the same snapshot.
        """
        with self._lock:
            self._catch_up(conn)
            return self._nearest(query, count, tier)

    def candidates_in_write(
        self, conn: apsw.Connection, query: np.ndarray, count: int, tier: Tier | None
    ) -> tuple[list[tuple[str, Tier]], list[tuple[str, Tier]]] | None:
        """Like :meth:`candidates` for ``conn`` inside a write transaction, without moving
        the copy onto rows that may never commit: the nearest from the copy as it stands,
        and apart every memory whose vector changed since (the caller re-ranks them all
        exactly). ``None`` when that is more than a few thousand memories or the copy
        must reload; then use :meth:`candidates` and :meth:`reset` after a rollback.
        """
        with self._lock:
            dim_text = value(conn, meta_sql.read(EMBEDDING_DIM_KEY))
            dim = None if dim_text is None else int(dim_text)
            _, changed = self._changes(conn, dim)
            if changed is None or len(changed) > _CHUNK:
                return None
            found = self._nearest(query, count, tier)  # re-rank reads the current vectors
        if not changed:
            return found, []
        chosen = tuple(Tier) if tier is None else (tier,)
        return found, [(i, t) for i, t, _ in vector_reads.embeddings_of(conn, changed, chosen)]

    def _nearest(self, query: np.ndarray, count: int, tier: Tier | None) -> list[tuple[str, Tier]]:
        n = self._used
        if not self._live or self._dim != len(query):
            return []
        tiers = self._tier[:n]
        excluded = tiers == _DEAD if tier is None else tiers != _CODE[tier]
        take = min(count, n - int(np.count_nonzero(excluded)))
        if take <= 0:
            return []
        if self._exact:
            nearest = self._nearest_exact(query, n, excluded, take)
        else:
            nearest = self._nearest_codes(query, n, excluded, take)
        return [
            (bytes(self._ids[i])[:-1].decode(), _TIERS[self._tier[i]]) for i in nearest.tolist()
        ]

    def _nearest_codes(
        self, query: np.ndarray, n: int, excluded: np.ndarray, take: int
    ) -> np.ndarray:
        """The ``take`` best slots by :func:`~persistence.sqlite.vector_codes.two_stages`,
        best first (every eligible one too: a filtered search keeps the first that pass)."""
        assert self._fit is not None  # codes exist only with a fit
        return two_stages(self._fit, self._bits[:, :n], self._low[:n], query, excluded, take)

    def _nearest_exact(
        self, query: np.ndarray, n: int, excluded: np.ndarray, take: int
    ) -> np.ndarray:
        similarity = self._floats[:n] @ (query / max(float(np.linalg.norm(query)), 1e-12))
        similarity[excluded] = -np.inf
        nearest = np.argpartition(-similarity, take - 1)[:take]
        return nearest[np.argsort(-similarity[nearest], kind="stable")]

    # --- keeping in step ---------------------------------------------------------------

    def _changes(
        self, conn: apsw.Connection, dim: int | None
    ) -> tuple[tuple[int, str | None], list[str] | None]:
        """The log's head, and the ids whose vectors changed since the copy's position
        (``None``: the copy cannot catch up and must reload)."""
        head = head_seq, head_id = vector_reads.change_head(conn)
        if not self._loaded or dim != self._dim or head_seq < self._seq:
            return head, None
        if head_seq == self._seq:
            return head, ([] if head_id == self._seq_id else None)
        trimmed = vector_reads.change_floor(conn) > self._seq + 1
        if trimmed or (self._seq and vector_reads.change_at(conn, self._seq) != self._seq_id):
            return head, None  # log trimmed past us, or file replaced
        return head, vector_reads.changed_since(conn, self._seq)

    def _catch_up(self, conn: apsw.Connection) -> None:
        dim_text = value(conn, meta_sql.read(EMBEDDING_DIM_KEY))
        dim = None if dim_text is None else int(dim_text)
        (head_seq, head_id), changed = self._changes(conn, dim)
        fitted = self._fit.fitted if self._fit is not None else 0
        refit = not self._exact and fitted < FIT_ROWS and self._live >= 4 * max(fitted, 1)
        if changed is None or len(changed) > max(self._live // 4, _CHUNK) or refit:
            self._load(conn, dim, head_seq, head_id)
            return
        self._apply(conn, changed)
        self._seq, self._seq_id = head_seq, head_id
        if len(self._recent) > self.resort_after or (
            self._dead >= 1_024 and self._dead * 2 >= self._used
        ):
            self._compact()

    def _apply(self, conn: apsw.Connection, changed: list[str]) -> None:
        """Take in the current vectors of ``changed`` memories (gone ones leave)."""
        for start in range(0, len(changed), _CHUNK):
            chunk = changed[start : start + _CHUNK]
            for memory_id in chunk:
                self._remove(memory_id)
            self._add(vector_reads.embeddings_of(conn, chunk))

    def _load(self, conn: apsw.Connection, dim: int | None, seq: int, seq_id: str | None) -> None:
        """Load the copy: from the codes the file keeps (:mod:`persistence.sqlite.code_sync`)
        plus what changed since they were written, else by encoding every vector."""
        if self._load_codes(conn, dim):
            changed = self._changes(conn, dim)[1]
            if changed is not None and len(changed) <= max(self._live // 4, _CHUNK):
                self._apply(conn, changed)
                self._seq, self._seq_id = seq, seq_id
                return
        self._load_vectors(conn, dim, seq, seq_id)

    def _load_codes(self, conn: apsw.Connection, dim: int | None) -> bool:
        """Load the stored codes if the file has usable ones (a fit for ``dim`` whose log
        position is still in the change log); the copy then stands at that position."""
        if dim is None or dim < EXACT_BELOW:
            return False
        stored = code_sync.stored_fit(conn, dim)
        if stored is None:
            return False
        fit, seq, seq_id = stored
        self._clear()
        self._dim, self._words, self._fit = dim, fit.words, fit
        self._sqrt_factor = fit.sqrt_factor
        self._bits = np.zeros((self._words, 0), dtype=np.uint64)
        self._low = np.zeros((0, self._words * 16), dtype=np.uint8)
        self._reserve(vector_reads.memory_count(conn), 1, exact=True)  # (every memory: enough)
        packed = self._load_packs(conn, fit)
        if packed is None:
            self._take_rows(stream(conn, vector_codes_sql.keyed_rows(_END)), fit.code_bytes)
        else:
            seq, seq_id = packed
        self._compact(ordered=True)
        self._seq, self._seq_id = seq, seq_id
        self._loaded = True
        return True

    def _load_packs(self, conn: apsw.Connection, fit: CodeFit) -> tuple[int, str | None] | None:
        """Take in the packed codes (migration v017), and the code rows of any pack that
        is gone; the log position the copy then stands at. ``None`` (nothing taken) if
        there are no usable packs, or they stand more than a few thousand changes behind
        the log (the code rows are nearer then)."""
        heads = vector_codes_sql.to_pack_heads(rows(conn, vector_codes_sql.PACK_HEADS))
        if not heads:
            return None
        _, chunks, _, _, _, seq, seq_id, _, _ = heads[0]
        width = fit.code_bytes
        if any(
            (h[1], h[5], h[6]) != (chunks, seq, seq_id)
            or h[7] % h[4]
            or h[8] != width * (h[7] // h[4])
            for h in heads
        ):
            return None  # not one consistent set for this fit: damaged
        if not code_sync.position_kept(conn, seq, seq_id):
            return None
        if vector_reads.change_head(conn)[0] - seq > _CHUNK:
            return None
        present = {h[0]: h for h in heads}
        for chunk, ids, codes in stream(conn, vector_codes_sql.PACK_BLOBS):
            keys = np.frombuffer(ids, dtype=f"S{present[chunk][4]}")
            self._take(keys, split_packed_codes(codes, len(keys), self._words))
        chunk = 0
        while chunk < chunks:  # each run of gone packs: its ids' code rows
            if chunk in present:
                chunk += 1
                continue
            after = present[chunk - 1][3] if chunk else None
            while chunk < chunks and chunk not in present:
                chunk += 1
            before = present[chunk][2] if chunk < chunks else None
            between = vector_codes_sql.keyed_rows_between(_END, after, before)
            self._take_rows(stream(conn, between), width)
        return seq, seq_id

    def _take_rows(self, rows: Iterable[tuple[bytes, bytes]], width: int) -> None:
        """Append stored ``(key, code)`` rows; codes not ``width`` bytes (not this fit's)
        are left out."""
        rows = iter(rows)
        while batch := list(islice(rows, _CHUNK)):
            if {len(code) for _, code in batch} != {width}:
                batch = [row for row in batch if len(row[1]) == width]
                if not batch:
                    continue
            keys, codes = zip(*batch, strict=True)
            self._take(np.array(keys), split_codes(list(codes), self._words))

    def _take(self, keys: np.ndarray, split: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        """Append slots for ``keys`` (fixed-width ids with the end byte) and their codes,
        as :func:`split_codes` returns them."""
        start, end = self._used, self._used + len(keys)
        self._reserve(end, keys.itemsize)
        tiers, self._bits[:, start:end], self._low[start:end] = split
        self._tier[start:end] = np.where(tiers < len(_TIERS), tiers, _DEAD)
        self._ids[start:end] = keys
        self._used = end
        self._live += len(keys)

    def _load_vectors(
        self, conn: apsw.Connection, dim: int | None, seq: int, seq_id: str | None
    ) -> None:
        """Load the copy by encoding every vector of the file (fitting on the first
        ``FIT_ROWS``, calibrating on a sample)."""
        self._clear()
        self._dim = dim
        self._exact = dim is not None and dim < EXACT_BELOW
        self._words = 0 if dim is None or self._exact else words_for(dim)
        self._bits = np.zeros((self._words, 0), dtype=np.uint64)
        self._low = np.zeros((0, self._words * 16), dtype=np.uint8)
        self._floats = np.zeros((0, dim if self._exact and dim else 0), dtype=np.float32)
        if dim is not None:
            total = vector_reads.memory_count(conn)
            self._reserve(total, 1, exact=True)  # no regrowth while loading
            self._sample_every = 0 if self._exact else max(total // CAL_ROWS, 1)
            if self._sample_every:  # one array, not one small array per kept vector
                self._sample = np.empty((total // self._sample_every + 1, dim), dtype=np.float32)
            waiting: list[tuple[str, Tier, bytes]] = []  # until there are enough to fit on
            for tier in Tier:
                rows_of_tier = vector_reads.embedded_rows(conn, tier)
                while rows := list(islice(rows_of_tier, _CHUNK)):
                    batch = [(memory_id, tier, blob) for memory_id, blob in rows]
                    if self._fit is not None or self._exact:
                        self._add(batch, loading=True)
                        continue
                    waiting += batch
                    if len(waiting) >= FIT_ROWS:
                        self._add(waiting, loading=True)
                        waiting = []
            self._add(waiting, loading=True)
            self._sample_every = 0
            self._compact()
            if self._fit is not None:
                self._fit = self._fit.calibrated(self._sample[: self._sampled])
                self._sqrt_factor = self._fit.sqrt_factor
                log.debug("vector copy calibrated: first stage %.1f * sqrt(size)",
                          self._sqrt_factor)  # fmt: skip
            self._sample = np.zeros((0, 0), dtype=np.float32)  # not a view: frees the array
            self._sampled = 0
        self._seq, self._seq_id = seq, seq_id
        self._loaded = True

    def _add(self, rows: Iterable[tuple[str, Tier, bytes]], *, loading: bool = False) -> None:
        """Append ``rows``. While ``loading``, slots are not entered in the recent dict:
        the load ends by sorting every slot (a dict of a million ids held ~130 MB)."""
        batch = [row for row in rows if len(row[2]) == 4 * (self._dim or 0)]
        if not batch:
            return
        vectors = np.frombuffer(b"".join(blob for _, _, blob in batch), dtype="<f4")
        vectors = vectors.reshape(len(batch), -1)
        keys = [memory_id.encode() + _END for memory_id, _, _ in batch]
        start = self._used
        self._reserve(start + len(batch), max(map(len, keys)))
        end = start + len(batch)
        norms = np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        if self._exact:
            self._floats[start:end] = vectors / norms
        else:
            if self._fit is None:
                self._fit = CodeFit.of(vectors / norms)
            self._bits[:, start:end], self._low[start:end] = self._fit.encode(vectors / norms)
            if self._sample_every:
                kept = np.flatnonzero(np.arange(start, end) % self._sample_every == 0)
                kept = kept[: len(self._sample) - self._sampled]
                self._sample[self._sampled : self._sampled + len(kept)] = (
                    vectors[kept] / norms[kept]
                )
                self._sampled += len(kept)
        self._ids[start:end] = keys
        self._tier[start:end] = [_CODE[tier] for _, tier, _ in batch]
        if not loading:
            self._recent.update(zip(keys, range(start, end), strict=True))
        self._used = end
        self._live += len(batch)

    def _remove(self, memory_id: str) -> None:
        key = memory_id.encode() + _END
        slot = self._recent.pop(key, None)
        if slot is None:
            at = int(np.searchsorted(self._ids[: self._sorted], key))
            if at == self._sorted or self._ids[at] != key:
                return
            slot = at
        if self._tier[slot] != _DEAD:
            self._tier[slot] = _DEAD
            self._live -= 1
            self._dead += 1

    def _reserve(self, size: int, width: int, *, exact: bool = False) -> None:
        """Room for ``size`` slots of ids ``width`` bytes wide. Capacity grows by half
        (``exact``: to ``size``); the room past the used slots is zeroed lazily by the OS
        and costs no RAM until written."""
        capacity = self._tier.shape[0]
        if width > self._ids.itemsize:
            self._ids = self._ids.astype(f"S{width}")
        if size <= capacity:
            return
        self._resize(size if exact else max(size, capacity + capacity // 2, 1_024))

    def _resize(self, capacity: int, order: np.ndarray | None = None) -> None:
        """Arrays of ``capacity`` slots holding the used ones (or the slots ``order``
        names, in that order). One array at a time, moved in blocks: besides the arrays,
        only one new array and one block are ever held."""
        count = self._used if order is None else len(order)

        def moved(old: np.ndarray, new: np.ndarray, axis: int = 0) -> np.ndarray:
            for start in range(0, count, _MOVE_BLOCK):
                stop = min(start + _MOVE_BLOCK, count)
                source = slice(start, stop) if order is None else order[start:stop]
                if axis:
                    new[:, start:stop] = old[:, source]
                else:
                    new[start:stop] = old[source]
            return new

        self._bits = moved(self._bits, np.zeros((self._words, capacity), np.uint64), axis=1)
        self._low = moved(self._low, np.zeros((capacity, self._low.shape[1]), np.uint8))
        self._ids = moved(self._ids, np.zeros(capacity, dtype=self._ids.dtype))
        self._tier = moved(self._tier, np.full(capacity, _DEAD, dtype=np.uint8))
        if self._exact:
            floats = np.zeros((capacity, self._floats.shape[1]), np.float32)
            self._floats = moved(self._floats, floats)

    def _compact(self, *, ordered: bool = False) -> None:
        """Drop dead slots and sort all live ones by id (emptying the recent dict), with
        room to grow by an eighth before the next copy. ``ordered``: the slots may
        already be in id order (as stored codes come); then, if they are, nothing moves."""
        used = self._used
        live = np.flatnonzero(self._tier[:used] != _DEAD)
        if (
            ordered
            and len(live) == used
            and bool(np.all(self._ids[1:used] >= self._ids[: used - 1]))
        ):
            self._sorted = self._live = used
            self._recent = {}
            self._dead = 0
            return
        live = live[np.argsort(self._ids[live], kind="stable")]
        self._resize(len(live) + len(live) // 8 + 1_024, order=live)
        self._used = self._sorted = self._live = len(live)
        self._recent = {}
        self._dead = 0

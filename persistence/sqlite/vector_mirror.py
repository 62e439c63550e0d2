"""An in-RAM copy of the vector index as 3-bit codes, scanned with numpy.

Vectors of fewer than ``EXACT_BELOW`` dimensions are kept as normalised floats instead
and scanned exactly (their codes say too little).

Why: sqlite-vec 0.1.9's KNN cost grows with ``k`` (bit KNN over 100k rows here: 4 ms at
k=10, 89 ms at k=400), and fusion wants a few hundred candidates.

Each normalised vector is centred on the per-dimension mean and quantised per dimension
to 3 bits (8 steps of ``_STEP`` standard deviations): the top bit is the sign of the
centred component, kept as a column-major bit matrix; the low two bits sit row-major
beside it. A search runs in two stages: (1) every vector is scored by the float query
against its sign bits (asymmetric: the query keeps 4 bits of precision per dimension,
weighted by what a sign bit is worth in that dimension; a popcount per query bit plane),
and the best ``first_stage_depth`` survive, a depth measured on the file when the copy
loads (``VectorMirror._calibrate``); (2) those are scored on their full 3-bit codes and
the best ``count`` go to the caller, which re-ranks them exactly from the float vectors
in the file. Plain sign bits compared by Hamming distance (the previous design) found
0.64 of the true 10 nearest among 256 candidates on random 384-d vectors at 10k, and
almost none for vectors whose components are all positive; centring fixes the latter,
the float query and the second stage the former (recall@10 >= 0.95 on both at 100k,
see benchmarks/test_vector_recall_bench.py).

The centre and scales are fitted on the first ``_FIT_ROWS`` vectors met while loading;
a copy fitted on fewer reloads (and refits) once the file holds four times as many.

RAM per memory: the codes (144 bytes at 384-d), the id as fixed-width bytes in a numpy
array (33 bytes for the default 32-character ids) and one tier byte; no Python object
per memory. Ids are found by binary search: slots up to ``_sorted`` are kept in id order
(sorted at load and when compacting), later ones sit in a small dict until the next
compaction.

The file stays the source of truth. The copy loads from the tier tables on first use,
then catches up from ``vector_changes`` (written by triggers in the same transactions as
the embeddings) before every search, so commits of other processes are seen too. When
the log no longer reaches back to where the copy stands (trimmed, or the file was
replaced), the copy reloads. Codes only choose candidates: the caller re-ranks them by
exact cosine on the float vectors read from the file.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable
from itertools import islice

import apsw
import numpy as np

from persistence.records import Tier
from persistence.sqlite.sql import index_sql
from persistence.sqlite.sql.meta_sql import EMBEDDING_DIM_KEY, read_meta

_TIERS = tuple(Tier)
_CODE = {tier: code for code, tier in enumerate(_TIERS)}
_DEAD = 255
_CHUNK = 4_096
RESORT_AFTER = 65_536
"""The default ``resort_after``: ids appended since the last sort; more, and the copy
re-sorts (compacts) at its next catch-up."""
_END = b"\xff"  # ends every stored id (never in UTF-8), so numpy keeps trailing NULs
EXACT_BELOW = 128  # fewer dimensions: codes say too little; keep (normalised) floats
_FIT_ROWS = 4_096  # vectors the centre and scales are fitted on
_STEP = 0.586  # quantisation step in standard deviations (optimal uniform 3-bit, Gaussian)
_QUERY_BITS = 4  # precision of the query in the first stage
_BLOCK = 1_024  # candidates scored at once in the second stage (temporaries stay in cache)
_MOVE_BLOCK = 65_536  # slots copied at once when the arrays are resized or compacted
FIRST_STAGE_FACTOR = 4
FIRST_STAGE_SQRT = 20.0
"""The first stage keeps ``FIRST_STAGE_FACTOR`` times the number asked for, at least
``sqrt_factor * sqrt(size)``: the true neighbours' scores stand out from the rest by a
margin that grows with the copy (extreme values), so the share needed shrinks. The
factor is measured when the copy loads (see ``VectorMirror._calibrate``), clamped to
``[CALIBRATED_MIN, CALIBRATED_MAX]``; ``FIRST_STAGE_SQRT`` until then."""
CALIBRATED_MIN = 10.0
CALIBRATED_MAX = 80.0
_CAL_ROWS = 8_192  # vectors kept aside while loading to calibrate on
_CAL_QUERIES = 32
_CAL_MIN_ROWS = 1_024  # fewer: keep the default factor
_CAL_SAFETY = 2.0  # the depth found to hold 9 in 10 sample queries' top 10, doubled
_CAL_K = 10

log = logging.getLogger("tiered_memory")


def first_stage_depth(count: int, size: int, sqrt_factor: float = FIRST_STAGE_SQRT) -> int:
    """How many vectors the first stage keeps when ``count`` are asked of ``size``."""
    return max(count * FIRST_STAGE_FACTOR, int(sqrt_factor * math.sqrt(size)))


def pack_words(mask: np.ndarray, words: int) -> np.ndarray:
    """``[n, dim]`` booleans -> ``[words, n]`` uint64, bit i of a vector at bit i % 64 of
    word i // 64 (least significant bit first), padded with zeros."""
    packed = np.packbits(mask, axis=1, bitorder="little")
    padded = np.zeros((len(mask), words * 8), dtype=np.uint8)
    padded[:, : packed.shape[1]] = packed
    return np.ascontiguousarray(padded.view("<u8").T)


def sign_bits(vectors: np.ndarray, words: int) -> np.ndarray:
    """``[n, dim]`` floats -> ``[words, n]`` uint64: bit i set where component i > 0.

    Same bit order as sqlite-vec's ``vec_quantize_binary`` (least significant bit first).
    """
    return pack_words(vectors > 0, words)


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
        self._centre = np.zeros(0, dtype=np.float32)
        self._spread = np.zeros(0, dtype=np.float32)
        self._step = np.zeros(0, dtype=np.float32)
        self._fitted = 0
        self._sqrt_factor = FIRST_STAGE_SQRT
        self._sample_every = 0  # while loading: keep every n-th vector to calibrate on
        self._sample = np.zeros((0, 0), dtype=np.float32)  # the kept vectors, in one array
        self._sample_slots = np.zeros(0, dtype=np.int64)
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
    ) -> list[tuple[str, Tier]] | None:
        """Like :meth:`candidates` for ``conn`` inside a write transaction, without moving
        the copy onto rows that may never commit: the nearest from the copy as it stands,
        plus every memory whose vector changed since (the caller re-ranks them all
        exactly). ``None`` when that is more than a few thousand memories or the copy
        must reload; then use :meth:`candidates` and :meth:`reset` after a rollback.
        """
        with self._lock:
            dim_text = read_meta(conn, EMBEDDING_DIM_KEY)
            dim = None if dim_text is None else int(dim_text)
            _, changed = self._changes(conn, dim)
            if changed is None or len(changed) > _CHUNK:
                return None
            found = self._nearest(query, count, tier)  # re-rank reads the current vectors
        if not changed:
            return found
        chosen = tuple(Tier) if tier is None else (tier,)
        return found + [(i, t) for i, t, _ in index_sql.embeddings_of(conn, changed, chosen)]

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
        eligible = n - int(np.count_nonzero(excluded))
        if take >= eligible:
            return np.flatnonzero(~excluded)  # the caller re-ranks them all anyway
        padded = np.zeros(self._words * 64, dtype=np.float32)
        padded[: len(query)] = query
        depth = first_stage_depth(take, self._live, self._sqrt_factor)
        if depth < eligible:
            score = self._first_stage(padded * self._spread, self._bits[:, :n])
            score[excluded] = -1
            chosen = np.argpartition(-score, depth - 1)[:depth]
        else:
            chosen = np.flatnonzero(~excluded)
        closeness = self._second_stage(padded * self._step, chosen)
        best = np.argpartition(-closeness, take - 1)[:take]
        best = best[np.argsort(-closeness[best], kind="stable")]
        return chosen[best]

    def _first_stage(self, weights: np.ndarray, bits: np.ndarray) -> np.ndarray:
        """Score of every slot: ``weights`` (the query scaled per dimension) dotted with
        each vector's signs, the weights rounded to ``_QUERY_BITS`` bits. A sign is +1 or
        -1, so ``w . s = sum(|w| where the sign agrees with w's) * 2 - sum(|w|)``; a sign
        bit (1: positive) agrees where it differs from w's "negative" bit: one popcount of
        (bits xor negative) and each bit plane of ``|w|`` per word."""
        negative = pack_words(weights[None, :] < 0, self._words)[:, 0]
        magnitude = np.abs(weights)
        top = float(magnitude.max())
        n = bits.shape[1]
        levels = (1 << _QUERY_BITS) - 1
        rounded = np.rint(magnitude * (levels / top) if top > 0 else magnitude).astype(np.uint8)
        planes = pack_words((rounded[None, :] >> np.arange(_QUERY_BITS)[:, None]) & 1 > 0,
                            self._words)  # fmt: skip
        counts = np.zeros((_QUERY_BITS, n), dtype=np.uint16)  # per plane of |w|
        agree = np.empty(n, dtype=np.uint64)
        scratch = np.empty(n, dtype=np.uint64)
        ones = np.empty(n, dtype=np.uint8)
        for word in range(self._words):
            np.bitwise_xor(bits[word], negative[word], out=agree)  # 1: they agree
            for plane in range(_QUERY_BITS):
                np.bitwise_and(agree, planes[word, plane], out=scratch)
                np.bitwise_count(scratch, out=ones)
                np.add(counts[plane], ones, out=counts[plane])
        score: np.ndarray = counts[0].astype(np.int32)
        for plane in range(1, _QUERY_BITS):
            score += counts[plane].astype(np.int32) << plane
        return score

    def _second_stage(self, weights: np.ndarray, chosen: np.ndarray) -> np.ndarray:
        """``weights`` (the query scaled by each dimension's step) dotted with the 3-bit
        code of each ``chosen`` slot: the reconstruction up to terms equal for all."""
        closeness = np.empty(len(chosen), dtype=np.float32)
        signs = 4 * weights
        quarters = [np.ascontiguousarray(weights[part::4]) for part in range(4)]
        for start in range(0, len(chosen), _BLOCK):
            slots = chosen[start : start + _BLOCK]
            top = np.ascontiguousarray(self._bits[:, slots].T).view(np.uint8)
            part = np.unpackbits(top, axis=1, bitorder="little").astype(np.float32) @ signs
            low = self._low[slots]
            for shift, weight in enumerate(quarters):
                part += ((low >> (2 * shift)) & 3).astype(np.float32) @ weight
            closeness[start : start + _BLOCK] = part
        return closeness

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
        head = head_seq, head_id = index_sql.change_head(conn)
        if not self._loaded or dim != self._dim or head_seq < self._seq:
            return head, None
        if head_seq == self._seq:
            return head, ([] if head_id == self._seq_id else None)
        trimmed = index_sql.change_floor(conn) > self._seq + 1
        if trimmed or (self._seq and index_sql.change_at(conn, self._seq) != self._seq_id):
            return head, None  # log trimmed past us, or file replaced
        return head, index_sql.changed_since(conn, self._seq)

    def _catch_up(self, conn: apsw.Connection) -> None:
        dim_text = read_meta(conn, EMBEDDING_DIM_KEY)
        dim = None if dim_text is None else int(dim_text)
        (head_seq, head_id), changed = self._changes(conn, dim)
        refit = (
            not self._exact and self._fitted < _FIT_ROWS and self._live >= 4 * max(self._fitted, 1)
        )
        if changed is None or len(changed) > max(self._live // 4, _CHUNK) or refit:
            self._load(conn, dim, head_seq, head_id)
            return
        if not changed:
            return
        for start in range(0, len(changed), _CHUNK):
            chunk = changed[start : start + _CHUNK]
            for memory_id in chunk:
                self._remove(memory_id)
            self._add(index_sql.embeddings_of(conn, chunk))
        self._seq, self._seq_id = head_seq, head_id
        if len(self._recent) > self.resort_after or (
            self._dead >= 1_024 and self._dead * 2 >= self._used
        ):
            self._compact()

    def _load(self, conn: apsw.Connection, dim: int | None, seq: int, seq_id: str | None) -> None:
        self._clear()
        self._dim = dim
        self._exact = dim is not None and dim < EXACT_BELOW
        self._words = 0 if dim is None or self._exact else (dim + 63) // 64
        self._bits = np.zeros((self._words, 0), dtype=np.uint64)
        self._low = np.zeros((0, self._words * 16), dtype=np.uint8)
        self._floats = np.zeros((0, dim if self._exact and dim else 0), dtype=np.float32)
        if dim is not None:
            total = index_sql.memory_count(conn)
            self._reserve(total, 1, exact=True)  # no regrowth while loading
            self._sample_every = 0 if self._exact else max(total // _CAL_ROWS, 1)
            if self._sample_every:  # one array, not one small array per kept vector
                room = total // self._sample_every + 1
                self._sample = np.empty((room, dim), dtype=np.float32)
                self._sample_slots = np.empty(room, dtype=np.int64)
            waiting: list[tuple[str, Tier, bytes]] = []  # until there are enough to fit on
            for tier in Tier:
                rows_of_tier = index_sql.embedded_rows(conn, tier)
                while rows := list(islice(rows_of_tier, _CHUNK)):
                    batch = [(memory_id, tier, blob) for memory_id, blob in rows]
                    if self._fitted or self._exact:
                        self._add(batch, loading=True)
                        continue
                    waiting += batch
                    if len(waiting) >= _FIT_ROWS:
                        self._add(waiting, loading=True)
                        waiting = []
            self._add(waiting, loading=True)
            self._sample_every = 0
            moved = self._compact()
            if self._sampled:
                new_slot = np.empty(len(moved) and int(moved.max()) + 1, dtype=np.int64)
                new_slot[moved] = np.arange(len(moved))
                slots = new_slot[self._sample_slots[: self._sampled]]
                self._calibrate(self._sample[: self._sampled], slots)
            self._sample = np.zeros((0, 0), dtype=np.float32)  # not a view: frees the array
            self._sample_slots = np.zeros(0, dtype=np.int64)
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
            self._bits[:, start:end], self._low[start:end] = self._encode(vectors / norms)
            if self._sample_every:
                kept = np.flatnonzero(np.arange(start, end) % self._sample_every == 0)
                kept = kept[: len(self._sample) - self._sampled]
                at = slice(self._sampled, self._sampled + len(kept))
                self._sample[at] = vectors[kept] / norms[kept]
                self._sample_slots[at] = start + kept
                self._sampled += len(kept)
        self._ids[start:end] = keys
        self._tier[start:end] = [_CODE[tier] for _, tier, _ in batch]
        if not loading:
            self._recent.update(zip(keys, range(start, end), strict=True))
        self._used = end
        self._live += len(batch)

    def _fit(self, vectors: np.ndarray) -> None:
        """Centre and scales from these (normalised) vectors, for all codes until reload."""
        padded = np.zeros((len(vectors), self._words * 64), dtype=np.float32)
        padded[:, : vectors.shape[1]] = vectors
        self._centre = padded.mean(axis=0)
        centred = padded - self._centre
        above = centred >= 0  # the sign bit; its two halves' means differ when skewed
        high = (centred * above).sum(axis=0) / np.maximum(above.sum(axis=0), 1)
        low = (centred * ~above).sum(axis=0) / np.maximum((~above).sum(axis=0), 1)
        self._spread = (high - low).astype(np.float32)  # what a sign bit is worth
        deviation = centred.std(axis=0)
        floor = max(float(deviation.max()), 1e-6) * 1e-3  # a constant dimension: any step
        self._step = (_STEP * np.maximum(deviation, floor)).astype(np.float32)
        self._fitted = len(vectors)

    def _encode(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Normalised ``[n, dim]`` vectors -> their sign bits ``[words, n]`` (the top bit
        of each code) and the low two bits of each code, four dimensions to a byte."""
        if not self._fitted:
            self._fit(vectors)
        padded = np.zeros((len(vectors), self._words * 64), dtype=np.float32)
        padded[:, : vectors.shape[1]] = vectors
        codes = np.floor((padded - self._centre) / self._step) + 4
        codes = np.clip(codes, 0, 7).astype(np.uint8)
        low = (codes & 3).reshape(len(vectors), -1, 4)
        packed = low[:, :, 0] | (low[:, :, 1] << 2) | (low[:, :, 2] << 4) | (low[:, :, 3] << 6)
        return pack_words(codes >= 4, self._words), packed

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

    def _calibrate(self, vectors: np.ndarray, slots: np.ndarray) -> None:
        """Measure how deep the first stage must go on this file: queries near
        ``_CAL_QUERIES`` of the sample ``vectors`` (at ``slots``), the rank their exact
        10 nearest among the sample get from the first stage, scaled to the whole copy
        (``sqrt``, see ``FIRST_STAGE_SQRT``) and doubled."""
        if len(vectors) < _CAL_MIN_ROWS:
            return
        rng = np.random.default_rng(len(vectors))
        noise = rng.standard_normal((_CAL_QUERIES, vectors.shape[1])).astype(np.float32)
        noise *= 0.5 / np.linalg.norm(noise, axis=1, keepdims=True)
        queries = vectors[rng.choice(len(vectors), _CAL_QUERIES, replace=False)] + noise
        exact = vectors @ queries.T
        bits = np.ascontiguousarray(self._bits[:, slots])
        needed = []
        for column, query in enumerate(queries):
            padded = np.zeros(self._words * 64, dtype=np.float32)
            padded[: len(query)] = query
            score = self._first_stage(padded * self._spread, bits)
            truth = np.argpartition(-exact[:, column], _CAL_K - 1)[:_CAL_K]
            needed.append(max(int(np.count_nonzero(score >= score[t])) for t in truth))
        depth = float(np.quantile(needed, 0.9)) * _CAL_SAFETY
        factor = depth / math.sqrt(len(vectors))
        self._sqrt_factor = min(max(factor, CALIBRATED_MIN), CALIBRATED_MAX)
        log.debug("vector copy calibrated: first stage %.1f * sqrt(size)", self._sqrt_factor)

    def _compact(self) -> np.ndarray:
        """Drop dead slots and sort all live ones by id (emptying the recent dict), with
        room to grow by an eighth before the next copy; the old slot of each new one."""
        live = np.flatnonzero(self._tier[: self._used] != _DEAD)
        live = live[np.argsort(self._ids[live], kind="stable")]
        self._resize(len(live) + len(live) // 8 + 1_024, order=live)
        self._used = self._sorted = self._live = len(live)
        self._recent = {}
        self._dead = 0
        return live

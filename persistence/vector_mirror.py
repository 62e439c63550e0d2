"""An in-RAM copy of the vector index as sign bits, scanned with numpy.

Vectors of fewer than ``EXACT_BELOW`` dimensions are kept as normalised floats instead
and scanned exactly (their sign bits say too little).

Why: sqlite-vec 0.1.9's KNN cost grows with ``k`` (bit KNN over 100k rows here: 4 ms at
k=10, 89 ms at k=400), and fusion wants a few hundred candidates. A popcount scan over a
column-major bit matrix costs about 2 ms per 100k vectors whatever ``k`` is, and takes
48 bytes per 384-d vector (plus the id).

The file stays the source of truth. The copy loads from the tier tables on first use,
then catches up from ``vector_changes`` (written by triggers in the same transactions as
the embeddings) before every search, so commits of other processes are seen too. When
the log no longer reaches back to where the copy stands (trimmed, or the file was
replaced), the copy reloads. Bits only choose candidates: the caller re-ranks them by
exact cosine on the float vectors read from the file.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from itertools import islice

import apsw
import numpy as np

from persistence import index_sql
from persistence.meta_sql import EMBEDDING_DIM_KEY, read_meta
from persistence.records import Tier

_TIERS = tuple(Tier)
_CODE = {tier: code for code, tier in enumerate(_TIERS)}
_DEAD = 255
_FAR = np.iinfo(np.uint16).max
_CHUNK = 4_096
EXACT_BELOW = 128  # fewer dimensions: sign bits say too little; keep (normalised) floats


def sign_bits(vectors: np.ndarray, words: int) -> np.ndarray:
    """``[n, dim]`` floats -> ``[words, n]`` uint64: bit i set where component i > 0.

    Same bit order as sqlite-vec's ``vec_quantize_binary`` (least significant bit first).
    """
    packed = np.packbits(vectors > 0, axis=1, bitorder="little")
    padded = np.zeros((len(vectors), words * 8), dtype=np.uint8)
    padded[:, : packed.shape[1]] = packed
    return np.ascontiguousarray(padded.view("<u8").T)


class VectorMirror:
    """Sign bits of every embedded memory, kept in step with one file. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        self._loaded = False
        self._dim: int | None = None
        self._words = 0
        self._ids: list[str | None] = []
        self._slot: dict[str, int] = {}
        self._tier = np.zeros(0, dtype=np.uint8)
        self._bits = np.zeros((0, 0), dtype=np.uint64)
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
        return len(self._slot)

    def candidates(
        self, conn: apsw.Connection, query: np.ndarray, count: int, tier: Tier | None
    ) -> list[tuple[str, Tier]]:
        """``(id, tier)`` of the ``count`` memories nearest to ``query`` (by Hamming distance
        of sign bits, or exactly for small dimensions).

        ``conn`` must be inside a read transaction, so catching up and the caller's
        re-rank see the same snapshot.
        """
        with self._lock:
            self._catch_up(conn)
            n = len(self._ids)
            if not self._slot or self._dim != len(query):
                return []
            tiers = self._tier[:n]
            excluded = tiers == _DEAD if tier is None else tiers != _CODE[tier]
            take = min(count, n - int(np.count_nonzero(excluded)))
            if take <= 0:
                return []
            if self._exact:
                nearest = self._nearest_exact(query, n, excluded, take)
            else:
                nearest = self._nearest_bits(query, n, excluded, take)
            found = [(self._ids[i], _TIERS[self._tier[i]]) for i in nearest.tolist()]
            return [(memory_id, tier) for memory_id, tier in found if memory_id is not None]

    def _nearest_bits(
        self, query: np.ndarray, n: int, excluded: np.ndarray, take: int
    ) -> np.ndarray:
        wanted = sign_bits(query[None, :], self._words)[:, 0]
        distance = np.zeros(n, dtype=np.uint16)
        scratch = np.empty(n, dtype=np.uint64)
        for word in range(self._words):
            np.bitwise_xor(self._bits[word, :n], wanted[word], out=scratch)
            distance += np.bitwise_count(scratch)
        distance[excluded] = _FAR
        # Distances are small integers: a histogram finds the cut-off in one pass.
        cutoff = int(np.searchsorted(np.cumsum(np.bincount(distance)), take))
        nearest = np.flatnonzero(distance <= cutoff)
        return nearest[np.argsort(distance[nearest], kind="stable")][:take]

    def _nearest_exact(
        self, query: np.ndarray, n: int, excluded: np.ndarray, take: int
    ) -> np.ndarray:
        similarity = self._floats[:n] @ (query / max(float(np.linalg.norm(query)), 1e-12))
        similarity[excluded] = -np.inf
        nearest = np.argpartition(-similarity, take - 1)[:take]
        return nearest[np.argsort(-similarity[nearest], kind="stable")]

    # --- keeping in step ---------------------------------------------------------------

    def _catch_up(self, conn: apsw.Connection) -> None:
        dim_text = read_meta(conn, EMBEDDING_DIM_KEY)
        dim = None if dim_text is None else int(dim_text)
        head_seq, head_id = index_sql.change_head(conn)
        if not self._loaded or dim != self._dim or head_seq < self._seq:
            self._load(conn, dim, head_seq, head_id)
            return
        if head_seq == self._seq:
            if head_id != self._seq_id:
                self._load(conn, dim, head_seq, head_id)
            return
        trimmed = index_sql.change_floor(conn) > self._seq + 1
        if trimmed or (self._seq and index_sql.change_at(conn, self._seq) != self._seq_id):
            self._load(conn, dim, head_seq, head_id)  # log trimmed past us, or file replaced
            return
        changed = index_sql.changed_since(conn, self._seq)
        if len(changed) > max(len(self._slot) // 4, _CHUNK):
            self._load(conn, dim, head_seq, head_id)
            return
        for start in range(0, len(changed), _CHUNK):
            chunk = changed[start : start + _CHUNK]
            for memory_id in chunk:
                self._remove(memory_id)
            self._add(index_sql.embeddings_of(conn, chunk))
        self._seq, self._seq_id = head_seq, head_id
        self._compact_if_sparse()

    def _load(self, conn: apsw.Connection, dim: int | None, seq: int, seq_id: str | None) -> None:
        self._clear()
        self._dim = dim
        self._exact = dim is not None and dim < EXACT_BELOW
        self._words = 0 if dim is None or self._exact else (dim + 63) // 64
        self._bits = np.zeros((self._words, 0), dtype=np.uint64)
        self._floats = np.zeros((0, dim if self._exact and dim else 0), dtype=np.float32)
        if dim is not None:
            for tier in Tier:
                rows_of_tier = index_sql.embedded_rows(conn, tier)
                while rows := list(islice(rows_of_tier, _CHUNK)):
                    self._add((memory_id, tier, blob) for memory_id, blob in rows)
        self._seq, self._seq_id = seq, seq_id
        self._loaded = True

    def _add(self, rows: Iterable[tuple[str, Tier, bytes]]) -> None:
        batch = [row for row in rows if len(row[2]) == 4 * (self._dim or 0)]
        if not batch:
            return
        vectors = np.frombuffer(b"".join(blob for _, _, blob in batch), dtype="<f4")
        vectors = vectors.reshape(len(batch), -1)
        start = len(self._ids)
        self._reserve(start + len(batch))
        if self._exact:
            norms = np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
            self._floats[start : start + len(batch)] = vectors / norms
        else:
            self._bits[:, start : start + len(batch)] = sign_bits(vectors, self._words)
        for offset, (memory_id, tier, _) in enumerate(batch):
            self._tier[start + offset] = _CODE[tier]
            self._slot[memory_id] = start + offset
            self._ids.append(memory_id)

    def _remove(self, memory_id: str) -> None:
        slot = self._slot.pop(memory_id, None)
        if slot is not None:
            self._tier[slot] = _DEAD
            self._ids[slot] = None
            self._dead += 1

    def _reserve(self, size: int) -> None:
        capacity = self._tier.shape[0]
        if size <= capacity:
            return
        capacity = max(size, capacity * 2, 1_024)
        bits = np.zeros((self._words, capacity), dtype=np.uint64)
        bits[:, : len(self._ids)] = self._bits[:, : len(self._ids)]
        tiers = np.full(capacity, _DEAD, dtype=np.uint8)
        tiers[: len(self._ids)] = self._tier[: len(self._ids)]
        floats = np.zeros((capacity if self._exact else 0, self._floats.shape[1]), np.float32)
        floats[: len(self._ids) if self._exact else 0] = self._floats[: len(self._ids)]
        self._bits, self._tier, self._floats = bits, tiers, floats

    def _compact_if_sparse(self) -> None:
        if self._dead < 1_024 or self._dead * 2 < len(self._ids):
            return
        live = np.flatnonzero(self._tier[: len(self._ids)] != _DEAD)
        self._bits = np.ascontiguousarray(self._bits[:, live])
        if self._exact:
            self._floats = self._floats[live]
        self._tier = self._tier[live]
        self._ids = [self._ids[i] for i in live.tolist()]
        self._slot = {memory_id: i for i, memory_id in enumerate(self._ids)}  # type: ignore[misc]
        self._dead = 0

"""3-bit codes of normalised vectors: the fit they are made with, encoding and scoring.

A :class:`CodeFit` centres each dimension on its mean and quantises it to 3 bits (8 steps
of ``STEP`` standard deviations, fitted on ``FIT_ROWS`` vectors). The top bit of a code is
the sign of the centred component; the low two bits sit beside it, four dimensions to a
byte. The in-RAM vector copy (:mod:`persistence.sqlite.vector_mirror`) scans them, and
:mod:`persistence.sqlite.code_sync` keeps them in the file so a new process loads codes
instead of encoding every float vector again.

A code in the file is one byte for the memory's tier (:data:`TIER_BYTE`), then
``words * 8`` bytes of sign bits (little-endian uint64 words,
dimension ``i`` at bit ``i % 64`` of word ``i // 64``) then ``words * 16`` bytes of low
bits: 145 bytes at 384 dimensions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from persistence.records import Tier

TIER_BYTE = {Tier.SCRATCHPAD: 0, Tier.EPISODIC: 1, Tier.SEMANTIC: 2}
"""A code's first byte: its memory's tier (kept in files: never renumber)."""
FIT_ROWS = 4_096  # vectors a fit is made from
EXACT_BELOW = 128  # fewer dimensions: codes say too little (vectors are scanned exactly)
STEP = 0.586  # quantisation step in standard deviations (optimal uniform 3-bit, Gaussian)
QUERY_BITS = 4  # precision of the query in the first stage
FIRST_STAGE_FACTOR = 4
FIRST_STAGE_SQRT = 20.0
"""The first stage keeps ``FIRST_STAGE_FACTOR`` times the number asked for, at least
``sqrt_factor * sqrt(size)``: the true neighbours' scores stand out from the rest by a
margin that grows with the copy (extreme values), so the share needed shrinks. The
factor is measured on the file (:func:`calibrate`), clamped to
``[CALIBRATED_MIN, CALIBRATED_MAX]``; ``FIRST_STAGE_SQRT`` until then."""
CALIBRATED_MIN = 10.0
CALIBRATED_MAX = 80.0
CAL_ROWS = 8_192  # vectors kept aside to calibrate on
_CAL_QUERIES = 32
_CAL_MIN_ROWS = 1_024  # fewer: keep the default factor
_CAL_SAFETY = 2.0  # the depth found to hold 9 in 10 sample queries' top 10, doubled
_CAL_K = 10


def words_for(dim: int) -> int:
    """64-bit words per vector of ``dim`` dimensions."""
    return (dim + 63) // 64


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


_BLOCK = 1_024  # candidates scored at once in the second stage (temporaries stay in cache)


def second_stage(
    bits: np.ndarray, low: np.ndarray, weights: np.ndarray, chosen: np.ndarray
) -> np.ndarray:
    """``weights`` (the query scaled by each dimension's step) dotted with the 3-bit code
    of each ``chosen`` column of sign ``bits`` ``[words, n]`` and row of ``low`` bits:
    the reconstruction up to terms equal for all."""
    closeness = np.empty(len(chosen), dtype=np.float32)
    signs = 4 * weights
    quarters = [np.ascontiguousarray(weights[part::4]) for part in range(4)]
    for start in range(0, len(chosen), _BLOCK):
        slots = chosen[start : start + _BLOCK]
        top = np.ascontiguousarray(bits[:, slots].T).view(np.uint8)
        part = np.unpackbits(top, axis=1, bitorder="little").astype(np.float32) @ signs
        part_low = low[slots]
        for shift, weight in enumerate(quarters):
            part += ((part_low >> (2 * shift)) & 3).astype(np.float32) @ weight
        closeness[start : start + _BLOCK] = part
    return closeness


def two_stages(
    fit: CodeFit, bits: np.ndarray, low: np.ndarray, query: np.ndarray,
    excluded: np.ndarray, take: int,
) -> np.ndarray:  # fmt: skip
    """The columns of the ``take`` codes nearest ``query`` by their two stages (the first
    over sign bits keeps :func:`first_stage_depth`, the second orders those on their full
    codes), best first; ``excluded`` columns never. All eligible ones if ``take`` reaches
    them, in the same order (a filtered search keeps the first that pass)."""
    eligible = np.flatnonzero(~excluded)
    first, second = fit.query_weights(query)
    if take >= len(eligible):
        closeness = second_stage(bits, low, second, eligible)
        ordered: np.ndarray = eligible[np.argsort(-closeness, kind="stable")]
        return ordered
    depth = first_stage_depth(take, bits.shape[1], fit.sqrt_factor)
    if depth < len(eligible):
        score = fit.first_stage(first, bits)
        score[excluded] = -1
        chosen = np.argpartition(-score, depth - 1)[:depth]
    else:
        chosen = eligible
    closeness = second_stage(bits, low, second, chosen)
    best = np.argpartition(-closeness, take - 1)[:take]
    best = best[np.argsort(-closeness[best], kind="stable")]
    result: np.ndarray = chosen[best]
    return result


def _padded(vectors: np.ndarray, words: int) -> np.ndarray:
    out = np.zeros((len(vectors), words * 64), dtype=np.float32)
    out[:, : vectors.shape[1]] = vectors
    return out


@dataclass(frozen=True, slots=True)
class CodeFit:
    """What codes are made with: per-dimension centre and step, and what a sign bit is
    worth per dimension (``spread``); ``fitted`` vectors went into it; ``sqrt_factor``
    is the first stage's calibrated depth (see :data:`FIRST_STAGE_SQRT`)."""

    dim: int
    centre: np.ndarray
    spread: np.ndarray
    step: np.ndarray
    fitted: int
    sqrt_factor: float = FIRST_STAGE_SQRT

    @property
    def words(self) -> int:
        return words_for(self.dim)

    @property
    def code_bytes(self) -> int:
        """Bytes of one stored code (with its tier byte)."""
        return 1 + self.words * 24

    @classmethod
    def of(cls, vectors: np.ndarray) -> CodeFit:
        """The fit of these normalised ``[n, dim]`` vectors."""
        dim = vectors.shape[1]
        padded = _padded(vectors, words_for(dim))
        centre = padded.mean(axis=0)
        centred = padded - centre
        above = centred >= 0  # the sign bit; its two halves' means differ when skewed
        high = (centred * above).sum(axis=0) / np.maximum(above.sum(axis=0), 1)
        low = (centred * ~above).sum(axis=0) / np.maximum((~above).sum(axis=0), 1)
        deviation = centred.std(axis=0)
        floor = max(float(deviation.max()), 1e-6) * 1e-3  # a constant dimension: any step
        step = (STEP * np.maximum(deviation, floor)).astype(np.float32)
        return cls(dim, centre.astype(np.float32), (high - low).astype(np.float32), step,
                   len(vectors))  # fmt: skip

    def with_factor(self, sqrt_factor: float) -> CodeFit:
        return CodeFit(self.dim, self.centre, self.spread, self.step, self.fitted, sqrt_factor)

    def encode(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Normalised ``[n, dim]`` vectors -> their sign bits ``[words, n]`` (the top bit
        of each code) and the low two bits of each code ``[n, words * 16]``."""
        codes = np.floor((_padded(vectors, self.words) - self.centre) / self.step) + 4
        codes = np.clip(codes, 0, 7).astype(np.uint8)
        low = (codes & 3).reshape(len(vectors), -1, 4)
        packed = low[:, :, 0] | (low[:, :, 1] << 2) | (low[:, :, 2] << 4) | (low[:, :, 3] << 6)
        return pack_words(codes >= 4, self.words), packed

    def first_stage(self, weights: np.ndarray, bits: np.ndarray) -> np.ndarray:
        """Score of every column of ``bits``: ``weights`` (the query scaled per
        dimension) dotted with each vector's signs, the weights rounded to ``QUERY_BITS``
        bits. A sign is +1 or -1, so ``w . s = sum(|w| where the sign agrees with w's) * 2
        - sum(|w|)``; a sign bit (1: positive) agrees where it differs from w's
        "negative" bit: one popcount of (bits xor negative) and each bit plane of ``|w|``
        per word."""
        words = self.words
        negative = pack_words(weights[None, :] < 0, words)[:, 0]
        magnitude = np.abs(weights)
        top = float(magnitude.max())
        n = bits.shape[1]
        levels = (1 << QUERY_BITS) - 1
        rounded = np.rint(magnitude * (levels / top) if top > 0 else magnitude).astype(np.uint8)
        planes = pack_words((rounded[None, :] >> np.arange(QUERY_BITS)[:, None]) & 1 > 0, words)
        counts = np.zeros((QUERY_BITS, n), dtype=np.uint16)  # per plane of |w|
        agree = np.empty(n, dtype=np.uint64)
        scratch = np.empty(n, dtype=np.uint64)
        ones = np.empty(n, dtype=np.uint8)
        for word in range(words):
            np.bitwise_xor(bits[word], negative[word], out=agree)  # 1: they agree
            for plane in range(QUERY_BITS):
                np.bitwise_and(agree, planes[word, plane], out=scratch)
                np.bitwise_count(scratch, out=ones)
                np.add(counts[plane], ones, out=counts[plane])
        score: np.ndarray = counts[0].astype(np.int32)
        for plane in range(1, QUERY_BITS):
            score += counts[plane].astype(np.int32) << plane
        return score

    def query_weights(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The query's weights for the first stage and for the second."""
        padded = np.zeros(self.words * 64, dtype=np.float32)
        padded[: len(query)] = query
        return padded * self.spread, padded * self.step

    def calibrated(self, vectors: np.ndarray) -> CodeFit:
        """This fit with its first stage's depth measured on a sample of normalised
        ``vectors``: queries near ``_CAL_QUERIES`` of them, the rank their exact 10
        nearest among the sample get from the first stage, scaled to the whole file
        (``sqrt``, see :data:`FIRST_STAGE_SQRT`) and doubled. Too small a sample: as is."""
        if len(vectors) < _CAL_MIN_ROWS:
            return self
        rng = np.random.default_rng(len(vectors))
        noise = rng.standard_normal((_CAL_QUERIES, vectors.shape[1])).astype(np.float32)
        noise *= 0.5 / np.linalg.norm(noise, axis=1, keepdims=True)
        queries = vectors[rng.choice(len(vectors), _CAL_QUERIES, replace=False)] + noise
        exact = vectors @ queries.T
        bits, _ = self.encode(vectors)
        needed = []
        for column, query in enumerate(queries):
            score = self.first_stage(self.query_weights(query)[0], bits)
            truth = np.argpartition(-exact[:, column], _CAL_K - 1)[:_CAL_K]
            needed.append(max(int(np.count_nonzero(score >= score[t])) for t in truth))
        depth = float(np.quantile(needed, 0.9)) * _CAL_SAFETY
        factor = depth / math.sqrt(len(vectors))
        return self.with_factor(min(max(factor, CALIBRATED_MIN), CALIBRATED_MAX))

    # --- in the file ---------------------------------------------------------------------

    def to_blob(self) -> bytes:
        """centre, spread and step as little-endian float32, one after another."""
        return b"".join(a.astype("<f4").tobytes() for a in (self.centre, self.spread, self.step))

    @classmethod
    def from_row(cls, dim: int, fitted: int, sqrt_factor: float, blob: bytes) -> CodeFit | None:
        """The fit stored as :meth:`to_blob`; ``None`` if the blob does not fit ``dim``."""
        width = words_for(dim) * 64
        if dim <= 0 or len(blob) != 3 * 4 * width:
            return None
        parts = np.frombuffer(blob, dtype="<f4").reshape(3, width).astype(np.float32)
        return cls(dim, parts[0], parts[1], parts[2], fitted, float(sqrt_factor))


ID_END = b"\x01"
"""Ends every id as the vector copy keys its slots (and as packs store them): numpy's
fixed-width bytes drop trailing NULs, and ids with the end byte sort as in SQL."""


def code_blobs(tiers: list[Tier], bits: np.ndarray, low: np.ndarray) -> list[bytes]:
    """Stored codes of memories of ``tiers`` with ``[words, n]`` sign bits and
    ``[n, words * 16]`` low bits."""
    tier = np.array([TIER_BYTE[t] for t in tiers], dtype=np.uint8)[:, None]
    signs = np.ascontiguousarray(bits.T).astype("<u8").view(np.uint8)
    return [row.tobytes() for row in np.concatenate([tier, signs, low], 1)]


def split_codes(blobs: list[bytes], words: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stored codes -> tier bytes ``[n]``, sign bits ``[words, n]`` and low bits
    ``[n, words * 16]``."""
    return split_packed_codes(b"".join(blobs), len(blobs), words)


def split_packed_codes(
    packed: bytes, count: int, words: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`split_codes` of ``count`` stored codes laid end to end in ``packed``."""
    return split_code_rows(np.frombuffer(packed, dtype=np.uint8).reshape(count, -1), words)


def split_code_rows(raw: np.ndarray, words: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`split_codes` of stored codes as the rows of a ``[n, 1 + words * 24]`` byte
    array (the tier bytes and low bits are views of it; the sign bits one copy)."""
    signs = np.ascontiguousarray(raw[:, 1 : 1 + words * 8]).view("<u8")
    bits = np.ascontiguousarray(signs.T).astype(np.uint64, copy=False)
    return raw[:, 0], bits, raw[:, 1 + words * 8 :]

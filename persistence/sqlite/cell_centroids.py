"""The cells' centroids as RAM keeps them (issue 46: RSS at 10M within 30 MiB of 1M's).

A search ranks every centroid and a write assigns its vectors to the nearest one, so a
process keeps them all: one per ~340 vectors, 384 floats each, 44 MiB of float32 at 10M.
:class:`Centroids` holds them as int16 with one float32 scale per centroid (its largest
component maps to 32,767): half the bytes, ranked about as fast (numpy widens int16 to
float32 quickly, :data:`WIDEN_ROWS` rows at a time into one buffer, and float32 BLAS
does the rest: +0.1 ms at 3,000 cells, faster than float32 at 30,000, where half the
bytes stay in cache); float16 took as many bytes and 5-80x float32's time (numpy's
float16 cast is much slower), int8 a quarter of them but moved the probed cells of 14-25% of
queries (``benchmarks/centroid_ranking.py``, ``docs/benchmarks/scale.md``). A component
is off by at most ``scale / 2``, so similarities of unit vectors move by about 1e-6:
the probed cells differ from float32's only where similarities tie that closely.

Training keeps float32 (its centroids change every round);
:func:`~persistence.sqlite.cell_kmeans.nearest_cells` assigns against either form.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

WIDEN_ROWS = 1_024
"""Centroids widened to float32 at a time (1.5 MiB at 384-d: in L2, allocated per call
so concurrent searches share nothing)."""
_TOP = 32_767


@dataclass(frozen=True, slots=True)
class Centroids:
    """Centroids ``[cells, dim]`` as int16 ``codes`` times a float32 ``scale`` per row."""

    codes: np.ndarray
    scales: np.ndarray

    @classmethod
    def of(cls, floats: np.ndarray) -> Centroids:
        """The compact form of float centroids ``[cells, dim]`` (a non-finite component,
        a damaged one's, is taken as 0)."""
        clean = np.nan_to_num(np.asarray(floats, dtype=np.float32), nan=0, posinf=0, neginf=0)
        largest = np.abs(clean).max(axis=1) if clean.size else np.zeros(len(clean), np.float32)
        # a subnormal largest component would round its scale down (or to 0): codes
        # past 32,767 wrap in int16, so the scale is at least float32's smallest normal
        tiny = np.finfo(np.float32).tiny
        scales = np.where(largest > 0, np.maximum(largest / _TOP, tiny), 1).astype(np.float32)
        codes = np.clip(np.rint(clean / scales[:, None]), -_TOP, _TOP).astype(np.int16)
        return cls(codes, scales)

    @classmethod
    def read(cls, chunks: Iterable[np.ndarray], cells: int, dim: int) -> Centroids:
        """The compact form of centroids read a float32 chunk at a time (about ``cells``
        of them): the float32 copy of them all is never held."""
        codes = np.empty((cells, dim), dtype=np.int16)
        scales = np.empty(cells, dtype=np.float32)
        extra: list[Centroids] = []  # more rows than the state counts (damaged)
        filled = 0
        for floats in chunks:
            part = cls.of(floats)
            room = max(0, min(len(part), cells - filled))
            codes[filled : filled + room] = part.codes[:room]
            scales[filled : filled + room] = part.scales[:room]
            filled += room
            if room < len(part):
                extra.append(cls(part.codes[room:], part.scales[room:]))
        if extra:
            return cls(
                np.concatenate([codes, *(e.codes for e in extra)]),
                np.concatenate([scales, *(e.scales for e in extra)]),
            )
        return cls(codes[:filled], scales[:filled])

    def __len__(self) -> int:
        return len(self.codes)

    @property
    def nbytes(self) -> int:
        """Bytes held: 2 a component and 4 a centroid (half of float32's, issue 46)."""
        return int(self.codes.nbytes + self.scales.nbytes)

    def floats(self) -> np.ndarray:
        """The centroids as float32 (tests, and the precision they claim)."""
        out: np.ndarray = self.codes.astype(np.float32) * self.scales[:, None]
        return out

    def similarities(self, vectors: np.ndarray) -> np.ndarray:
        """``vectors @ centroids.T`` in float32: ``[cells]`` for one vector ``[dim]``,
        ``[n, cells]`` for ``[n, dim]``; :data:`WIDEN_ROWS` centroids widened at a time."""
        vectors = np.asarray(vectors, dtype=np.float32)
        out = np.empty((*vectors.shape[:-1], len(self.codes)), dtype=np.float32)
        buffer = np.empty((min(WIDEN_ROWS, len(self.codes)), self.codes.shape[1]), np.float32)
        for start in range(0, len(self.codes), WIDEN_ROWS):
            wide = buffer[: min(WIDEN_ROWS, len(self.codes) - start)]
            np.copyto(wide, self.codes[start : start + len(wide)], casting="unsafe")
            out[..., start : start + len(wide)] = vectors @ wide.T
        out *= self.scales
        return out

"""Conversions between Python values and column values.

JSON columns are written by orjson as UTF-8 text; embeddings are little-endian float32
BLOBs. Every ``encode_*`` function raises a subclass of ``InvalidInputError`` on bad
input, so the store can validate before it opens a transaction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson

from persistence.errors import (
    EmbeddingDimensionError,
    InvalidEmbeddingError,
    InvalidInputError,
    InvalidTypeError,
)
from persistence.records import Embedding

_FLOAT32_LE = np.dtype("<f4")


def encode_json(value: Any, what: str) -> str:
    """Serialize ``value`` with orjson; non-finite floats are refused, not turned into null."""
    _refuse_non_finite(value, what)
    try:
        return orjson.dumps(value).decode()
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise InvalidTypeError(f"{what} must be JSON-serializable: {exc}") from exc


def decode_json(text: str | bytes) -> Any:
    """Parse a JSON column written by :func:`encode_json`."""
    return orjson.loads(text)


def _refuse_non_finite(value: Any, what: str) -> None:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(f"{what} contains {value!r}, which JSON cannot hold")
    elif isinstance(value, Mapping):
        for item in value.values():
            _refuse_non_finite(item, what)
    elif isinstance(value, list | tuple):
        for item in value:
            _refuse_non_finite(item, what)


def encode_embedding(vector: Any, expected_dim: int | None) -> bytes:
    """Validate a 1-D finite vector and return it as float32 bytes."""
    try:
        array = np.asarray(vector, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise InvalidEmbeddingError(f"embedding must be a sequence of numbers: {exc}") from exc
    if array.ndim != 1 or array.size == 0:
        raise InvalidEmbeddingError(
            f"embedding must be a non-empty 1-D vector, got shape {array.shape}"
        )
    if not np.all(np.isfinite(array)):
        raise InvalidEmbeddingError("embedding contains NaN or infinity")
    if expected_dim is not None and array.size != expected_dim:
        raise EmbeddingDimensionError(array.size, expected_dim)
    return array.astype(_FLOAT32_LE, copy=False).tobytes()


def decode_embedding(blob: bytes | None) -> Embedding | None:
    """A read-only float32 vector from a BLOB column (``None`` stays ``None``)."""
    if blob is None:
        return None
    array = np.frombuffer(blob, dtype=_FLOAT32_LE).astype(np.float32, copy=False)
    array.setflags(write=False)
    return array

"""Conversions between Python values and column values.

JSON columns are written by orjson as UTF-8 text; embeddings are little-endian float32
BLOBs. Every ``encode_*`` function raises a subclass of ``InvalidInputError`` on bad
input, so the store can validate before it opens a transaction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
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


_MAX_DEPTH = 64


def encode_json(value: Any, what: str) -> str:
    """Serialize plain JSON data with orjson.

    Only dicts with str keys, lists, tuples, str, int (64-bit), finite float, bool and
    None are accepted: anything else (dates, sets, objects, NaN, cycles) would not read
    back as it was written, so it is refused rather than converted.
    """
    _check_plain_json(value, what, 0)
    try:
        return orjson.dumps(value).decode()
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise InvalidTypeError(f"{what} must be JSON-serializable: {exc}") from exc


def decode_json(text: str | bytes) -> Any:
    """Parse a JSON column written by :func:`encode_json`."""
    return orjson.loads(text)


def _check_plain_json(value: Any, what: str, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise InvalidInputError(f"{what} is nested over {_MAX_DEPTH} deep (or contains itself)")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        _require_utf8(value, what)
    elif isinstance(value, int):
        if not -(2**63) <= value < 2**64:
            raise InvalidInputError(f"{what} holds an integer JSON cannot keep: {value}")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(f"{what} contains {value!r}, which JSON cannot hold")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidTypeError(f"{what} has a non-str key {key!r}")
            _require_utf8(key, what)
            _check_plain_json(item, what, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_plain_json(item, what, depth + 1)
    else:
        raise InvalidTypeError(
            f"{what} holds a {type(value).__name__}; use plain JSON values "
            "(dict, list, str, int, float, bool, None)"
        )


def _require_utf8(text: str, what: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(f"{what} holds text that is not valid Unicode") from None


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


def require_embedding(vector: Any) -> None:
    """Refuse what is not a finite 1-D vector of numbers (text that NumPy would parse
    as a number, ``["3"]``, and booleans included) before anything is computed from it."""
    if isinstance(vector, str | bytes) or not isinstance(vector, Sequence | np.ndarray):
        raise InvalidEmbeddingError(
            f"embedding must be a sequence of numbers, got {type(vector).__name__}"
        )
    try:
        array = vector if isinstance(vector, np.ndarray) else np.asarray(vector)
    except (TypeError, ValueError) as exc:
        raise InvalidEmbeddingError(f"embedding must be a sequence of numbers: {exc}") from exc
    if array.dtype.kind not in "iuf":
        raise InvalidEmbeddingError(
            f"embedding must hold numbers only, got elements of type {array.dtype}"
        )
    encode_embedding(array, None)


def decode_embedding(blob: bytes | None) -> Embedding | None:
    """A read-only float32 vector from a BLOB column (``None`` stays ``None``)."""
    if blob is None:
        return None
    array = np.frombuffer(blob, dtype=_FLOAT32_LE).astype(np.float32, copy=False)
    array.setflags(write=False)
    return array

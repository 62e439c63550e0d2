"""LangGraph's ``IndexConfig`` for TieredMemoryStore: one vector per indexed field.

As LangGraph's stores do, each indexed path (``fields``, or ``index=[...]`` per put;
``path[*]`` and ``path[-1]`` forms) is embedded on its own with the configured
``embed`` (a LangChain ``Embeddings`` or a function), and a query's score for an item is
the cosine similarity of its best field. The vectors live in the item's metadata.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from langgraph.store.base import IndexConfig, get_text_at_path, tokenize_path
from langgraph.store.base.embed import ensure_embeddings

from persistence import InvalidInputError

FieldVectors = list[list[float]]


@dataclass(frozen=True, slots=True)
class FieldIndex:
    """Which fields are embedded and by what; built from LangGraph's ``IndexConfig``
    (``text_fields`` is read as ``fields``, as LangGraph's SQLite store names it)."""

    config: Mapping[str, Any]
    embeddings: Any
    dims: int
    fields: tuple[str, ...]

    @classmethod
    def from_config(cls, index: IndexConfig | Mapping[str, Any]) -> FieldIndex:
        if not isinstance(index, Mapping) or "embed" not in index or "dims" not in index:
            raise InvalidInputError("index must be a dict with 'dims' and 'embed' (LangGraph)")
        dims = index["dims"]
        if isinstance(dims, bool) or not isinstance(dims, int) or dims <= 0:
            raise InvalidInputError(f"index['dims'] must be an int > 0, got {dims!r}")
        fields: Any = index.get("fields") or index.get("text_fields") or ["$"]
        if isinstance(fields, str) or not all(isinstance(f, str) for f in fields):
            raise InvalidInputError("index['fields'] must be a list of field paths (str)")
        return cls(dict(index), ensure_embeddings(index["embed"]), dims, tuple(fields))

    def embed(self, texts: list[str]) -> FieldVectors:
        if not texts:
            return []
        vectors = [list(map(float, v)) for v in self.embeddings.embed_documents(texts)]
        if any(len(v) != self.dims for v in vectors):
            raise InvalidInputError(f"the embedder returned vectors not of {self.dims} dims")
        return vectors

    def embed_query(self, query: str) -> list[float]:
        return list(map(float, self.embeddings.embed_query(query)))


def field_texts(value: Mapping[str, Any], fields: Sequence[str]) -> list[str]:
    """The text at each field path of ``value`` (``$`` is the whole value as JSON)."""
    texts: list[str] = []
    for field in fields:
        path: str | list[str] = field if field == "$" else tokenize_path(field)
        texts += get_text_at_path(value, path)
    return texts


def best_similarities(query: Sequence[float], items: Sequence[FieldVectors]) -> list[float | None]:
    """For each item, the largest cosine similarity of ``query`` to any of its vectors
    (0 for a zero vector, as LangGraph computes it); ``None`` for an item without one.
    One matrix product for all the items."""
    owners = [n for n, vectors in enumerate(items) for _ in vectors]
    best: list[float | None] = [None] * len(items)
    if not owners:
        return best
    q = np.asarray(query, dtype=np.float64)
    m = np.asarray([v for vectors in items for v in vectors], dtype=np.float64)
    norms = np.linalg.norm(m, axis=1) * np.linalg.norm(q)
    similarities = np.where(norms > 0, (m @ q) / np.where(norms > 0, norms, 1.0), 0.0)
    top = np.full(len(items), -np.inf)
    np.maximum.at(top, np.asarray(owners), similarities)
    for n, vectors in enumerate(items):
        if vectors:
            best[n] = float(top[n])
    return best

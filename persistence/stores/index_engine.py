"""What an engine hands the shared :class:`~persistence.stores.indexes.IndexStore`: its
SQL of the recall indexes (:class:`IndexSql`, modules of the same names on both engines:
the embedding queue's and the cache's build statements the store runs) and the objects,
named for what they do, where the engines truly differ (:class:`KeywordSearch`,
:class:`VectorIndex`, :class:`~persistence.stores.empty_cache.EmptyCache`). Vectors reach
the SQL as float32 arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np

from persistence.engine import Connection
from persistence.records import KeywordParts, MemoryFilter, Tier
from persistence.statements import Batch, Row, Statement
from persistence.stores.facts import MetaSql
from persistence.stores.scope import WHOLE, Scope

T = TypeVar("T")


class KeywordSearch(Protocol):
    """The engine's keyword search (see the module docstring)."""

    def catch_up(self, conn: Connection) -> None:
        """Index what this transaction's writes left waiting."""
        ...

    def search(
        self,
        conn: Connection,
        words: Sequence[str],
        limit: int,
        where: MemoryFilter,
        context_weight: float,
        after_weight: float,
    ) -> list[tuple[str, float]]:
        """``(memory_id, score)`` of the memories ``where`` accepts, best (lowest) first."""
        ...

    def parts(
        self, conn: Connection, words: Sequence[str], memory_ids: Sequence[str],
        scope: Scope = WHOLE,
    ) -> dict[str, KeywordParts]:  # fmt: skip
        """Which parts of each memory's keyword window hold any of ``words`` (memories
        of ``scope`` only)."""
        ...


class VectorIndex(Protocol):
    """The engine's vector search and what its vectors need kept (module docstring)."""

    def searching(self, search: Callable[[Connection, int], T], empty: T) -> T:
        """``search(conn, dim)`` at the stored dimension (``empty`` before any embedding)."""
        ...

    def nearest(
        self, conn: Connection, query: np.ndarray, limit: int, where: MemoryFilter,
        exact_scan_max: int,
    ) -> list[tuple[str, float]]:  # fmt: skip
        """``(memory_id, cosine distance)`` of the ``limit`` nearest ``where`` accepts."""
        ...

    def distances(
        self, conn: Connection, query: np.ndarray, memory_ids: list[str]
    ) -> dict[str, float]:
        """Exact cosine distance to each of ``memory_ids`` that has an embedding."""
        ...

    def fix_dimension(self, conn: Connection, dim: int, configured: int | None) -> None:
        """The first embedding fixes the dimension (``configured`` if given); later ones
        must match it (:class:`~persistence.errors.EmbeddingDimensionError`)."""
        ...

    def written(self, conn: Connection) -> None:
        """New embeddings were stored in this transaction."""
        ...

    def swapping(self, conn: Connection) -> None:
        """A re-embedding replaces every vector in this transaction (next)."""
        ...

    def swapped(self, conn: Connection, dim: int) -> None:
        """A re-embedding replaced every vector with one of ``dim`` in this transaction."""
        ...


class EmbeddingSql(Protocol):
    """The engine's SQL of the embedding queue and the embedding bookkeeping."""

    def unembedded(self, limit: int) -> Statement:
        """``(id, tier value, content)`` of up to ``limit`` memories without a vector."""
        ...

    def unembedded_count(self) -> Statement:
        """How many memories wait for a vector (one value)."""
        ...

    def set_embeddings(
        self, rows: Sequence[tuple[Tier, str, np.ndarray, str | None]]
    ) -> Sequence[Batch]:
        """Store ``(tier, id, vector, content)`` where no vector was set meanwhile."""
        ...


class ConversationSql(Protocol):
    def turns(self, memory_ids: Sequence[str], before: bool = False) -> Statement: ...


class EmbeddingCacheSql(Protocol):
    """The engine's SQL of the embedding cache."""

    @property
    def COUNT(self) -> Statement:  # noqa: N802 (the modules' constant)
        """How many embeddings are cached (one value)."""
        ...

    def lookup(self, model_id: str, hashes: Sequence[bytes]) -> Statement:
        """``(hash, vector)`` rows of ``hashes`` (at least one) cached for ``model_id``."""
        ...

    def cached(self, rows: Sequence[Row]) -> dict[bytes, np.ndarray]:
        """``hash -> float32 vector`` from :meth:`lookup`'s rows."""
        ...

    def remember(
        self, model_id: str, entries: Sequence[tuple[bytes, np.ndarray]], now: int
    ) -> Batch:
        """Add or refresh ``(hash, vector)`` entries (a hit counts as a use)."""
        ...

    def evict(self, excess: int) -> Statement:
        """Delete the ``excess`` least recently used rows."""
        ...


class RebuildSql(Protocol):
    """The engine's SQL of a re-embedding: vectors of the new model staged beside the
    live ones, swapped in by one transaction."""

    def clear(self) -> Statement:
        """Delete every staged vector."""
        ...

    def unstaged(self, limit: int) -> Statement:
        """``(id, content)`` of up to ``limit`` memories with no staged vector yet."""
        ...

    def stage(self, rows: Sequence[tuple[str, bytes, np.ndarray]]) -> Batch:
        """Keep ``(memory id, content hash, vector)`` for the swap."""
        ...

    def staged(self) -> Statement:
        """``(id, content, content hash of its staged vector or NULL)`` of every memory."""
        ...

    def drop_unstaged(self) -> Sequence[Statement]:
        """Drop the live vectors no staged one replaces (before :meth:`swap`)."""
        ...

    def swap(self) -> Sequence[Statement]:
        """Put every staged vector in its memory's place; a row per memory updated."""
        ...


@dataclass(frozen=True)
class IndexSql:
    """The engine's SQL of the recall indexes, by family."""

    embeddings: EmbeddingSql
    conversation: ConversationSql
    cache: EmbeddingCacheSql
    rebuild: RebuildSql
    meta: MetaSql

"""What an engine hands the shared :class:`~persistence.stores.indexes.IndexStore`: its
SQL of the recall indexes (:class:`IndexSql`, modules of the same names on both engines,
each function taking the engine's connection first) and the objects, named for what they
do, where the engines truly differ (:class:`KeywordSearch`, :class:`VectorIndex`,
:class:`~persistence.stores.empty_cache.EmptyCache`). Vectors reach the SQL as float32 arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np

from persistence.engine import Connection
from persistence.records import KeywordParts, MemoryFilter, Tier
from persistence.statements import Statement
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
        """A re-embedding replaces every vector in this transaction."""
        ...


class EmbeddingSql(Protocol):
    """The engine's SQL of the embedding queue and the embedding bookkeeping."""

    def unembedded(self, conn: Connection, limit: int) -> list[tuple[str, Tier, str]]: ...

    def unembedded_count(self, conn: Connection) -> int: ...

    def set_embeddings(
        self, conn: Connection, rows: Sequence[tuple[Tier, str, np.ndarray, str | None]]
    ) -> None: ...

    def embedding_model(self, conn: Connection) -> str | None: ...

    def record_embedding_error(self, conn: Connection, message: str) -> int: ...


class ConversationSql(Protocol):
    def turns(self, memory_ids: Sequence[str], before: bool = False) -> Statement: ...


class EmbeddingCacheSql(Protocol):
    def lookup(
        self, conn: Connection, model_id: str, hashes: Sequence[bytes]
    ) -> dict[bytes, np.ndarray]: ...

    def remember(
        self, conn: Connection, model_id: str, entries: Sequence[tuple[bytes, np.ndarray]],
        now: int,
    ) -> None: ...  # fmt: skip

    def evict(self, conn: Connection, keep: int) -> int: ...


class RebuildSql(Protocol):
    def state(self, conn: Connection) -> tuple[str, int] | None: ...

    def begin(self, conn: Connection, model_id: str, dim: int) -> bool: ...

    def unstaged(self, conn: Connection, limit: int) -> list[tuple[str, str]]: ...

    def stage(self, conn: Connection, rows: Sequence[tuple[str, bytes, np.ndarray]]) -> None: ...

    def stale(self, conn: Connection) -> list[tuple[str, str]]: ...

    def swap(self, conn: Connection, model_id: str, dim: int) -> int: ...


@dataclass(frozen=True)
class IndexSql:
    """The engine's SQL of the recall indexes, by family."""

    embeddings: EmbeddingSql
    conversation: ConversationSql
    cache: EmbeddingCacheSql
    rebuild: RebuildSql

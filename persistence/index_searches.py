"""Recall's searches on a store, each its index store's: the delegation both backends'
stores share (:class:`~persistence.sqlite.SQLiteStore`, ``PostgresStore``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from persistence.records import KeywordParts, MemoryFilter, Tier

Turn = tuple[str | None, bool, str | None, str | None]
"""A memory's turn: (speaker, holds a question mark, id before it in its session, id after
it); both backends' conversation SQL returns it."""


class Searching(Protocol):
    """What a backend's index store answers for recall."""

    def keyword_search(
        self, words: Sequence[str], limit: int, tier: Tier | None = None,
        context_weight: float = 0.5, after_weight: float = 0.5, *,
        where: MemoryFilter | None = None,
    ) -> list[tuple[str, float]]: ...  # fmt: skip

    def keyword_parts(
        self, words: Sequence[str], memory_ids: Sequence[str]
    ) -> dict[str, KeywordParts]: ...

    def vector_search(
        self, vector: object, limit: int, tier: Tier | None = None, *,
        where: MemoryFilter | None = None,
    ) -> list[tuple[str, float]]: ...  # fmt: skip

    def vector_distances(self, vector: object, memory_ids: Sequence[str]) -> dict[str, float]: ...

    def conversation_turns(
        self, memory_ids: Sequence[str], *, before: bool = False
    ) -> dict[str, Turn]: ...


class IndexSearches:
    """The store's searches for recall, each the index store's (:attr:`indexes`)."""

    indexes: Searching

    def keyword_search(
        self, words: Sequence[str], limit: int, tier: Tier | None = None,
        context_weight: float = 0.5, after_weight: float = 0.5, *,
        where: MemoryFilter | None = None,
    ) -> list[tuple[str, float]]:  # fmt: skip
        return self.indexes.keyword_search(words, limit, tier, context_weight, after_weight,
                                           where=where)  # fmt: skip

    def keyword_parts(
        self, words: Sequence[str], memory_ids: Sequence[str]
    ) -> dict[str, KeywordParts]:
        return self.indexes.keyword_parts(words, memory_ids)

    def vector_search(
        self, vector: object, limit: int, tier: Tier | None = None, *,
        where: MemoryFilter | None = None,
    ) -> list[tuple[str, float]]:  # fmt: skip
        return self.indexes.vector_search(vector, limit, tier, where=where)

    def vector_distances(self, vector: object, memory_ids: Sequence[str]) -> dict[str, float]:
        return self.indexes.vector_distances(vector, memory_ids)

    def conversation_turns(
        self, memory_ids: Sequence[str], *, before: bool = False
    ) -> dict[str, Turn]:
        return self.indexes.conversation_turns(memory_ids, before=before)

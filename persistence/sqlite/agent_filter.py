"""The recall indexes of an agent-scoped handle on a file (SQLite).

The agent's scope is the predicate every store's SQL carries
(:mod:`persistence.stores.scope`); the recall indexes are the one family whose searches
still take it here, as the search filter's ``agent_id`` (a search naming another agent
finds nothing), until the index store is written once. On PostgreSQL row-level security
scopes the index tables and nothing here is used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from persistence.records import KeywordHits, KeywordParts, MemoryFilter, Tier
from persistence.stores.scope import Scope


class AgentIndexes:
    """The store's recall indexes (``inner``) searching ``scope``'s memories only
    (``memories``: the store's memories part, scoped the same)."""

    def __init__(self, inner: Any, scope: Scope, memories: Any) -> None:
        self._inner = inner
        self._scope = scope
        self._memories = memories

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _where(self, where: MemoryFilter | None) -> MemoryFilter | None:
        agent_id = self._scope.agent_id
        where = where or MemoryFilter()
        if where.agent_id not in (None, agent_id):
            return None
        return replace(where, agent_id=agent_id)

    def keyword_search(
        self,
        words: Sequence[str],
        limit: int,
        tier: Tier | None = None,
        context_weight: float = 0.5,
        after_weight: float = 0.5,
        *,
        where: MemoryFilter | None = None,
    ) -> list[tuple[str, float]]:
        """The keyword search among this agent's memories."""
        scoped = self._where(where)
        if scoped is None:
            return []
        found = self._inner.keyword_search(
            words, limit, tier, context_weight, after_weight, where=scoped
        )
        return found if isinstance(found, KeywordHits) else list(found)

    def keyword_parts(
        self, words: Sequence[str], memory_ids: Sequence[str]
    ) -> dict[str, KeywordParts]:
        """Which parts of this agent's memories' keyword windows hold the words."""
        found = self._inner.keyword_parts(words, memory_ids)
        owned = self._memories.get_memories(list(found))
        return {m: parts for m, parts in found.items() if m in owned}

    def vector_search(
        self, vector: object, limit: int, tier: Tier | None = None, *,
        where: MemoryFilter | None = None,
    ) -> list[tuple[str, float]]:  # fmt: skip
        """The vector search among this agent's memories."""
        scoped = self._where(where)
        if scoped is None:
            return []
        return list(self._inner.vector_search(vector, limit, tier, where=scoped))

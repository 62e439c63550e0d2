"""Lazy views of the episodic and semantic tiers: ``manager.episodic``, ``manager.semantic``.

Nothing is loaded up front; reads go through the manager's LRU cache, and iteration
pages through the file in id order, so RAM stays flat whatever the file holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from persistence import Memory, Tier
from tiered_memory.memories import Memories

_PAGE = 500


class TierView:
    """One tier of a manager's memories, read lazily."""

    def __init__(self, memories: Memories, tier: Tier) -> None:
        self._memories = memories
        self.tier = tier

    def get(self, memory_id: str) -> Memory | None:
        """The memory if this tier holds it, else ``None``."""
        memory = self._memories.get(memory_id)
        return memory if memory is not None and memory.tier is self.tier else None

    def query(self, **filters: Any) -> list[Memory]:
        """Memories of this tier matching every filter (see ``QueryOptions``)."""
        return self._memories.query(tier=self.tier, **filters)

    def __contains__(self, memory_id: object) -> bool:
        return isinstance(memory_id, str) and self.get(memory_id) is not None

    def __len__(self) -> int:
        self._memories.require_open()
        return self._memories.store.memories.count(self.tier)

    def __iter__(self) -> Iterator[Memory]:
        """Every memory of the tier, a page at a time."""
        after = ""
        while page := self._memories.store.memories.page(self.tier, after, _PAGE):
            yield from page
            after = page[-1].id

    def __repr__(self) -> str:
        return f"<TierView {self.tier.value}>"

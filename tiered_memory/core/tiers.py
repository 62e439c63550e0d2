"""Lazy views of the episodic and semantic tiers: ``manager.episodic``, ``manager.semantic``.

Nothing is loaded up front; reads go through the manager's LRU cache, and iteration
pages through the file in id order, so RAM stays flat whatever the file holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from persistence import Memory, Tier

if TYPE_CHECKING:
    from tiered_memory.core.manager import AgentMemoryManager

_PAGE = 500


class TierView:
    """One tier of a manager, read lazily."""

    def __init__(self, manager: AgentMemoryManager, tier: Tier) -> None:
        self._manager = manager
        self.tier = tier

    def get(self, memory_id: str) -> Memory | None:
        """The memory if this tier holds it, else ``None``."""
        memory = self._manager.get(memory_id)
        return memory if memory is not None and memory.tier is self.tier else None

    def query(self, **filters: Any) -> list[Memory]:
        """Memories of this tier matching every filter (see ``QueryOptions``)."""
        return self._manager.query(tier=self.tier, **filters)

    def __contains__(self, memory_id: object) -> bool:
        return isinstance(memory_id, str) and self.get(memory_id) is not None

    def __len__(self) -> int:
        self._manager._require_open()
        return self._manager.store.count(self.tier)

    def __iter__(self) -> Iterator[Memory]:
        """Every memory of the tier, a page at a time."""
        after = ""
        while page := self._manager.store.page(self.tier, after, _PAGE):
            yield from page
            after = page[-1].id

    def __repr__(self) -> str:
        return f"<TierView {self.tier.value}>"

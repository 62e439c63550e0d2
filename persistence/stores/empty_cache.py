"""EmptyCache: how a store remembers that a read came back empty while nothing changed
(recall's "any alias?" of the graph, "anything to embed?" of the recall indexes)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol


class EmptyCache(Protocol):
    """Remembers that a read came back empty while nothing changed (PostgreSQL's
    :class:`~persistence.postgres.empty_cache.EmptyAtVersion`), so asking again costs no
    round trip."""

    def known_empty(self) -> bool: ...

    def version(self) -> Hashable | None:
        """A token to pass to :meth:`found`, taken before the read it stands for."""

    def found(self, empty: bool, version: Hashable | None) -> None: ...


class NothingCached:
    """An :class:`EmptyCache` that never knows (an engine whose reads cost nothing)."""

    def known_empty(self) -> bool:
        return False

    def version(self) -> Hashable | None:
        return None

    def found(self, empty: bool, version: Hashable | None) -> None:
        """Nothing to keep."""

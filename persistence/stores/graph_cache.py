"""EmptyCache: how a graph store remembers that recall's "any alias?" came back empty
while nothing changed (see :meth:`persistence.stores.graph.GraphStore.may_name_entities`)."""

from __future__ import annotations

from typing import Protocol


class EmptyCache(Protocol):
    """Remembers that a read came back empty while nothing changed (PostgreSQL's
    :class:`~persistence.postgres.empty_cache.EmptyAtVersion`), so recall's "any alias?"
    costs no round trip on a store without a graph."""

    def known_empty(self) -> bool: ...

    def version(self) -> int | None: ...

    def found(self, empty: bool, version: int | None) -> None: ...


class NothingCached:
    """An :class:`EmptyCache` that never knows (an engine whose reads cost nothing)."""

    def known_empty(self) -> bool:
        return False

    def version(self) -> int | None:
        return None

    def found(self, empty: bool, version: int | None) -> None:
        """Nothing to keep."""

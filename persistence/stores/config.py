"""StoreConfig: the settings a store shares with its parts, one object on both engines."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from persistence.stores.scope import WHOLE, Scope


@dataclass(slots=True)
class StoreConfig:
    """``clock`` stamps records (epoch ms); ``max_content_bytes`` refuses larger new
    content; ``embedding_dim`` fixes the vector size up front (else the first one does);
    ``scope`` is the agent a scoped handle sees (every part's SQL carries it);
    ``vector_index`` picks the file engine's vector search.

    The store and every part hold the same object and read it live: set on the store
    (a test moves the clock), the parts see the change.
    """

    clock: Callable[[], int]
    max_content_bytes: int
    embedding_dim: int | None = None
    scope: Scope = WHOLE
    vector_index: str = "cells"
    """The file engine's vector search: ``"cells"`` (the default) or ``"ram"`` (see
    :data:`persistence.sqlite.index_store.VECTOR_INDEXES`); a server ignores it."""


class ConfiguredStore:
    """The settings of an engine's store, read from and written to its :class:`StoreConfig`
    (``store.config``), which every part holds: set on the store (a test moves the clock
    after opening), every part sees it at once. Mixed into both engines' stores."""

    config: StoreConfig

    @property
    def clock(self) -> Callable[[], int]:
        """Returns epoch milliseconds; stamps every record."""
        return self.config.clock

    @clock.setter
    def clock(self, value: Callable[[], int]) -> None:
        self.config.clock = value

    @property
    def max_content_bytes(self) -> int:
        """New content larger than this many UTF-8 bytes is refused."""
        return self.config.max_content_bytes

    @max_content_bytes.setter
    def max_content_bytes(self, value: int) -> None:
        self.config.max_content_bytes = value

    @property
    def embedding_dim(self) -> int | None:
        """The configured vector size (``None``: the first embedding written fixes it)."""
        return self.config.embedding_dim

    @embedding_dim.setter
    def embedding_dim(self, value: int | None) -> None:
        self.config.embedding_dim = value

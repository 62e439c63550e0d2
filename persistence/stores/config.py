"""StoreConfig: the settings a store shares with its parts, one object on both engines."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from persistence.stores.scope import WHOLE, Scope


@dataclass(slots=True)
class StoreConfig:
    """``clock`` stamps records (epoch ms); ``max_content_bytes`` refuses larger new
    content; ``embedding_dim`` fixes the vector size up front (else the first one does);
    ``scope`` is the agent a scoped handle sees (every part's SQL carries it).

    The store and every part hold the same object and read it live: set on the store
    (a test moves the clock), the parts see the change.
    """

    clock: Callable[[], int]
    max_content_bytes: int
    embedding_dim: int | None = None
    scope: Scope = WHOLE

"""The settings a PostgreSQL store shares with its parts (one object, read live)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(slots=True)
class StoreConfig:
    """``clock`` stamps records (epoch ms); ``max_content_bytes`` refuses larger new
    content; ``embedding_dim`` fixes the vector size up front (else the first one does).
    Set on the store, the parts see the change (a test moves the clock)."""

    clock: Callable[[], int]
    max_content_bytes: int
    embedding_dim: int | None = None

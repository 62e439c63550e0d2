"""The settings a PostgreSQL store shares with its parts: the shared
:class:`~persistence.stores.config.StoreConfig` (named here for ``index_store``)."""

from __future__ import annotations

from persistence.stores.config import StoreConfig

__all__ = ["StoreConfig"]

"""The storage parts a manager is built from, chosen in one place.

:func:`build_backend` is the only place that names the SQLite classes for the domain:
``AgentMemoryManager`` takes a :class:`Backend` and uses its parts through their
Protocols (:class:`~persistence.MemoryStorage`, :class:`~persistence.GraphStorage`,
:class:`~persistence.cache_layer.TransactionHooks`). A second backend (PostgreSQL +
pgvector, say) is one more branch here, picked by the location (a ``postgresql://``
URL), and the domain does not change.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from persistence.backup import BackupManager
from persistence.cache_layer import TransactionHooks
from persistence.connection import Synchronous
from persistence.encryption import Key
from persistence.graph_store import GraphStore
from persistence.sqlite_store import SQLiteStore
from persistence.storage import GraphStorage, MemoryStorage
from persistence.validation import DEFAULT_MAX_CONTENT_BYTES


@dataclass(frozen=True, slots=True)
class Backend:
    """One store's parts: its records, its graph's records, the transaction hooks a
    cache keeps in step with, and the file operations (backup, restore, JSON, integrity,
    maintenance)."""

    store: MemoryStorage
    graph: GraphStorage
    hooks: TransactionHooks
    backups: BackupManager


def build_backend(
    location: str | os.PathLike[str],
    *,
    synchronous: Synchronous = "NORMAL",
    clock: Callable[[], int] | None = None,
    change_check_interval_ms: int = 50,
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
    read_only: bool = False,
    key: Key | None = None,
    backup_dir: str | os.PathLike[str] | None = None,
) -> Backend:
    """The parts for ``location`` (a file path or ``":memory:"``), not yet opened."""
    store = SQLiteStore(
        location,
        synchronous=synchronous,
        clock=clock,
        change_check_interval_ms=change_check_interval_ms,
        read_only=read_only,
        key=key,
        max_content_bytes=max_content_bytes,
    )
    # The engine's hooks rather than the store's: one call less on every cached write.
    return Backend(store, GraphStore(store), store.db, BackupManager(store, backup_dir))


__all__ = ["Backend", "build_backend"]

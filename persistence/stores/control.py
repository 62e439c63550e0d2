"""EngineControl: the store-as-a-whole members both engines' stores take from their engine.

:class:`~persistence.storage.StoreControl` asks a store for its lifecycle and its
transactions; every engine's database has them under the same names, so they are written
here once and the engines' stores (``SQLiteStore``, ``PostgresStore``) inherit them beside
what truly differs (opening, migrating, statistics, meta). The transactions' hooks, other
processes' commits and the connections are the engine's own
(:class:`~persistence.engine.Engine`): callers ask :attr:`EngineControl.engine`
(``store.engine.after_commit(...)``).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

from persistence.engine import Connection, Engine


class _Database(Engine, Protocol):
    """An engine's database as its store holds it: the engine, opened and closed."""

    @property
    def is_open(self) -> bool: ...
    def close(self) -> None: ...


class EngineControl:
    """Lifecycle and transactions of a store, each its engine's (:attr:`engine`)."""

    engine: _Database

    @property
    def is_open(self) -> bool:
        """True between ``open()`` and :meth:`close`."""
        return self.engine.is_open

    @property
    def in_transaction(self) -> bool:
        """True when the calling thread is inside :meth:`transaction`."""
        return self.engine.in_transaction

    def close(self) -> None:
        """Close every connection (waiting for work under way in other threads); twice is
        harmless; refused inside this thread's own :meth:`transaction`."""
        self.engine.close()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def transaction(self, *, join: bool = False) -> AbstractContextManager[Connection]:
        """Group writes in one transaction: all or nothing; nested use is a savepoint,
        ``join=True`` joins the enclosing transaction."""
        return self.engine.transaction(join=join)

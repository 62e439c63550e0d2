"""EngineControl: the store-as-a-whole members both engines' stores take from their engine.

:class:`~persistence.storage.StoreControl` asks a store for its transactions, their hooks,
other processes' commits and its connections; every engine's database has them under the
same names (:mod:`persistence.engine`), so they are written here once and the engines'
stores (``SQLiteStore``, ``PostgresStore``) inherit them beside what truly differs
(opening, migrating, statistics, meta).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from persistence.engine import Connection


class _Database(Protocol):
    """The members of an engine's database this mixin hands on."""

    @property
    def is_open(self) -> bool: ...
    @property
    def in_transaction(self) -> bool: ...
    def close(self) -> None: ...
    def transaction(self, *, join: bool = False) -> AbstractContextManager[Any]: ...
    def reading(self) -> AbstractContextManager[Any]: ...
    def snapshot(self) -> AbstractContextManager[Any]: ...
    def after_commit(self, callback: Callable[[], None]) -> None: ...
    def after_rollback(self, callback: Callable[[], None]) -> None: ...
    def on_external_change(self, callback: Callable[[], None]) -> None: ...
    def check_external_changes(self, wait_s: float = 0.05) -> bool: ...
    def require_writable(self) -> None: ...


class EngineControl:
    """Lifecycle, transactions and hooks of a store, each its engine's (:attr:`engine`)."""

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

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once the current transaction commits (now, outside one)."""
        self.engine.after_commit(callback)

    def after_rollback(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` if the current transaction (or savepoint) rolls back."""
        self.engine.after_rollback(callback)

    def on_external_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when another connection (another process, say) has committed."""
        self.engine.on_external_change(callback)

    def check_external_changes(self, wait_s: float = 0.05) -> bool:
        """Look for other connections' commits; True when the callbacks were called."""
        return self.engine.check_external_changes(wait_s)

    def require_writable(self) -> None:
        """Raise :class:`~persistence.errors.ReadOnlyError` on a read-only store."""
        self.engine.require_writable()

    def read_connection(self) -> AbstractContextManager[Connection]:
        """A connection to read from (the transaction's inside one)."""
        return self.engine.reading()

    def snapshot(self) -> AbstractContextManager[Connection]:
        """Reads inside the block see one snapshot (nested blocks share it; inside this
        thread's transaction, the transaction's view)."""
        return self.engine.snapshot()

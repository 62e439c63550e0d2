"""Engine: an engine's database as the shared stores and the domain use it.

Every record family is written once (:mod:`persistence.stores`) over this interface; an
engine (:mod:`persistence.sqlite`, :mod:`persistence.postgres`) provides a database with
these members and, per family, a module of SQL functions of the same names. The
connection the blocks yield is the engine's own (an ``apsw.Connection``, a
``psycopg.Connection``): shared code passes it to the engine's SQL functions and never
looks inside it, so this module imports no driver.

- :meth:`Engine.reading`: a connection for reads. Inside this thread's transaction it is
  the transaction's (reads see its writes); inside :meth:`Engine.snapshot`, the
  snapshot's; else any (each statement sees the latest commits).
- :meth:`Engine.snapshot`: several reads that must agree see one snapshot (nested blocks
  share it; inside a transaction, the transaction's view).
- :meth:`Engine.transaction`: all or nothing; nested blocks are savepoints, ``join=True``
  joins the enclosing transaction. Driver errors leave as
  :class:`~persistence.errors.TieredMemoryError`. :meth:`Engine.after_commit` /
  :meth:`Engine.after_rollback` hooks run exactly once when the outermost transaction
  ends (the domain keeps its RAM copies in step with them).
- :meth:`Engine.on_external_change` / :meth:`Engine.check_external_changes`: tell the
  domain when another process changed the data (SQLite: ``data_version``; PostgreSQL:
  ``LISTEN``/``NOTIFY`` and a version row), so it drops its caches;
  :meth:`Engine.change_stamp` tells a cache whether anything committed since it read.

A store's engine is ``store.engine`` (:attr:`~persistence.storage.StoreControl.engine`),
the graph records' is ``graph.engine``: the domain asks the engine itself for the hooks,
other processes' commits and snapshots; no store hands them on.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

Connection = Any
"""The engine's own connection, opaque to shared code (handed to the engine's SQL)."""


class Engine(Protocol):
    """The database under the shared stores (see the module docstring)."""

    @property
    def in_transaction(self) -> bool:
        """True inside this thread's transaction."""
        ...

    def reading(self) -> AbstractContextManager[Connection]:
        """A connection for reads (the transaction's or the snapshot's where one is open)."""
        ...

    def snapshot(self) -> AbstractContextManager[Connection]:
        """A connection whose reads see one snapshot until the block ends."""
        ...

    def transaction(self, *, join: bool = False) -> AbstractContextManager[Connection]:
        """The transaction's connection: all or nothing."""
        ...

    def require_writable(self) -> None:
        """Raise :class:`~persistence.errors.ReadOnlyError` on a read-only handle."""
        ...

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once the current transaction commits (now, outside one)."""
        ...

    def after_rollback(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` if the current transaction (or nested block) rolls back."""
        ...

    def on_external_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when another connection (another process, say) has committed."""
        ...

    def check_external_changes(self, wait_s: float = 0.05) -> bool:
        """Look for other processes' commits (calling the :meth:`on_external_change`
        callbacks if there were any); False when RAM copies may be stale (a write in
        another thread held the engine ``wait_s`` seconds)."""
        ...

    def change_stamp(self) -> object | None:
        """A value that moves whenever a commit may have changed the data since (compared
        with ``==``): RAM copies read at one stamp may be served while it stays. ``None``
        inside this thread's transaction (or when the engine cannot tell): read instead.
        SQLite's is exact (``data_version``); PostgreSQL's as fresh as its change watch."""
        ...

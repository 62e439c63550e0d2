"""Engine: what the shared stores need of an engine's database, and nothing more.

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
  :class:`~persistence.errors.TieredMemoryError`.
"""

from __future__ import annotations

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

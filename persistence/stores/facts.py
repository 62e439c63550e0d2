"""StoreFacts: the facts and counters a store keeps about itself, read and counted the
same way on both engines.

Each engine's ``meta_sql`` module builds the statements (:class:`MetaSql`); this mixin
runs them in the engine's blocks, once for both (``SQLiteStore``, ``PostgresStore``).
Recording a fact (``set_meta``) stays each store's own: the engines check its key and
join the caller's transaction differently.
"""

from __future__ import annotations

from typing import Protocol

from persistence.statements import Statement, value
from persistence.stores.control import EngineControl
from persistence.validation import require_int, require_str


class MetaSql(Protocol):
    """The statements of an engine's table of facts (``store_meta`` / ``tm_meta``)."""

    def read(self, key: str) -> Statement: ...

    def write(self, key: str, value: str | None) -> Statement: ...

    def add(self, key: str, by: int) -> Statement: ...


class StoreFacts(EngineControl):
    """``get_meta`` and ``increment_meta`` over the engine's :attr:`meta_sql`."""

    meta_sql: MetaSql

    def get_meta(self, key: str) -> str | None:
        """One fact about the store (the embedding model, say), or ``None``."""
        with self.engine.reading() as conn:
            found: str | None = value(conn, self.meta_sql.read(key))
            return found

    def increment_meta(self, key: str, by: int = 1) -> int:
        """Add ``by`` to a counter kept with the data, atomically (one statement, in the
        caller's transaction if any); returns the new value."""
        require_str(key, "key", allow_empty=False)
        require_int(by, "by")
        with self.engine.transaction(join=True) as conn:
            return int(value(conn, self.meta_sql.add(key, by)))

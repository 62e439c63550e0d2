"""StoreFacts: the facts and counters a store keeps about itself, read and counted the
same way on both engines.

Each engine's ``meta_sql`` module builds the statements (:class:`MetaSql`); this mixin
runs them in the engine's blocks, once for both (``SQLiteStore``, ``PostgresStore``).
Recording a fact (``set_meta``) stays each store's own: the engines check its key and
join the caller's transaction differently.
"""

from __future__ import annotations

from typing import Protocol

from persistence.engine import Connection
from persistence.meta_keys import (
    EMBEDDING_DIM_KEY,
    EMBEDDING_MODEL_KEY,
    REBUILD_DIM_KEY,
    REBUILD_MODEL_KEY,
)
from persistence.statements import Statement, value
from persistence.stores.control import EngineControl
from persistence.validation import require_int, require_str


class MetaSql(Protocol):
    """The statements of an engine's table of facts (``store_meta`` / ``tm_meta``)."""

    def read(self, key: str) -> Statement: ...

    def write(self, key: str, value: str | None) -> Statement: ...

    def add(self, key: str, by: int) -> Statement: ...


def rebuild_state(conn: Connection, meta: MetaSql) -> tuple[str, int] | None:
    """``(model id, dimension)`` of the re-embedding under way, or ``None``."""
    model = value(conn, meta.read(REBUILD_MODEL_KEY))
    dim = value(conn, meta.read(REBUILD_DIM_KEY))
    return None if model is None or dim is None else (str(model), int(dim))


def swapped_model(meta: MetaSql, model_id: str, dim: int) -> list[Statement]:
    """The facts a finished re-embedding leaves: the store's model and size are the new
    ones, and no rebuild is under way."""
    return [
        meta.write(EMBEDDING_MODEL_KEY, model_id),
        meta.write(EMBEDDING_DIM_KEY, str(dim)),
        meta.write(REBUILD_MODEL_KEY, None),
        meta.write(REBUILD_DIM_KEY, None),
    ]


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

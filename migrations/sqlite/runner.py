"""The SQLite chain's glue for the runner core: ``BEGIN IMMEDIATE`` and the
``schema_version`` table.

The SQLite write lock (``BEGIN IMMEDIATE``) serialises two processes opening a new file.
Nothing here imports the driver at run time: the connection passed in is an
``apsw.Connection`` (the chain's modules import apsw themselves, when they are loaded).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from migrations.core import apply_chain, chain_head, discover

if TYPE_CHECKING:
    import apsw

_FOLDER = os.path.dirname(os.path.abspath(__file__))


class Migration(Protocol):
    """One SQLite schema version: a module (or object) with these three attributes."""

    VERSION: int
    DESCRIPTION: str

    def up(self, conn: apsw.Connection) -> None: ...


def available_migrations() -> list[Migration]:
    """The SQLite migrations shipped in this package, ordered and checked to be 1, 2, 3, ..."""
    return discover("migrations.sqlite", _FOLDER)


def read_schema_version(conn: apsw.Connection) -> int:
    """The highest applied version, or 0 for a file without a ``schema_version`` table."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if exists is None:
        return 0
    row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


class SQLiteVersionBook:
    """:class:`migrations.core.VersionBook` over one apsw connection."""

    def __init__(self, conn: apsw.Connection) -> None:
        self._conn = conn

    def read_version(self) -> int:
        return read_schema_version(self._conn)

    def begin(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self._conn.execute("COMMIT")

    def rollback(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def run(self, migration: Migration) -> None:
        migration.up(self._conn)

    def record(self, version: int, applied_at: int, description: str) -> None:
        self._conn.execute(
            "INSERT INTO schema_version (version, applied_at, description) VALUES (?, ?, ?)",
            (version, applied_at, description),
        )


def apply_migrations(
    conn: apsw.Connection,
    migrations: Sequence[Migration] | None = None,
    clock: Callable[[], int] | None = None,
) -> list[int]:
    """Bring the file up to the newest migration; return the versions applied.

    Each migration runs inside ``BEGIN IMMEDIATE`` with its ``schema_version`` row, so a
    failure leaves the file at the previous version with every row intact. The version is
    re-read under the write lock, so two processes opening a new file race safely.
    Raises :class:`~migrations.SchemaTooNew` (before writing anything) or
    :class:`~migrations.MigrationFailed`.
    """
    return apply_chain(SQLiteVersionBook(conn), migrations or available_migrations(), clock)


LATEST_VERSION: int = chain_head(_FOLDER)
"""The newest version shipped (from the file names: importing this loads no driver)."""

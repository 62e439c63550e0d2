"""The PostgreSQL chain's glue for the runner core: ``BEGIN`` with the chain's advisory
lock, and the ``tm_schema_version`` table.

Two processes opening a new database race safely: a transaction-level advisory lock
serialises them and the core reads the version again under it, in a ``READ COMMITTED``
transaction (each statement sees the commits made before it). Whether the version table
exists is read from ``pg_class`` itself, never through ``to_regclass``: that looks the name
up in the backend's catalog cache without taking a lock, and a backend that waited on the
advisory lock has not yet processed the catalog changes of the commit it waited for (its
cache still said "no such table", and it ran version 1 again). PostgreSQL runs DDL inside
a transaction, so a version applies whole or not at all. Nothing here imports psycopg:
the connection passed in is any object with ``execute`` (a psycopg 3 connection).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from migrations.core import apply_chain, chain_head, discover

_FOLDER = os.path.dirname(os.path.abspath(__file__))
LOCK_KEY = 0x746D5F6D6967  # pg_advisory_xact_lock key of the migration chain ("tm_mig")
VERSION_TABLE = "tm_schema_version"
_TABLE_EXISTS = (  # reading pg_class locks it, which brings the catalog cache up to date
    "SELECT EXISTS (SELECT FROM pg_catalog.pg_class "
    "WHERE relname = %s AND pg_catalog.pg_table_is_visible(oid))"
)


class PgConnection(Protocol):
    """What the runner needs of a connection (psycopg 3's ``Connection`` has it)."""

    def execute(self, query: Any, params: Any = None, /, *args: Any, **kwargs: Any) -> Any: ...


class PgMigration(Protocol):
    """One schema version: ``VERSION``, ``DESCRIPTION`` and ``STATEMENTS`` run in order."""

    VERSION: int
    DESCRIPTION: str
    STATEMENTS: Sequence[str]


def available_migrations() -> list[PgMigration]:
    """The PostgreSQL migrations shipped here, ordered and checked to be 1, 2, 3, ..."""
    return discover("migrations.postgres", _FOLDER)


def read_schema_version(conn: PgConnection) -> int:
    """The highest applied version; 0 when the database has no tiered-memory schema."""
    row = conn.execute(_TABLE_EXISTS, (VERSION_TABLE,)).fetchone()
    if not row[0]:
        return 0
    row = conn.execute(f"SELECT max(version) FROM {VERSION_TABLE}").fetchone()
    return int(row[0]) if row[0] is not None else 0


class PgVersionBook:
    """:class:`migrations.core.VersionBook` over one connection in autocommit mode."""

    def __init__(self, conn: PgConnection) -> None:
        self._conn = conn

    def read_version(self) -> int:
        return read_schema_version(self._conn)

    def begin(self) -> None:
        # READ COMMITTED whatever the server's default: a snapshot taken before the lock
        # was granted would not show the version the previous holder committed.
        self._conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
        self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))

    def commit(self) -> None:
        self._conn.execute("COMMIT")

    def rollback(self) -> None:
        self._conn.execute("ROLLBACK")

    def run(self, migration: PgMigration) -> None:
        for statement in migration.STATEMENTS:
            self._conn.execute(statement)

    def record(self, version: int, applied_at: int, description: str) -> None:
        self._conn.execute(
            f"INSERT INTO {VERSION_TABLE} (version, applied_at, description) VALUES (%s, %s, %s)",
            (version, applied_at, description),
        )


def apply_migrations(
    conn: PgConnection,
    migrations: Sequence[PgMigration] | None = None,
    clock: Callable[[], int] | None = None,
) -> list[int]:
    """Bring the database to the newest migration; the versions applied.

    ``conn`` is in autocommit mode (no transaction open). Each migration runs in its own
    transaction holding the chain's advisory lock, with its ``tm_schema_version`` row.
    Raises :class:`~migrations.SchemaTooNew` before writing,
    :class:`~migrations.MigrationFailed` after a rollback.
    """
    return apply_chain(PgVersionBook(conn), migrations or available_migrations(), clock)


LATEST_VERSION: int = chain_head(_FOLDER)
"""The newest version shipped (from the file names)."""

"""Apply the PostgreSQL migrations, each in one transaction with its version row.

Two processes opening a new database race safely: a transaction-level advisory lock
serialises them and the version is read again under it. A database whose schema is
newer than this code raises :class:`~migrations.SchemaTooNew` before anything is written.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from migrations.runner import MigrationFailed, SchemaTooNew

_MODULE_NAME = re.compile(r"^v(\d{3})_\w+$")
LOCK_KEY = 0x746D5F6D6967  # pg_advisory_xact_lock key of the migration chain ("tm_mig")
VERSION_TABLE = "tm_schema_version"


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
    found: list[PgMigration] = []
    folder = os.path.dirname(os.path.abspath(__file__))
    for info in pkgutil.iter_modules([folder]):
        match = _MODULE_NAME.match(info.name)
        if not match:
            continue
        module = importlib.import_module(f"migrations.postgres.{info.name}")
        if int(match.group(1)) != module.VERSION:
            raise RuntimeError(f"migrations.postgres.{info.name} declares {module.VERSION}")
        found.append(module)
    found.sort(key=lambda m: m.VERSION)
    if [m.VERSION for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migration versions are not contiguous: {[m.VERSION for m in found]}")
    return found


def read_schema_version(conn: PgConnection) -> int:
    """The highest applied version; 0 when the database has no tiered-memory schema."""
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (VERSION_TABLE,)).fetchone()
    if not row[0]:
        return 0
    row = conn.execute(f"SELECT max(version) FROM {VERSION_TABLE}").fetchone()
    return int(row[0]) if row[0] is not None else 0


def apply_migrations(
    conn: PgConnection,
    migrations: Sequence[PgMigration] | None = None,
    clock: Callable[[], int] | None = None,
) -> list[int]:
    """Bring the database to the newest migration; the versions applied.

    ``conn`` is in autocommit mode (no transaction open). Each migration runs in its own
    transaction holding the chain's advisory lock, with its ``tm_schema_version`` row.
    Raises :class:`SchemaTooNew` before writing, :class:`MigrationFailed` after a rollback.
    """
    ordered = sorted(migrations or available_migrations(), key=lambda m: m.VERSION)
    latest = ordered[-1].VERSION if ordered else 0
    now = clock or (lambda: time.time_ns() // 1_000_000)
    current = read_schema_version(conn)
    if current > latest:
        raise SchemaTooNew(current, latest)
    applied: list[int] = []
    for migration in ordered:
        if current >= migration.VERSION:
            continue
        conn.execute("BEGIN")
        try:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            current = read_schema_version(conn)
            if current > latest:
                raise SchemaTooNew(current, latest)
            if current < migration.VERSION:
                for statement in migration.STATEMENTS:
                    conn.execute(statement)
                conn.execute(
                    f"INSERT INTO {VERSION_TABLE} (version, applied_at, description) "
                    "VALUES (%s, %s, %s)",
                    (migration.VERSION, now(), migration.DESCRIPTION),
                )
                applied.append(migration.VERSION)
                current = migration.VERSION
            conn.execute("COMMIT")
        except BaseException as exc:
            conn.execute("ROLLBACK")
            if isinstance(exc, SchemaTooNew) or not isinstance(exc, Exception):
                raise
            raise MigrationFailed(migration.VERSION, exc) from exc
    return applied


LATEST_VERSION: int = available_migrations()[-1].VERSION

"""Apply schema migrations, each in its own transaction together with its version row."""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import apsw

_MODULE_NAME = re.compile(r"^v(\d{3})_\w+$")


class Migration(Protocol):
    """One schema version: a module (or object) with these three attributes."""

    VERSION: int
    DESCRIPTION: str

    def up(self, conn: apsw.Connection) -> None: ...


class SchemaTooNew(Exception):
    """The file's schema is newer than the newest migration this code knows."""

    def __init__(self, found: int, supported: int) -> None:
        self.found = found
        self.supported = supported
        super().__init__(f"schema version {found} is newer than supported {supported}")


class MigrationFailed(Exception):
    """A migration raised; its transaction was rolled back."""

    def __init__(self, version: int, cause: BaseException) -> None:
        self.version = version
        super().__init__(f"migration {version} failed and was rolled back: {cause!r}")


def available_migrations() -> list[Migration]:
    """The migrations shipped in this package, ordered and checked to be 1, 2, 3, ..."""
    found: list[Migration] = []
    for info in pkgutil.iter_modules(_package_path()):
        match = _MODULE_NAME.match(info.name)
        if not match:
            continue
        module = importlib.import_module(f"migrations.{info.name}")
        if int(match.group(1)) != module.VERSION:
            raise RuntimeError(f"migrations.{info.name} declares VERSION {module.VERSION}")
        found.append(module)
    found.sort(key=lambda m: m.VERSION)
    if [m.VERSION for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migration versions are not contiguous: {[m.VERSION for m in found]}")
    return found


def _package_path() -> list[str]:
    """The folder of this package (the runner's own folder: no import of the package,
    which imports the runner)."""
    return [os.path.dirname(os.path.abspath(__file__))]


def read_schema_version(conn: apsw.Connection) -> int:
    """The highest applied version, or 0 for a file without a ``schema_version`` table."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if exists is None:
        return 0
    row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def apply_migrations(
    conn: apsw.Connection,
    migrations: Sequence[Migration] | None = None,
    clock: Callable[[], int] | None = None,
) -> list[int]:
    """Bring the file up to the newest migration; return the versions applied.

    Each migration runs inside ``BEGIN IMMEDIATE`` with its ``schema_version`` row, so a
    failure leaves the file at the previous version with every row intact. The version is
    re-read under the write lock, so two processes opening a new file race safely.
    Raises :class:`SchemaTooNew` (before writing anything) or :class:`MigrationFailed`.
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
        conn.execute("BEGIN IMMEDIATE")
        try:
            current = read_schema_version(conn)
            if current < migration.VERSION:
                migration.up(conn)
                conn.execute(
                    "INSERT INTO schema_version (version, applied_at, description) "
                    "VALUES (?, ?, ?)",
                    (migration.VERSION, now(), migration.DESCRIPTION),
                )
                applied.append(migration.VERSION)
                current = migration.VERSION
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, Exception):
                raise MigrationFailed(migration.VERSION, exc) from exc
            raise
    return applied


LATEST_VERSION: int = available_migrations()[-1].VERSION

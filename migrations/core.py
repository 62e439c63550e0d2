"""The migration runner core, the same for every engine and knowing no driver.

A chain is a package of frozen modules ``vNNN_name.py``, each with ``VERSION`` and
``DESCRIPTION``. The core finds a chain's modules and checks their order, refuses a
schema newer than the code, and applies each missing version in its own transaction
together with its version row. How to begin and end that transaction, read and write the
version, and run one migration is the engine's: a :class:`VersionBook` passed in
(``migrations.sqlite.runner``, ``migrations.postgres.runner``).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

_MODULE_NAME = re.compile(r"^v(\d{3})_\w+$")


class Migration(Protocol):
    """What the core reads of one schema version (an engine's chain adds how to run it)."""

    VERSION: int
    DESCRIPTION: str


M = TypeVar("M", bound=Migration)
M_contra = TypeVar("M_contra", bound=Migration, contravariant=True)


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


class VersionBook(Protocol[M_contra]):
    """An engine's glue: one connection's migration transaction and its version record."""

    def read_version(self) -> int:
        """The highest applied version; 0 where the schema has none yet."""
        ...

    def begin(self) -> None:
        """Open the migration's transaction, holding what serialises concurrent runners."""
        ...

    def commit(self) -> None: ...

    def rollback(self) -> None:
        """End the open transaction (if any) without its changes."""
        ...

    def run(self, migration: M_contra) -> None:
        """Apply one migration inside the open transaction."""
        ...

    def record(self, version: int, applied_at: int, description: str) -> None:
        """Write the version row inside the open transaction."""
        ...


def chain_head(folder: str | Path) -> int:
    """The newest version in a chain's folder, read from its file names (no module is
    imported, so a driver the chain needs is not loaded); 0 for an empty chain."""
    versions = [
        int(match.group(1))
        for info in pkgutil.iter_modules([str(folder)])
        if (match := _MODULE_NAME.match(info.name))
    ]
    return max(versions, default=0)


def discover(package: str, folder: str | Path) -> list[Any]:
    """The chain's modules in ``package`` (its files in ``folder``), ordered and checked:
    each module's ``VERSION`` is the number in its name, and the versions are 1, 2, 3, ..."""
    found: list[Any] = []
    for info in pkgutil.iter_modules([str(folder)]):
        match = _MODULE_NAME.match(info.name)
        if not match:
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        if int(match.group(1)) != module.VERSION:
            raise RuntimeError(f"{package}.{info.name} declares VERSION {module.VERSION}")
        found.append(module)
    found.sort(key=lambda m: m.VERSION)
    if [m.VERSION for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migration versions are not contiguous: {[m.VERSION for m in found]}")
    return found


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def apply_chain(
    book: VersionBook[M], migrations: Sequence[M], clock: Callable[[], int] | None = None
) -> list[int]:
    """Bring the schema up to the newest of ``migrations``; the versions applied.

    Each migration runs in its own transaction (``book.begin()``) with its version row, so
    a failure leaves the schema at the previous version with every row intact. The
    version is read again inside the transaction, so two processes race safely.
    Raises :class:`SchemaTooNew` (before writing anything) or :class:`MigrationFailed`.
    """
    ordered = sorted(migrations, key=lambda m: m.VERSION)
    latest = ordered[-1].VERSION if ordered else 0
    now = clock or _now_ms
    current = book.read_version()
    if current > latest:
        raise SchemaTooNew(current, latest)
    applied: list[int] = []
    for migration in ordered:
        if current >= migration.VERSION:
            continue
        book.begin()
        try:
            current = book.read_version()
            if current > latest:
                raise SchemaTooNew(current, latest)
            if current < migration.VERSION:
                book.run(migration)
                book.record(migration.VERSION, now(), migration.DESCRIPTION)
                applied.append(migration.VERSION)
                current = migration.VERSION
            book.commit()
        except BaseException as exc:
            book.rollback()
            if isinstance(exc, SchemaTooNew) or not isinstance(exc, Exception):
                raise
            raise MigrationFailed(migration.VERSION, exc) from exc
    return applied

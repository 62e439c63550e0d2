"""PgFiles: the operator's operations on a PostgreSQL store (its
:class:`~persistence.storage.StoreFiles`).

A server has no file to copy or key to change: a backup is a consistent JSON snapshot
(one ``REPEATABLE READ`` transaction, the export format), a restore loads one into an
empty database, integrity is the library's invariants, maintenance is
``VACUUM (ANALYZE)``, and an encryption key is refused with what to use instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from persistence.errors import UnsupportedOperationError
from persistence.postgres.store import PostgresStore
from persistence.records import (
    ImportResult,
    IntegrityResult,
    Key,
    MaintenanceResult,
    Progress,
    RestoreResult,
)
from persistence.transfer.json_export import ExportSource
from persistence.transfer.json_import import ImportSink
from persistence.transfer.json_read import ImportDocument

NO_KEYS = (
    "a PostgreSQL store has no encryption key: encrypt the connection with TLS "
    "(sslmode=verify-full in the URL) and the data at rest with the server's own "
    "encryption (an encrypted volume or tablespace)"
)


class PgFiles:
    """Snapshots, JSON, integrity and maintenance of one :class:`PostgresStore`;
    snapshots without a target go to ``backup_dir`` (default: the working directory)."""

    def __init__(self, store: PostgresStore, backup_dir: str | os.PathLike[str] | None) -> None:
        self.store = store
        self.backup_dir = Path(backup_dir) if backup_dir is not None else None

    @property
    def encrypted(self) -> bool:
        """Always False: the server encrypts (TLS, at rest), not the library."""
        return False

    def rekey(self, new_key: Key) -> None:
        """Refused: see :data:`NO_KEYS`."""
        raise UnsupportedOperationError(NO_KEYS)

    def remove_leftovers(self, *more: Path) -> list[Path]:
        """Nothing is left behind on a server (a snapshot is written to a temporary name
        and renamed); ``more`` are deleted if present."""
        removed = []
        for path in more:
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            removed.append(path)
        return removed

    def create_backup(
        self,
        target: str | os.PathLike[str] | None = None,
        *,
        keep: int | None = None,
        progress: Progress | None = None,
    ) -> Path:
        raise UnsupportedOperationError("not yet on PostgreSQL")

    def restore_backup(self, source: str | os.PathLike[str]) -> RestoreResult:
        raise UnsupportedOperationError("not yet on PostgreSQL")

    def export_json(
        self,
        target: str | os.PathLike[str] | None = None,
        *,
        overwrite: bool = False,
        progress: Progress | None = None,
        allow_plaintext: bool = False,
    ) -> Path:
        raise UnsupportedOperationError("not yet on PostgreSQL")

    def import_json(
        self,
        source: str | os.PathLike[str],
        mode: str = "replace",
        *,
        progress: Progress | None = None,
        scrub: Callable[[ImportDocument], int] | None = None,
    ) -> ImportResult:
        raise UnsupportedOperationError("not yet on PostgreSQL")

    def check_integrity(self) -> IntegrityResult:
        raise UnsupportedOperationError("not yet on PostgreSQL")

    def run_maintenance(self, *, vacuum: bool = False) -> MaintenanceResult:
        raise UnsupportedOperationError("not yet on PostgreSQL")

    def export_source(self) -> AbstractContextManager[ExportSource]:
        raise UnsupportedOperationError("not yet on PostgreSQL")

    def import_sink(self) -> AbstractContextManager[ImportSink]:
        raise UnsupportedOperationError("not yet on PostgreSQL")

"""PgFiles: the operator's operations on a PostgreSQL store (its
:class:`~persistence.storage.StoreFiles`).

A server has no file to copy or key to change: a backup is a consistent JSON snapshot
(one ``REPEATABLE READ`` transaction, the export format, written under a temporary name,
read back and checked, then renamed), a restore loads one into an EMPTY database in one
transaction, integrity is the library's invariants, maintenance is ``VACUUM (ANALYZE)``
of the library's tables, and an encryption key is refused with what to use instead.
"""

from __future__ import annotations

import errno
import functools
import os
import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import psycopg

from migrations.postgres import read_schema_version
from persistence import leftovers, rotation
from persistence.errors import (
    BackupError,
    InvalidInputError,
    MissingDirectoryError,
    ReadOnlyError,
    StorageError,
    StorageFullError,
    TieredMemoryError,
    UnsupportedOperationError,
)
from persistence.postgres import integrity, json_io
from persistence.postgres.sql import stats_sql, transfer_sql
from persistence.postgres.store import PostgresStore
from persistence.records import (
    ImportResult,
    IntegrityResult,
    Key,
    MaintenanceResult,
    Progress,
    RestoreResult,
)
from persistence.statements import column, row, run
from persistence.stores.integrity import problems
from persistence.transfer.files import (
    existing_file,
    fsync_path,
    import_mode,
    named_like_snapshots,
    partial_beside,
    publish,
    stamp,
    timestamped,
)
from persistence.transfer.json_export import ExportSource, export_document
from persistence.transfer.json_import import (
    ImportDocument,
    ImportSink,
    check_against_store,
    import_document,
)
from persistence.transfer.json_read import read_document
from persistence.validation import require_int

NO_KEYS = (
    "a PostgreSQL store has no encryption key: encrypt the connection with TLS "
    "(sslmode=verify-full in the URL) and the data at rest with the server's own "
    "encryption (an encrypted volume or tablespace)"
)
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


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

    # --- naming -------------------------------------------------------------------------

    @property
    def _stem(self) -> str:
        """The database's name (and the scope's), safe as part of a file name."""
        name = self.store.engine.connector.database_name() or "memory"
        if self.store.scope:
            name = f"{name}-{self.store.scope}"
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(name)).lstrip(".") or "memory"

    def _directory(self) -> Path:
        directory = self.backup_dir if self.backup_dir is not None else Path.cwd()
        if not directory.is_dir():
            raise MissingDirectoryError(f"backup directory {directory} does not exist")
        return directory

    def _timestamped(self, directory: Path) -> Path:
        return timestamped(directory, self._stem, self.store.clock(), ".json")

    def _snapshots_in(self, directory: Path) -> list[Path]:
        """Files named like this store's timestamped snapshots, oldest first."""
        return rotation.by_publication(named_like_snapshots(directory, self._stem, ".json"))

    def list_backups(self) -> list[Path]:
        """Snapshots in the backup directory, oldest first."""
        directory = self.backup_dir if self.backup_dir is not None else Path.cwd()
        return self._snapshots_in(directory) if directory.is_dir() else []

    def remove_leftovers(self, *more: Path) -> list[Path]:
        """Delete the temporary files interrupted backups and exports left in the backup
        directory (and in ``more`` directories); one a backup under way holds is kept."""
        folders = [*([self.backup_dir] if self.backup_dir is not None else []), *more]
        with _os_errors("removing leftovers", None):
            return leftovers.remove_stale(folders)

    # --- snapshots ------------------------------------------------------------------------

    def create_backup(
        self,
        target: str | os.PathLike[str] | None = None,
        *,
        keep: int | None = None,
        progress: Progress | None = None,
    ) -> Path:
        """Write a consistent JSON snapshot (one ``REPEATABLE READ`` transaction, the
        export format); return its path. It is written under a temporary name, fsynced,
        read back and checked in full before it gets its name. ``keep=N`` then deletes
        all but the newest N snapshots in the backup directory."""
        require_int(keep, "keep", allow_none=True, minimum=1)
        if target is not None and keep is not None:
            raise InvalidInputError("keep= rotates the backup directory: omit target")
        if target is not None and Path(target).exists():
            raise BackupError(f"{Path(target)} already exists: choose a new name")
        with _os_errors(f"backing up {self.store.location}", target):
            return self._write_document(
                target, overwrite=False, progress=progress, verify=True, keep=keep
            )

    def restore_backup(self, source: str | os.PathLike[str]) -> RestoreResult:
        """Load a JSON snapshot (or export) into this EMPTY database, all or nothing: the
        whole document is checked first, then written in one transaction. A database
        that holds anything is refused (load into a new one, or replace its content with
        ``import_json(mode="replace")``)."""
        self.store.engine.require_writable()
        path = existing_file(source)
        with _os_errors(f"restoring into {self.store.location} from", path):
            doc = read_document(path, self.store.max_content_bytes)
        with self.import_sink() as sink:
            self._require_empty(sink, path)
            check_against_store(doc, "replace", sink)
            sink.write(doc, "replace", 0, _uncounted)
        with self.store.engine.reading() as conn:
            version = read_schema_version(conn)
        return RestoreResult(str(path), doc.schema_version, version, len(doc.memories))

    def _require_empty(self, sink: ImportSink, path: Path) -> None:
        held = len(sink.memory_ids()), len(sink.session_ids()), len(sink.forgotten_ids())
        if any(held):
            memories, sessions, forgotten = held
            raise InvalidInputError(
                f"{self.store.location} already holds {memories} memories, {sessions} "
                f"sessions and {forgotten} forgotten memories: a restore loads a snapshot "
                "into an empty database; create a new database and restore there, or "
                f"replace this one's content with import_json({str(path)!r}, "
                "mode='replace') (nothing was restored)"
            )

    # --- JSON -------------------------------------------------------------------------------

    def export_json(
        self,
        target: str | os.PathLike[str] | None = None,
        *,
        overwrite: bool = False,
        progress: Progress | None = None,
        allow_plaintext: bool = False,
    ) -> Path:
        """Write every table to one versioned JSON document from one snapshot; return its
        path. Written under a temporary name and renamed when complete; an existing file
        is kept unless ``overwrite``. (``allow_plaintext`` has nothing to allow here.)"""
        if target is not None and Path(target).exists() and not overwrite:
            raise BackupError(f"{Path(target)} already exists: choose a new name (or overwrite)")
        with _os_errors(f"exporting {self.store.location} to", target):
            return self._write_document(target, overwrite=overwrite, progress=progress,
                                        verify=False)  # fmt: skip

    def import_json(
        self,
        source: str | os.PathLike[str],
        mode: str = "replace",
        *,
        progress: Progress | None = None,
        scrub: Callable[[ImportDocument], int] | None = None,
    ) -> ImportResult:
        """Load an export: validate ALL of it, then write it in ONE transaction
        (``replace``: the database holds exactly the document; ``merge``: the newer row
        wins on id conflicts)."""
        checked = import_mode(mode)
        self.store.engine.require_writable()
        path = existing_file(source)
        with _os_errors(f"importing into {self.store.location} from", path):
            return import_document(
                self.import_sink,
                path,
                checked,
                progress,
                max_content_bytes=self.store.max_content_bytes,
                scrub=scrub,
            )

    def _write_document(
        self,
        target: str | os.PathLike[str] | None,
        *,
        overwrite: bool,
        progress: Progress | None,
        verify: bool,
        keep: int | None = None,
    ) -> Path:
        """Export to a temporary file beside the final name, fsync it, (``verify``: read
        it back in full and compare its row count), then give it its name (``keep``: and
        prune all but the newest ``keep`` snapshots, see :mod:`persistence.rotation`)."""
        final = self._timestamped(self._directory()) if target is None else Path(target)
        if not final.parent.is_dir():
            raise MissingDirectoryError(f"directory {final.parent} does not exist")
        with partial_beside(final) as partial:
            with partial.open("wb") as out, self.export_source() as source:
                rows = export_document(source, out, self.store.clock(), progress)
                out.flush()
                os.fsync(out.fileno())
            if verify:
                doc = read_document(partial)
                if doc.row_count != rows:
                    raise BackupError(
                        f"the snapshot reads back {doc.row_count} rows, not {rows}; "
                        "nothing was kept"
                    )
            another = None if target is not None else functools.partial(
                self._timestamped, final.parent)  # fmt: skip
            if overwrite:
                os.replace(partial, final)
                fsync_path(final.parent)
            elif keep is None:
                final = publish(partial, final, another)
            else:
                directory = final.parent
                with rotation.locked(directory):  # other backups name, publish and prune
                    at = stamp(self.store.clock())
                    named = functools.partial(
                        rotation.next_name, directory, self._stem, at, ".json"
                    )
                    final = publish(partial, named(), named)
                    rotation.prune(self._snapshots_in(directory), keep, final)
        return final

    # --- copying between stores (persistence.transfer.copy) ---------------------------

    def export_source(self) -> AbstractContextManager[ExportSource]:
        """Every table from one ``REPEATABLE READ READ ONLY`` snapshot, for the block."""
        return json_io.export_source(self.store.engine, self.store.config.scope)

    def import_sink(self) -> AbstractContextManager[ImportSink]:
        """One write transaction and the sink that writes in it: leaving the block
        commits, an exception rolls everything back. Refused on a read-only store."""
        self.store.engine.require_writable()
        return json_io.import_sink(self.store.engine)

    # --- integrity and maintenance -------------------------------------------------------

    def check_integrity(self) -> IntegrityResult:
        """Check the library's invariants (what the server's constraints do not cover)
        from one snapshot; list every problem found."""
        with self.store.engine.snapshot() as conn:
            try:
                found = problems(conn, integrity.CHECKS)
            except psycopg.Error as exc:
                raise self.store.engine.error(exc) from None
        return IntegrityResult(not found, tuple(integrity.CHECKS), tuple(found))

    def run_maintenance(self, *, vacuum: bool = False) -> MaintenanceResult:
        """``VACUUM (ANALYZE)`` the library's tables (outside a transaction: VACUUM cannot
        run in one); ``vacuum`` is accepted for the same call on every backend (a plain
        VACUUM already returns dead rows' space for reuse; ``VACUUM FULL`` would lock the
        tables: run it yourself in a quiet hour). Sizes are the database's; the WAL
        fields are zero (the server manages its WAL). Leftover temporary files of
        interrupted backups in the backup directory are deleted too."""
        self.store.engine.require_writable()
        self.remove_leftovers()
        with self.store.engine.reading() as conn:
            if self.store.in_transaction:
                raise InvalidInputError("maintenance cannot run inside a transaction")
            try:
                before = stats_sql.to_sizes(row(conn, stats_sql.SIZES))["database_size_bytes"]
                for table in column(conn, transfer_sql.maintained_tables()):
                    run(conn, transfer_sql.vacuum_analyze(table))
                after = stats_sql.to_sizes(row(conn, stats_sql.SIZES))["database_size_bytes"]
            except psycopg.Error as exc:
                raise self.store.engine.error(exc) from None
        return MaintenanceResult(
            bytes_before=before,
            bytes_after=after,
            wal_bytes_before=0,
            wal_bytes_after=0,
            checkpointed_frames=0,
            vacuumed=True,
            optimized=True,
        )


def _uncounted(table: str, outcome: str) -> None:
    """A restore counts nothing per row."""


@contextmanager
def _os_errors(doing: str, place: str | os.PathLike[str] | None) -> Iterator[None]:
    """An ``OSError`` of the block raises this library's error naming ``doing``."""
    try:
        yield
    except TieredMemoryError:
        raise
    except OSError as exc:
        where = exc.filename or place
        reason = exc.strerror or str(exc)
        if exc.errno in _FULL_ERRNOS:
            raise StorageFullError(
                f"{doing} failed: the disk is full ({reason}); free some space and try again"
            ) from None
        if exc.errno == errno.EROFS:
            raise ReadOnlyError(f"{doing} failed: {where} is on read-only storage") from None
        raise StorageError(f"{doing} failed: {where}: {reason}") from None

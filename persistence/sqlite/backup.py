"""BackupManager: snapshots, safe restore, JSON export/import, integrity and maintenance.

Snapshots are ``VACUUM INTO`` copies taken from a read snapshot, so the agent keeps
writing meanwhile; each is written under a temporary name, fsynced, reopened and checked
before it gets its final name. A restore validates the source completely, then copies it
into the live database with SQLite's online backup API in ONE write transaction: a crash
leaves the old database or the new one, and other processes that have the file open
keep working on the restored content (replacing the file under them would not be safe).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

import apsw

from migrations.sqlite import LATEST_VERSION, read_schema_version
from persistence import leftovers, rotation
from persistence.errors import (
    BackupError,
    CorruptDatabaseError,
    DatabaseBusyError,
    ForeignDatabaseError,
    InvalidInputError,
    MissingDirectoryError,
    MissingFileError,
    PlaintextExportError,
    SameDatabaseError,
    SchemaTooNewError,
)
from persistence.records import (
    ImportResult,
    IntegrityProblem,
    IntegrityResult,
    Key,
    MaintenanceResult,
    Progress,
    RestoreResult,
    Tier,
)
from persistence.sqlite import integrity, json_io
from persistence.sqlite.connection import connect, connect_snapshot, query_one, query_value
from persistence.sqlite.encryption import check_file_for_key, wrong_key
from persistence.sqlite.erasure import erase_pending
from persistence.sqlite.planner import fix_shadow_statistics
from persistence.sqlite.sql import memory_sql
from persistence.sqlite.store import SQLiteStore
from persistence.sqlite.translate import result_code, storage_errors
from persistence.statements import value
from persistence.stores.scope import Scope
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
from persistence.transfer.json_import import ImportDocument, ImportSink, import_document
from persistence.validation import require_int

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _storage_errors(
    doing: str, *, writes: bool = False, other: str = ""
) -> Callable[
    [Callable[Concatenate[BackupManager, _P], _R]], Callable[Concatenate[BackupManager, _P], _R]
]:
    """A public method whose SQLite and OS failures (a full disk, read-only storage) raise
    this library's errors naming ``doing`` (and, after ``other``, the file its first
    argument names); with ``writes``, refused on a read-only store before anything
    happens."""

    def wrap(
        method: Callable[Concatenate[BackupManager, _P], _R],
    ) -> Callable[Concatenate[BackupManager, _P], _R]:
        @functools.wraps(method)
        def run(self: BackupManager, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            if writes:
                self.store.engine.require_writable()
            place = None if self.store.is_memory else self.store.path
            named = args[0] if args else kwargs.get("target", kwargs.get("source"))
            also = ""
            if other and isinstance(named, str | os.PathLike):
                also = f" {other} {os.fspath(named)}"
            with storage_errors(f"{doing} {self.store.path}{also}", place):
                return method(self, *args, **kwargs)

        return run

    return wrap


class BackupManager:
    """Backup, restore, export, import, integrity and maintenance of one store.

    ``backup_dir`` defaults to ``<db name>-backups/`` beside the database (created on
    first use, mode 0700); an in-memory store needs one to be given.
    """

    def __init__(
        self,
        store: SQLiteStore,
        backup_dir: str | os.PathLike[str] | None = None,
        *,
        agent_id: str | None = None,
    ):
        self.store = store
        self._backup_dir = None if backup_dir is None else Path(backup_dir)
        self.agent_id = agent_id
        """An agent-scoped handle's agent: exports hold only its data."""
        self.scope = Scope.of(agent_id)
        """The handle's scope: it refuses what would copy or replace the whole file."""

    @property
    def backup_dir(self) -> Path:
        """Where timestamped snapshots and exports go."""
        if self._backup_dir is not None:
            return self._backup_dir
        if self.store.is_memory:
            raise InvalidInputError("an in-memory store needs a backup_dir or an explicit target")
        live = Path(self.store.path)
        return live.with_name(f"{live.stem}-backups")

    def _managed_dir(self) -> Path:
        directory = self.backup_dir
        if self._backup_dir is None:
            directory.mkdir(mode=0o700, exist_ok=True)
        elif not directory.is_dir():
            raise MissingDirectoryError(f"backup directory {directory} does not exist")
        return directory

    @property
    def _stem(self) -> str:
        return "memory" if self.store.is_memory else Path(self.store.path).stem

    def _next_name(self, directory: Path, suffix: str) -> Path:
        """A timestamped name after every one taken (under :func:`rotation.locked`)."""
        return rotation.next_name(directory, self._stem, stamp(self.store.clock()), suffix)

    def _timestamped(self, directory: Path, suffix: str) -> Path:
        return timestamped(directory, self._stem, self.store.clock(), suffix)

    # --- snapshots ----------------------------------------------------------------------

    @_storage_errors("backing up", other="to")
    def create_backup(
        self,
        target: str | os.PathLike[str] | None = None,
        *,
        keep: int | None = None,
        progress: Progress | None = None,
    ) -> Path:
        """Snapshot the database with ``VACUUM INTO``; return the snapshot's path.

        Refuses a database that fails ``integrity_check``. The snapshot is fsynced and
        verified (integrity, schema version) before it is given its name. ``keep=N``
        then deletes all but the newest N snapshots in the backup directory. Stale
        leftovers of interrupted backups and restores are deleted first.
        """
        self.scope.refuse_file_op("back it up")
        require_int(keep, "keep", allow_none=True, minimum=1)
        if target is None:
            final = self._timestamped(self._managed_dir(), ".db")
        else:
            if keep is not None:
                raise InvalidInputError("keep= rotates the backup directory: omit target")
            final = Path(target)
            if not final.parent.is_dir():
                raise MissingDirectoryError(f"directory {final.parent} does not exist")
            if final.exists():
                raise BackupError(f"{final} already exists: choose a new name")
        problems = self._integrity_problems(("integrity_check",))
        if problems:
            raise CorruptDatabaseError(
                f"refusing to back up a damaged database: {problems[0].detail}; "
                "run `tiered-memory check` and restore an earlier snapshot"
            )
        self.remove_leftovers(final.parent)
        another = None if target is not None else lambda: self._timestamped(final.parent, ".db")
        with partial_beside(final) as partial:
            self._vacuum_into(partial, progress)
            self._finish_erasure(partial)
            fsync_path(partial)
            self._verify_snapshot(partial)
            if keep is None:
                return publish(partial, final, another)
            directory = final.parent
            with rotation.locked(directory):  # other backups name, publish and prune in turn
                named = functools.partial(self._next_name, directory, ".db")
                final = publish(partial, named(), named)
                rotation.prune(self._snapshots_in(directory), keep, final)
        return final

    def _vacuum_into(self, partial: Path, progress: Progress | None) -> None:
        with self.store.engine.reading() as conn:
            if progress is not None:
                total = int(conn.pragma("page_count")) * int(conn.pragma("page_size"))
                conn.set_progress_handler(
                    lambda: progress(min(_size(partial), total), total) or False, 10_000
                )
            try:
                conn.execute("VACUUM INTO ?", (str(partial),))
            finally:
                conn.set_progress_handler(None)
        if progress is not None:
            progress(_size(partial), _size(partial))

    def _finish_erasure(self, partial: Path) -> None:
        """A snapshot taken after a forget but before the close that rewrites the keyword
        index would still hold the forgotten terms: rewrite the snapshot's index now."""
        conn = connect(str(partial), self.store.options)
        try:
            erase_pending(conn)
        finally:
            conn.close()

    def _verify_snapshot(self, path: Path) -> None:
        conn = connect_snapshot(path, self.store.options.key)
        try:
            damage = integrity.sqlite_integrity(conn)
            version = read_schema_version(conn)
        finally:
            conn.close()
        if damage:
            raise BackupError(f"the snapshot failed its integrity check: {damage[0]}")
        if version != self.store.schema_version:
            raise BackupError(
                f"the snapshot has schema version {version}, not {self.store.schema_version}"
            )

    def list_backups(self) -> list[Path]:
        """Snapshots in the backup directory, oldest first."""
        directory = self.backup_dir
        return self._snapshots_in(directory) if directory.is_dir() else []

    def _snapshots_in(self, directory: Path) -> list[Path]:
        """Files named like this store's timestamped snapshots, oldest first."""
        return sorted(named_like_snapshots(directory, self._stem, ".db"), key=_mtime_and_name)

    # --- restore ------------------------------------------------------------------------

    @_storage_errors("restoring into", writes=True, other="from")
    def restore_backup(self, source: str | os.PathLike[str]) -> RestoreResult:
        """Replace the database's content with a snapshot's, all or nothing.

        The source is checked first (SQLite header, a complete tiered-memory schema not
        newer than this code, integrity). It is copied to a staging file beside the
        database, migrated and checked there; only then is it copied into the live
        database with SQLite's online backup API, in one write transaction. The live
        database itself (or its WAL, by any name) is refused: it is not a snapshot.
        """
        self.scope.refuse_file_op("restore it")
        path = Path(source)
        if self._is_own_file(path):
            raise SameDatabaseError(
                f"{path} is the database being restored (or one of its files), not a "
                "snapshot: restore from a backup (`tiered-memory backup` makes one); "
                "nothing was restored"
            )
        key = self.store.options.key
        src = _open_snapshot(path, key)
        try:
            source_version = _check_restore_source(src, path)
        finally:
            src.close()
        with self._staging() as staging:
            src = connect_snapshot(path, key)
            try:
                src.execute("VACUUM INTO ?", (str(staging),))  # encrypted with the same key
            finally:
                src.close()
            with SQLiteStore(staging, key=key) as staged:  # migrates, builds the indexes
                problems = BackupManager(staged).check_integrity().problems
                if problems:
                    raise CorruptDatabaseError(f"{path}: {problems[0].detail}; nothing restored")
            staged_conn = connect_snapshot(staging, key)
            try:
                with self.store.engine.exclusive_connection() as live:
                    if int(staged_conn.pragma("page_size")) != int(live.pragma("page_size")):
                        raise BackupError(f"{path} has a different page size; nothing restored")
                    try:
                        with live.backup("main", staged_conn, "main") as copy:
                            copy.step(-1)
                    except apsw.BusyError as exc:
                        raise DatabaseBusyError(
                            "another connection kept the database busy; nothing restored",
                            result_code=result_code(exc),
                        ) from exc
                    version = read_schema_version(live)
                    memories = sum(int(value(live, memory_sql.count(tier))) for tier in Tier)
            finally:
                staged_conn.close()
        return RestoreResult(str(path), source_version, version, memories)

    def _is_own_file(self, path: Path) -> bool:
        """True if ``path`` names the live database or its -wal/-shm/-journal file, by
        any name (through a symlink, a relative path or a hard link)."""
        if self.store.is_memory:
            return False
        live = Path(self.store.path)
        own = [live, *(Path(f"{live}{suffix}") for suffix in ("-wal", "-shm", "-journal"))]
        try:
            if path.resolve() in {p.resolve() for p in own}:
                return True
        except (OSError, RuntimeError):  # a symlink loop: not one of ours
            return False
        return any(_same_file(path, p) for p in own)

    def _staging(self) -> AbstractContextManager[Path]:
        """A locked staging file beside the database, deleted (with sidecars) afterwards."""
        directory = self._staging_dir()
        if not directory.is_dir():
            raise MissingDirectoryError(f"directory {directory} does not exist")
        return leftovers.held_temp(directory, ".restore-", ".db")

    def _staging_dir(self) -> Path:
        return self.backup_dir if self.store.is_memory else Path(self.store.path).parent

    def remove_leftovers(self, *more: Path) -> list[Path]:
        """Delete temporary files that interrupted backups, exports and restores left.

        Looks beside the database, in the backup directory and in ``more`` directories;
        a file that a backup or restore under way (in any process) holds is kept.
        Returns what was deleted. A read-only store looks in ``more`` only: it changes
        nothing beside its database.
        """
        if self.store.read_only or (self.store.is_memory and self._backup_dir is None):
            return leftovers.remove_stale(more)
        return leftovers.remove_stale([self._staging_dir(), self.backup_dir, *more])

    # --- JSON -----------------------------------------------------------------------------

    @_storage_errors("exporting", other="to")
    def export_json(
        self,
        target: str | os.PathLike[str] | None = None,
        *,
        overwrite: bool = False,
        progress: Progress | None = None,
        allow_plaintext: bool = False,
    ) -> Path:
        """Write every table to one versioned JSON document; return its path.

        Streamed page by page from one read snapshot, so memory stays bounded. The
        document is written under a temporary name and renamed when complete. An existing
        file is kept unless ``overwrite``; the database's own files never are. The JSON
        is plain text: an encrypted store refuses unless ``allow_plaintext``.
        """
        if self.store.encrypted and not allow_plaintext:
            raise PlaintextExportError(
                f"{self.store.path} is encrypted and a JSON export is plain text: pass "
                "allow_plaintext=True (--allow-plaintext) to write it anyway, or make an "
                "encrypted snapshot with backup() (nothing was written)"
            )
        final = self._timestamped(self._managed_dir(), ".json") if target is None else Path(target)
        if not final.parent.is_dir():
            raise MissingDirectoryError(f"directory {final.parent} does not exist")
        if self._is_own_file(final):
            raise SameDatabaseError(f"{final} is the database itself: choose another file")
        if final.exists() and not overwrite:
            raise BackupError(f"{final} already exists: choose a new name (or overwrite)")
        with partial_beside(final) as partial:
            with (
                partial.open("wb") as out,
                self.store.engine.reading() as conn,
                json_io.export_source(conn, self.scope) as source,
            ):
                export_document(source, out, self.store.clock(), progress)
                out.flush()
                os.fsync(out.fileno())
            if overwrite:
                os.replace(partial, final)
                fsync_path(final.parent)
            else:
                another = None
                if target is None:
                    another = lambda: self._timestamped(final.parent, ".json")  # noqa: E731
                final = publish(partial, final, another)
        return final

    @_storage_errors("importing into", writes=True, other="from")
    def import_json(
        self,
        source: str | os.PathLike[str],
        mode: str = "replace",
        *,
        progress: Progress | None = None,
        scrub: Callable[[ImportDocument], int] | None = None,
    ) -> ImportResult:
        """Load an export: validate ALL of it, then write it in ONE transaction.

        ``replace`` makes the database hold exactly the document; ``merge`` keeps the
        newer row on id conflicts (by ``updated_at``; sessions by ``last_active_at``).
        Any problem raises :class:`InvalidImportError` naming the first bad value, and
        nothing is written.
        """
        self.scope.refuse_file_op("import into it")
        checked = import_mode(mode)
        path = existing_file(source)
        return import_document(
            functools.partial(json_io.import_sink, self.store.engine),
            path,
            checked,
            progress,
            max_content_bytes=self.store.max_content_bytes,
            scrub=scrub,
        )

    # --- copying between stores (persistence.transfer.copy) ---------------------------

    @contextmanager
    def export_source(self) -> Iterator[ExportSource]:
        """Every table from one read snapshot, for the block (what :meth:`export_json`
        writes out; :func:`~persistence.transfer.copy_store` reads it as records)."""
        with (
            self.store.engine.reading() as conn,
            json_io.export_source(conn, self.scope) as source,
        ):
            yield source

    def import_sink(self) -> AbstractContextManager[ImportSink]:
        """One write transaction and the sink that writes in it (an
        :data:`~persistence.transfer.OpenSink`): leaving the block commits, an exception
        rolls everything back. Refused on a read-only store (and a scoped one)."""
        self.scope.refuse_file_op("copy into it")
        self.store.engine.require_writable()
        return json_io.import_sink(self.store.engine)

    # --- integrity and maintenance ---------------------------------------------------

    @property
    def encrypted(self) -> bool:
        """True when the store's file is opened with a key."""
        return self.store.encrypted

    def rekey(self, new_key: Key) -> None:
        """Re-encrypt the file with ``new_key`` in one transaction (see
        :meth:`SQLiteStore.rekey`); refused on a read-only, plain or scoped store."""
        self.scope.refuse_file_op("rekey it")
        self.store.engine.require_writable()
        self.store.rekey(new_key)

    @_storage_errors("checking")
    def check_integrity(self) -> IntegrityResult:
        """Run SQLite's checks and the library's invariants; list every problem found."""
        names = tuple(integrity.CHECKS)
        problems = self._integrity_problems(names)
        return IntegrityResult(not problems, names, tuple(problems))

    def _integrity_problems(self, names: tuple[str, ...]) -> list[IntegrityProblem]:
        with self.store.engine.fresh_read_connection() as conn:
            return integrity.check(conn, names)

    @_storage_errors("maintaining", writes=True)
    def run_maintenance(self, *, vacuum: bool = False) -> MaintenanceResult:
        """Finish pending erasures, checkpoint and truncate the WAL, refresh planner
        statistics, optionally VACUUM.

        Also deletes what interrupted backups and restores left (:meth:`remove_leftovers`).
        """
        self.remove_leftovers()
        path = self.store.path
        before, wal_before = _size(Path(path)), _size(Path(path + "-wal"))
        with self.store.engine.exclusive_connection() as conn:
            erase_pending(conn)  # the forgotten terms leave the keyword index now
            self.store.indexes.vectors.maintain(conn)  # codes or cells brought up to date
            conn.pragma("optimize")
            fix_shadow_statistics(conn)  # FTS5's statements plan right without them
            if vacuum:
                conn.execute("VACUUM")
            checkpoint = query_one(conn, "PRAGMA wal_checkpoint(TRUNCATE)")
            checkpointed = checkpoint[2] if checkpoint else 0
        return MaintenanceResult(
            bytes_before=before,
            bytes_after=_size(Path(path)),
            wal_bytes_before=wal_before,
            wal_bytes_after=_size(Path(path + "-wal")),
            checkpointed_frames=max(int(checkpointed), 0),
            vacuumed=vacuum,
            optimized=True,
        )


_REQUIRED_TABLES = frozenset(
    {"schema_version", "store_meta", "scratchpad", "episodic", "semantic", "memory_tags",
     "repetition_schedules", "sessions", "session_transcripts", "promotion_log"}
)  # fmt: skip


def _check_restore_source(src: apsw.Connection, path: Path) -> int:
    """The source's schema version, once it is known to be a whole, sound tiered-memory file."""
    version = read_schema_version(src)
    if version > LATEST_VERSION:
        raise SchemaTooNewError(version, LATEST_VERSION, str(path))
    tables = {r[0] for r in src.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
    missing = sorted(_REQUIRED_TABLES - tables)
    if version == 0 or missing:
        lacking = ", ".join(missing) or "its version"
        raise ForeignDatabaseError(f"{path} is not a tiered-memory database (missing {lacking})")
    damage = integrity.sqlite_integrity(src)
    if damage:
        raise CorruptDatabaseError(f"{path} is damaged ({damage[0]}); nothing restored")
    return version


def _open_snapshot(path: Path, key: bytes | None) -> apsw.Connection:
    """Open a restore source read-only after checking it is a SQLite file at all, and
    (for an encrypted store) one encrypted with the same key."""
    if not path.is_file():
        raise MissingFileError(f"{path} does not exist")
    check_file_for_key(path, key, doing="restored")
    conn = connect_snapshot(path, key)
    try:
        query_value(conn, "SELECT count(*) FROM sqlite_schema")
    except (apsw.NotADBError, apsw.CorruptError) as exc:
        conn.close()
        if key is not None and isinstance(exc, apsw.NotADBError):
            raise wrong_key(path, "restored") from None
        raise CorruptDatabaseError(f"{path} is damaged ({exc}); nothing restored") from exc
    except apsw.CantOpenError as exc:
        conn.close()
        raise BackupError(
            f"cannot read {path} ({exc}): if it is a live database, snapshot it with "
            "`tiered-memory backup` and restore the snapshot"
        ) from exc
    return conn


def _mtime_and_name(path: Path) -> tuple[int, str]:
    """Sort key: modified time, then name (a file that vanished meanwhile sorts first)."""
    try:
        return path.stat().st_mtime_ns, path.name
    except FileNotFoundError:
        return 0, path.name


def _same_file(a: Path, b: Path) -> bool:
    """Both names exist and are one file (the same inode)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0

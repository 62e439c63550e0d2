"""The manager's file as a whole: backup, restore, JSON export and import, integrity
checks, maintenance and rekeying (the backend's file operations), with RAM reloaded
whenever the file's content is replaced underneath it."""

from __future__ import annotations

import os
from pathlib import Path

from persistence import (
    Backend,
    ImportResult,
    IntegrityResult,
    MaintenanceResult,
    Progress,
    RestoreResult,
    require_bool,
    require_callable,
    require_path,
)
from tiered_memory.config import MemoryConfig
from tiered_memory.embedding.queue import EmbeddingQueue
from tiered_memory.memories import Memories
from tiered_memory.redaction import DEFAULT_REDACTOR, document_scrubber


class FileOperations:
    """Whole-file work on one manager's store (see the module docstring)."""

    def __init__(
        self,
        backend: Backend,
        memories: Memories,
        embeddings: EmbeddingQueue,
        config: MemoryConfig,
    ) -> None:
        self._backups = backend.backups
        self._memories = memories
        self._embeddings = embeddings
        self._redactor = config.active_redactor  # what writes go through (None: off)
        self._refusing = config.redactor or DEFAULT_REDACTOR  # for refuse_secrets=True

    @property
    def encrypted(self) -> bool:
        """True when the file was opened with a key."""
        return self._backups.encrypted

    def backup(
        self, target: str | os.PathLike[str] | None, keep: int | None, progress: Progress | None
    ) -> Path:
        """A verified snapshot of the file."""
        self._memories.require_open()
        require_path(target, "target", allow_none=True)
        require_callable(progress, "progress", allow_none=True)
        return self._backups.create_backup(target, keep=keep, progress=progress)

    def restore(self, source: str | os.PathLike[str]) -> RestoreResult:
        """Replace everything with a snapshot's content, all or nothing."""
        self._memories.require_open()
        require_path(source, "source")
        result = self._backups.restore_backup(source)
        self.reload()
        return result

    def export_json(self, target: str | os.PathLike[str] | None, *, overwrite: bool,
                    progress: Progress | None, allow_plaintext: bool) -> Path:  # fmt: skip
        """Everything in one versioned JSON document."""
        self._memories.require_open()
        require_path(target, "target", allow_none=True)
        require_bool(overwrite, "overwrite")
        require_bool(allow_plaintext, "allow_plaintext")
        require_callable(progress, "progress", allow_none=True)
        return self._backups.export_json(
            target, overwrite=overwrite, progress=progress, allow_plaintext=allow_plaintext
        )

    def import_json(self, source: str | os.PathLike[str], mode: str, *,
                    progress: Progress | None, refuse_secrets: bool) -> ImportResult:  # fmt: skip
        """Load an export, all or nothing, through the redactor (or refusing secrets)."""
        self._memories.require_open()
        require_path(source, "source")
        require_bool(refuse_secrets, "refuse_secrets")
        require_callable(progress, "progress", allow_none=True)
        redactor = self._refusing if refuse_secrets else self._redactor
        scrub = None if redactor is None else document_scrubber(redactor, refuse=refuse_secrets)
        result = self._backups.import_json(source, mode, progress=progress, scrub=scrub)
        self.reload()
        return result

    def rekey(self, new_key: str | bytes) -> None:
        """Re-encrypt the file with ``new_key`` in one operation."""
        self._memories.require_open()
        self._backups.rekey(new_key)

    def check_integrity(self) -> IntegrityResult:
        """SQLite's checks plus the library's invariants."""
        self._memories.require_open()
        return self._backups.check_integrity()

    def maintain(self, vacuum: bool) -> MaintenanceResult:
        """Checkpoint, statistics, optional VACUUM, stale leftovers deleted."""
        self._memories.require_open()
        require_bool(vacuum, "vacuum")
        return self._backups.run_maintenance(vacuum=vacuum)

    def reload(self) -> None:
        """Drop RAM state after the file's content was replaced underneath it."""
        self._memories.reload()
        self._embeddings.recheck()


class FileCalls:
    """The manager's backup, restore, export, import, rekey, integrity and maintenance
    calls; the manager provides its :class:`FileOperations`."""

    _files: FileOperations

    def backup(self, target: str | os.PathLike[str] | None = None, *, keep: int | None = None,
               progress: Progress | None = None) -> Path:  # fmt: skip
        """A verified ``VACUUM INTO`` snapshot (timestamped in the backup directory by default)."""
        return self._files.backup(target, keep, progress)

    def restore(self, source: str | os.PathLike[str]) -> RestoreResult:
        """Replace everything with a snapshot's content, all or nothing."""
        return self._files.restore(source)

    def export_json(self, target: str | os.PathLike[str] | None = None, *, overwrite: bool = False,
                    progress: Progress | None = None,
                    allow_plaintext: bool = False) -> Path:  # fmt: skip
        """Write everything to one versioned JSON document; return its path (an encrypted
        file needs ``allow_plaintext=True``: the JSON is plain text)."""
        return self._files.export_json(
            target, overwrite=overwrite, progress=progress, allow_plaintext=allow_plaintext
        )

    @property
    def encrypted(self) -> bool:
        """True when the file was opened with a key."""
        return self._files.encrypted

    def rekey(self, new_key: str | bytes) -> None:
        """Re-encrypt the file with ``new_key`` in one operation; a crash leaves it under
        exactly one of the two keys. Other processes must not have the file open."""
        self._files.rekey(new_key)

    def import_json(self, source: str | os.PathLike[str], mode: str = "replace", *,
                    progress: Progress | None = None,
                    refuse_secrets: bool = False) -> ImportResult:  # fmt: skip
        """Load an export, all or nothing (``mode`` is ``"replace"`` or ``"merge"``).

        The redactor runs over it first, as over any write; ``refuse_secrets=True`` raises
        :class:`~persistence.SecretsFoundError` at the first secret instead (nothing written).
        """
        return self._files.import_json(
            source, mode, progress=progress, refuse_secrets=refuse_secrets
        )

    def check_integrity(self) -> IntegrityResult:
        """SQLite's checks plus the library's invariants, with every problem found."""
        return self._files.check_integrity()

    def maintain(self, *, vacuum: bool = False) -> MaintenanceResult:
        """Checkpoint the WAL, refresh statistics, optionally VACUUM; delete stale leftovers
        of interrupted backups and restores."""
        return self._files.maintain(vacuum)

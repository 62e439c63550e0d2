"""The file plumbing both engines' backups and JSON files share: timestamped names, a
private temporary file beside the final name, publishing it without replacing anything,
fsync, and the checks of an import's arguments.

What differs stays with the engine: SQLite's snapshots are ``VACUUM INTO`` copies
(:mod:`persistence.sqlite.backup`), PostgreSQL's consistent JSON documents
(:mod:`persistence.postgres.files`).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from persistence import leftovers
from persistence.errors import BackupError, InvalidInputError, MissingFileError
from persistence.transfer.json_import import Mode

STAMP = "%Y%m%dT%H%M%SZ"


def stamp(now_ms: int) -> str:
    """The UTC time ``now_ms`` (epoch milliseconds) as a snapshot name has it."""
    return time.strftime(STAMP, time.gmtime(now_ms / 1000))


def timestamped(directory: Path, stem: str, now_ms: int, suffix: str) -> Path:
    """``STEM-STAMP.SUFFIX`` in ``directory``, or ``STEM-STAMP-N.SUFFIX`` with the first
    N not taken."""
    at = stamp(now_ms)
    candidate = directory / f"{stem}-{at}{suffix}"
    n = 1
    while candidate.exists():
        n += 1
        candidate = directory / f"{stem}-{at}-{n}{suffix}"
    return candidate


def named_like_snapshots(directory: Path, stem: str, suffix: str) -> list[Path]:
    """The files of ``directory`` named like ``stem``'s timestamped snapshots (unordered)."""
    pattern = re.compile(rf"^{re.escape(stem)}-\d{{8}}T\d{{6}}Z(-\d+)?{re.escape(suffix)}$")
    return [p for p in directory.iterdir() if pattern.match(p.name)]


def partial_beside(final: Path) -> AbstractContextManager[Path]:
    """A new, empty, private, locked temporary file next to ``final`` (unique per call),
    deleted when the block ends unless it was published (see
    :mod:`persistence.leftovers`)."""
    return leftovers.held_temp(final.parent, f".{final.name}.", ".partial")


def publish(partial: Path, final: Path, another: Callable[[], Path] | None = None) -> Path:
    """Give ``partial`` its final name without ever replacing an existing file; return
    the name it got (its directory fsynced). If ``final`` was taken meanwhile (a backup
    in another thread or process, the same second), ``another`` picks a new name, else
    it is an error."""
    while True:
        try:
            os.link(partial, final)
            break
        except FileExistsError:
            if another is None:
                raise BackupError(f"{final} appeared meanwhile: nothing was overwritten") from None
            final = another()
    partial.unlink()
    fsync_path(final.parent)
    return final


def fsync_path(path: Path) -> None:
    """fsync a file, or a directory so that a rename in it is durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def import_mode(mode: str) -> Mode:
    """An import's mode, checked: one of the two."""
    if mode not in ("replace", "merge"):
        raise InvalidInputError(f"mode must be 'replace' or 'merge', got {mode!r}")
    return "replace" if mode == "replace" else "merge"


def existing_file(source: str | os.PathLike[str]) -> Path:
    """``source`` as a path, refused unless it names a file."""
    path = Path(source)
    if not path.is_file():
        raise MissingFileError(f"{path} does not exist")
    return path

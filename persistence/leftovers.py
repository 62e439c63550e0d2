"""Temporary files of snapshots, exports and restores: locked while in use, removed when stale.

A backup writes ``.NAME.xxxxxxxx.partial`` next to its target and a restore stages
``.restore-xxxxxxxx.db`` next to the database; SQLite adds ``-journal``, ``-wal`` and
``-shm`` files beside them. A process killed meanwhile leaves them behind. Whoever
creates one holds an exclusive ``flock`` on it for as long as it exists, and deletes it
with its sidecars before letting go. :func:`remove_stale` deletes only
files whose lock it can take without waiting, so a backup or restore under way in any
process (or thread) is never touched, however long it runs. SQLite's own locks are POSIX
``fcntl`` locks, independent of ``flock`` on Linux and macOS, so neither disturbs the other.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger("tiered_memory")

SIDECARS = ("-journal", "-wal", "-shm")
_RANDOM = r"[A-Za-z0-9_]{8}"  # tempfile.mkstemp's random part
PATTERN = re.compile(rf"^\.(?:.+\.{_RANDOM}\.partial|restore-{_RANDOM}\.db)$")
"""Names of the temporary files :func:`held_temp` makes (sidecars are matched apart)."""


@contextmanager
def held_temp(directory: Path, prefix: str, suffix: str) -> Iterator[Path]:
    """A new, empty, private file in ``directory``, locked while the block runs.

    On leaving (normally or by an exception) the file and its SQLite sidecars are
    deleted, then the lock is released. If a cleaner in another process deleted the
    file between its creation and the lock, a new one is made.
    """
    while True:
        fd, name = tempfile.mkstemp(dir=directory, prefix=prefix, suffix=suffix)
        path = Path(name)
        if _lock(fd, wait=True) and _same_file(path, fd):
            break
        os.close(fd)  # a cleaner took it first: that file is gone, try another name
    try:
        yield path
    finally:
        try:
            _remove_with_sidecars(path)
        finally:
            os.close(fd)


def remove_stale(directories: Iterable[Path]) -> list[Path]:
    """Delete leftovers no live process holds in ``directories``; return what was deleted.

    A leftover is a file named like :data:`PATTERN` whose lock is free, together with its
    sidecars, or a sidecar whose main file is gone. Missing directories and files that
    vanish meanwhile are skipped; a file that cannot be deleted is logged and kept.
    """
    removed: list[Path] = []
    for directory in dict.fromkeys(directories):
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            path = directory / name
            if PATTERN.match(name):
                removed += _remove_if_free(path)
                continue
            main = _main_of(name)
            if main is not None and PATTERN.match(main) and not (directory / main).exists():
                removed += _unlink([path])
    if removed:
        log.info("removed %d leftover file(s) of interrupted backups/restores", len(removed))
    return removed


def _remove_if_free(path: Path) -> list[Path]:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return []  # gone meanwhile, or not ours to read
    try:
        if not _lock(fd, wait=False) or not _same_file(path, fd):
            return []  # a live backup or restore holds it (or it was replaced meanwhile)
        return _remove_with_sidecars(path)
    finally:
        os.close(fd)


def _remove_with_sidecars(path: Path) -> list[Path]:
    return _unlink([Path(f"{path}{s}") for s in SIDECARS] + [path])


def _unlink(paths: list[Path]) -> list[Path]:
    removed = []
    for path in paths:
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            log.warning("could not remove leftover %s: %s", path, exc)
            continue
        removed.append(path)
    return removed


def _main_of(name: str) -> str | None:
    for sidecar in SIDECARS:
        if name.endswith(sidecar):
            return name[: -len(sidecar)]
    return None


def _lock(fd: int, *, wait: bool) -> bool:
    """Take an exclusive ``flock`` on ``fd``; False if another holder has it (no wait)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def _same_file(path: Path, fd: int) -> bool:
    """True if ``path`` still names the file open as ``fd`` (not deleted or replaced)."""
    try:
        named = path.stat()
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)

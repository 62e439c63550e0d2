"""Backup rotation (``backup(keep=N)``) that concurrent backups cannot trip over.

Backups from many threads and processes into one directory each publish their snapshot
and prune the old ones while holding an exclusive ``flock`` on the directory itself (no
lock file is left behind). Publishing (a hard link to the final name) sets the snapshot's
``ctime``, so within the lock "newest" means "published last" and the caller's own fresh
snapshot is always among the ``keep`` newest: no backup removes another's snapshot that
is newer than the ones it keeps, and a file that vanished meanwhile is skipped. Names are
chosen under the lock too (:func:`next_name`), after every name published before, so a
pruned snapshot's name is never given to a new one.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger("tiered_memory")


@contextmanager
def locked(directory: Path) -> Iterator[None]:
    """Hold the directory's rotation lock (waiting for other backups) for the block."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def next_name(directory: Path, stem: str, stamp: str, suffix: str) -> Path:
    """``STEM-STAMP.SUFFIX``, or ``STEM-STAMP-N.SUFFIX`` with N above every number taken
    for that stamp (call it under :func:`locked`, with a stamp of now)."""
    pattern = re.compile(rf"^{re.escape(stem)}-{re.escape(stamp)}(?:-(\d+))?{re.escape(suffix)}$")
    taken = [int(m.group(1) or 1) for name in os.listdir(directory) if (m := pattern.match(name))]
    n = max(taken, default=0) + 1
    return directory / (f"{stem}-{stamp}{suffix}" if n == 1 else f"{stem}-{stamp}-{n}{suffix}")


def by_publication(snapshots: list[Path]) -> list[Path]:
    """``snapshots`` oldest-published first (``ctime``, then name); vanished ones left out."""
    stamped = []
    for path in snapshots:
        try:
            stamped.append((path.stat().st_ctime_ns, path.name, path))
        except FileNotFoundError:
            continue
    return [path for _, _, path in sorted(stamped)]


def prune(snapshots: list[Path], keep: int, own: Path) -> list[Path]:
    """Delete all but the ``keep`` newest-published of ``snapshots``, never ``own``;
    return what was deleted. Call it under :func:`locked`."""
    removed = []
    for old in by_publication(snapshots)[:-keep]:
        if old == own:
            continue
        try:
            old.unlink()
        except FileNotFoundError:
            continue
        removed.append(old)
    if removed:
        log.info("backup rotation removed %d old snapshot(s)", len(removed))
    return removed

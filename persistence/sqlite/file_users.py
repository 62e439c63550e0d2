"""Who else has a database file open: for operations that need the file to themselves.

Re-encrypting a file (``rekey``) or copying a snapshot with another salt into it (the
restore of an encrypted file) leaves every other connection holding a key for pages that
are no longer there: its next read fails as if the file were damaged. Such operations
first ask :func:`require_sole_user`, which refuses with :class:`DatabaseInUseError` when

- another :class:`~persistence.sqlite.database.Database` of this process has the file
  open (:func:`register` counts them), or
- another process holds one of SQLite's locks on the file or its ``-shm`` index: every
  WAL-mode connection that has read the file holds a shared lock on the index's
  "dead man switch" byte and on the database file for as long as it is open. Linux lists
  them in ``/proc/locks``; elsewhere only this process's handles are known.

A process that opens the file between the check and the operation is not seen: the check
refuses what is open now, it does not lock others out.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from pathlib import Path

from persistence.errors import DatabaseInUseError

_PROC_LOCKS = Path("/proc/locks")
_open_here: Counter[str] = Counter()
_guard = threading.Lock()


def _key(path: str) -> str:
    return os.path.realpath(path)


def register(path: str) -> None:
    """Count one more handle of this process on ``path`` (at open)."""
    with _guard:
        _open_here[_key(path)] += 1


def unregister(path: str) -> None:
    """Count one handle fewer (at close)."""
    with _guard:
        key = _key(path)
        _open_here[key] -= 1
        if _open_here[key] <= 0:
            del _open_here[key]


def handles_here(path: str) -> int:
    """How many handles of this process have ``path`` open."""
    with _guard:
        return _open_here.get(_key(path), 0)


def other_processes(path: str) -> list[int]:
    """Ids of other processes holding a lock on ``path`` or its ``-shm`` (Linux; ``[]``
    where ``/proc/locks`` cannot be read)."""
    inodes = set()
    for name in (path, f"{path}-shm"):
        try:
            st = os.stat(name)
        except OSError:
            continue
        inodes.add((os.major(st.st_dev), os.minor(st.st_dev), st.st_ino))
    if not inodes:
        return []
    try:
        lines = _PROC_LOCKS.read_text().splitlines()
    except OSError:
        return []
    me, found = os.getpid(), set()
    for line in lines:
        fields = line.split()
        if "->" in fields:  # a waiter, listed after the lock it waits for
            fields.remove("->")
        if len(fields) < 6:
            continue
        try:
            pid = int(fields[4])
            major, minor, inode = fields[5].split(":")
            where = (int(major, 16), int(minor, 16), int(inode))
        except ValueError:
            continue
        if where in inodes and pid not in (me, 0, -1):
            found.add(pid)
    return sorted(found)


def require_sole_user(path: str, doing: str, *, own_handles: int = 1) -> None:
    """Raise :class:`DatabaseInUseError` unless only the caller (``own_handles`` handles of
    this process) has ``path`` open; ``doing`` says what was refused."""
    here = handles_here(path) - own_handles
    others = other_processes(path)
    if here <= 0 and not others:
        return
    who = []
    if others:
        who.append(f"process(es) {', '.join(map(str, others))}")
    if here > 0:
        who.append(f"{here} other handle(s) in this process")
    raise DatabaseInUseError(
        f"{doing} needs {path} to itself, but {' and '.join(who)} have it open: close "
        "them (stop the agents using it) and try again; nothing was changed"
    )

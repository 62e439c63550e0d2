"""A recording VFS: every write, sync, truncate and delete of one database's files, and
those files as a power cut would leave them at any sync point.

:class:`RecordingVFS` is an APSW VFS written in Python over the process's default VFS
(SQLite3 Multiple Ciphers' unix VFS here); it registers itself as the default, so every
connection the library opens (the writer, its checkpoint thread, readers, restores and
imports) goes through it without any hook in the library. It records the operations on
the files whose names start with the watched database path (the database, ``-wal``,
``-journal``) into a :class:`Recording`; other files (snapshots, exports) pass through
unrecorded. The ``-shm`` index is shared memory, not a file SQLite reads after a crash,
so it is left out.

The power-cut model (:meth:`Recording.cuts`): at each sync point, just before the sync
takes effect, each file holds what it held at its own last sync; everything written (or
truncated) since is dropped, except that the last unsynced write of each file is torn:
half of its bytes new, half old (which half alternates from one cut to the next). A
delete takes effect at once (SQLite deletes the WAL only after checkpointing all of it,
so a resurrected WAL would hold nothing new either way). A last cut, at the end of the
recording, has no sync after it.

Test tooling, not part of the package: it keeps every byte written in memory and costs a
Python call per I/O, which no user wants in production.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

WRITE, SYNC, TRUNCATE, DELETE = "w", "s", "t", "d"


@dataclass(frozen=True, slots=True)
class Event:
    kind: str
    path: str
    offset: int = 0  # a write's offset, a truncate's new size
    data: bytes = b""


@dataclass(slots=True)
class Recording:
    """The events in order; ``watched`` is the database path whose files are recorded."""

    watched: str
    events: list[Event] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wants(self, path: str | None) -> bool:
        return path is not None and path.startswith(self.watched) and not path.endswith("-shm")

    def add(self, event: Event) -> None:
        with self.lock:
            self.events.append(event)

    def mark(self) -> int:
        """The number of events so far: an operation that returns now is acknowledged by
        every cut at or after this index."""
        with self.lock:
            return len(self.events)

    def sync_points(self) -> list[int]:
        """Index of every sync event, then the end of the recording."""
        points = [i for i, e in enumerate(self.events) if e.kind == SYNC]
        return [*points, len(self.events)]

    def cuts(
        self, wanted: set[int] | None = None, tear: str = "alternate"
    ) -> Iterator[tuple[int, dict[str, bytes]]]:
        """``(index, {path: bytes})`` for each sync point (or each one in ``wanted``): the
        files as a power cut just before that event would leave them (see module doc).
        ``tear``: which half of a torn write reached the disk (``"front"``, ``"back"``,
        or ``"alternate"`` from one cut to the next)."""
        durable: dict[str, bytearray] = {}
        pending: dict[str, list[Event]] = {}
        number = 0
        for index, event in enumerate([*self.events, Event(SYNC, "")]):
            if event.kind == SYNC:
                if wanted is None or index in wanted:
                    front = number % 2 == 0 if tear == "alternate" else tear == "front"
                    yield index, _cut(durable, pending, torn_front=front)
                number += 1
                if event.path in durable:
                    for write in pending.pop(event.path, []):
                        _apply(durable[event.path], write)
            elif event.kind == DELETE:
                durable.pop(event.path, None)
                pending.pop(event.path, None)
            else:
                durable.setdefault(event.path, bytearray())
                pending.setdefault(event.path, []).append(event)


def _apply(image: bytearray, event: Event, limit: int | None = None) -> None:
    """Apply a write (its first ``limit`` bytes) or a truncate to ``image``."""
    if event.kind == TRUNCATE:
        del image[event.offset :]
        return
    data = event.data if limit is None else event.data[:limit]
    end = event.offset + len(data)
    if len(image) < event.offset:
        image.extend(bytes(event.offset - len(image)))
    image[event.offset : end] = data


def _cut(
    durable: dict[str, bytearray], pending: dict[str, list[Event]], torn_front: bool
) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for path, synced in durable.items():
        image = bytearray(synced)
        writes = [e for e in pending.get(path, []) if e.kind == WRITE]
        if writes:
            last = writes[-1]
            half = len(last.data) // 2
            if torn_front:  # the first half reached the disk
                _apply(image, last, limit=half)
            else:  # the second half did
                _apply(image, Event(WRITE, path, last.offset + half, last.data[half:]))
        files[path] = bytes(image)
    return files


def write_cut(files: dict[str, bytes], watched: str, target: Path) -> Path:
    """Write a cut's files under ``target`` with the same suffixes; return the database."""
    target.mkdir(parents=True, exist_ok=True)
    database = target / Path(watched).name
    for path, data in files.items():
        (target / (database.name + path[len(watched) :])).write_bytes(data)
    return database


class RecordingFile(apsw.VFSFile):
    """A file of the base VFS whose writes, syncs and truncates are recorded."""

    def __init__(self, base: str, name: Any, flags: list[int], recording: Recording) -> None:
        path = name.filename() if isinstance(name, apsw.URIFilename) else name
        self.path = path if recording.wants(path) else None
        self.recording = recording
        super().__init__(base, name, flags)

    def xWrite(self, data: bytes, offset: int) -> None:  # noqa: N802 (APSW's names)
        if self.path is not None:
            self.recording.add(Event(WRITE, self.path, offset, bytes(data)))
        super().xWrite(data, offset)

    def xSync(self, flags: int) -> None:  # noqa: N802
        super().xSync(flags)
        if self.path is not None:
            self.recording.add(Event(SYNC, self.path))

    def xTruncate(self, newsize: int) -> None:  # noqa: N802
        if self.path is not None:
            self.recording.add(Event(TRUNCATE, self.path, newsize))
        super().xTruncate(newsize)


class RecordingVFS(apsw.VFS):
    """The process's default VFS while registered (use as a context manager)."""

    def __init__(self, watched: Path, name: str = "power-cut-recorder") -> None:
        self.base = apsw.vfs_names()[0]
        self.recording = Recording(str(watched))
        super().__init__(name, self.base, makedefault=True)

    def xOpen(self, name: Any, flags: list[int]) -> RecordingFile:  # noqa: N802
        return RecordingFile(self.base, name, flags, self.recording)

    def xDelete(self, filename: str, syncdir: bool) -> None:  # noqa: N802
        if self.recording.wants(filename):
            self.recording.add(Event(DELETE, filename))
        super().xDelete(filename, syncdir)

    def __enter__(self) -> RecordingVFS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.unregister()

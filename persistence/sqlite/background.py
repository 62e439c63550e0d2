"""The threads beside one file's writer: the WAL checkpointer and the jobs registered
with the engine (the keyword index's idle merger), started with the writer and stopped
before it closes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

import apsw

from persistence.sqlite.checkpointer import Checkpointer
from persistence.sqlite.connection import ConnectionOptions


class BackgroundJob(Protocol):
    """Work in a thread of its own beside the writer."""

    def start(self, writer: apsw.Connection) -> None:
        """Start, now that ``writer`` is open (and writable)."""

    def stop(self, writer: apsw.Connection | None) -> None:
        """End before ``writer`` closes; twice is harmless."""


class Background:
    """The checkpointer (persistence/sqlite/checkpointer.py) of a file with automatic
    checkpoints, and the registered :class:`BackgroundJob` s."""

    def __init__(self, path: str, in_memory: bool) -> None:
        self.path = path
        self.in_memory = in_memory
        self.jobs: list[BackgroundJob] = []
        self.checkpointer: Checkpointer | None = None

    @property
    def running(self) -> bool:
        """True while the checkpointer's thread runs."""
        checkpointer = self.checkpointer
        return checkpointer is not None and checkpointer.running

    def start(self, writer: apsw.Connection, options: ConnectionOptions) -> None:
        """The checkpointer (a file's, with ``wal_autocheckpoint`` on), then the jobs: only
        beside a checkpointer, since what they write is checkpointed by it (a file opened
        with ``wal_autocheckpoint=0`` gets no background work at all, as before the
        jobs had threads of their own)."""
        self.start_checkpointer(writer, options)
        if self.checkpointer is None:
            return
        for job in self.jobs:
            job.start(writer)

    def stop(self, writer: apsw.Connection | None) -> None:
        """The jobs first (their work may ask for a checkpoint), then the checkpointer."""
        for job in self.jobs:
            job.stop(writer)
        self.stop_checkpointer(writer)

    def start_checkpointer(self, writer: apsw.Connection, options: ConnectionOptions) -> None:
        """WAL checkpoints in a thread of their own, with the connection ``options``."""
        if not self.in_memory and options.wal_autocheckpoint > 0:
            self.checkpointer = Checkpointer(self.path, options, options.wal_autocheckpoint)
            self.checkpointer.start(writer)

    def stop_checkpointer(self, writer: apsw.Connection | None) -> bool:
        """Stop the checkpointer; True if there was one."""
        checkpointer, self.checkpointer = self.checkpointer, None
        if checkpointer is None:
            return False
        checkpointer.stop(writer)
        return True

    def request_checkpoint(self) -> None:
        """Have the checkpointer copy the WAL soon (if there is one)."""
        checkpointer = self.checkpointer
        if checkpointer is not None:
            checkpointer.request()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Hold the checkpointer off (see :meth:`Checkpointer.paused`)."""
        checkpointer = self.checkpointer
        if checkpointer is None:
            yield
            return
        with checkpointer.paused():
            yield

"""WAL checkpoints off the writer's commit path: a background thread of the store.

SQLite's automatic checkpoint runs inside the ``COMMIT`` that crosses
``wal_autocheckpoint`` pages: that commit copies about a thousand pages into the
database file and syncs both files (two ``fsync`` calls, 4-10 ms each on the disks we
measured), so one write in every 20-40 took 10-20 ms while the others took 0.5 ms.

Here the writer's commit only looks at the WAL's length (a WAL hook) and wakes a
thread, which checkpoints through a connection of its own in ``PASSIVE`` mode: it takes
no lock the writer needs, so commits go on meanwhile. Nothing about durability changes:
a commit is in the WAL when it returns (a SIGKILL loses nothing), the checkpoint syncs
as the writer's would (its connection has the same ``synchronous`` setting), and
SQLite's checkpoint is itself safe against a crash at any point.

The WAL restarts from its beginning only when a write transaction begins after a
checkpoint copied all of it; a writer that never pauses has begun its next transaction
before the thread's checkpoint ends, and keeps appending. So once the WAL is longer
than ``RESTART_FACTOR`` times the threshold, the thread starts no new checkpoint and the
writer's hook checkpoints once itself, between two transactions, as soon as the thread's
last one has ended: the thread has copied all but its last round's commits, so this
copies little (its cost is mostly the two syncs), and the next write starts the WAL
over. That comes once per a few hundred commits of a writer that never stops; a writer
with gaps never pays it, as the thread catches up in them. A single large commit (a
batch) that takes the WAL past that length is left to the thread first: the writer
restarts the WAL only once the thread has copied all but about ``wal_autocheckpoint``
pages of it (so the batch's caller does not wait for its thousands of pages to be
copied), or when the WAL passes ``HARD_FACTOR`` times the threshold.

The keyword index's merges while the writer rests are a job of their own
(persistence/sqlite/keyword_index.py); they commit on the writer's connection, so this
hook sees them like any commit, and after a run of merges :meth:`Checkpointer.request`
copies what they wrote.

Failures are logged and the next wake tries again (a full disk, say); if the thread
cannot run (its connection failed to open, ``FAILURES_TO_STOP`` checkpoints failed in a
row), the writer checkpoints inline again, as SQLite would.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import apsw

from persistence.sqlite.connection import ConnectionOptions, connect
from persistence.worker import Worker

logger = logging.getLogger("tiered_memory.checkpointer")

RESTART_FACTOR = 8
"""Past this many times ``wal_autocheckpoint`` pages the writer checkpoints once itself,
between two transactions, so that the WAL restarts."""

HARD_FACTOR = 4 * RESTART_FACTOR
"""Past this many times ``wal_autocheckpoint`` pages the writer checkpoints itself even
when the thread has not copied most of the WAL yet (a thread slower than the writer),
waiting up to ``HARD_WAIT_S`` for a checkpoint of the thread's that is under way."""

HARD_WAIT_S = 0.25
"""How long a writer past the hard length waits for the thread's checkpoint to end (a
busy machine slows the thread; skipping, the WAL grew by more commits until the next
one found the checkpoint lock free). Past it, the next commit tries again."""

FAILURES_TO_STOP = 3
"""After this many failed checkpoints in a row the thread ends (logged) and the writer
checkpoints inline again: a connection that cannot checkpoint should not let the WAL grow."""


class Checkpointer:
    """Checkpoint ``path``'s WAL in a thread of its own (see the module docstring).

    :meth:`start` installs the WAL hook on ``writer`` and starts the thread; :meth:`stop`
    ends it (before the writer closes). ``pages`` is the WAL length that triggers a
    checkpoint (``wal_autocheckpoint``).
    """

    def __init__(self, path: str, options: ConnectionOptions, pages: int) -> None:
        self.path = path
        self.options = options
        self.pages = pages
        self._checkpoint_due = False
        self.restart_pages = pages * RESTART_FACTOR
        self.hard_pages = pages * HARD_FACTOR
        self._worker = Worker(
            f"tiered-memory checkpointer {path}",
            self._job,
            logger=logger,
            what=f"background WAL checkpoint of {path}",
            level=logging.WARNING,
            max_failures=FAILURES_TO_STOP,
            stopped_note="; the writer checkpoints in its commits again",
            closed=self._closed,
        )
        self._wake = self._worker.notify
        self._conn: apsw.Connection | None = None
        self._copied = 0  # frames the last checkpoint copied (the WAL's length then)
        self._copying = False  # the thread's checkpoint is under way (_copied is old)
        self._restart_due = False
        self._working = threading.Lock()  # held by the thread during each checkpoint
        self.checkpoints = 0  # by the thread
        self.restarts = 0  # the writer's own checkpoints that let the WAL restart

    @property
    def running(self) -> bool:
        """True while the thread checkpoints (False after :meth:`stop` or a failure)."""
        return self._worker.running

    def start(self, writer: apsw.Connection) -> None:
        """Open the thread's connection, hook ``writer``'s commits and start the thread.
        Without a connection the writer keeps checkpointing inline (logged)."""
        try:
            self._conn = connect(self.path, self.options)
            self._conn.set_busy_timeout(0)  # never waits for the writer
        except Exception as exc:  # the file stays usable: inline checkpoints instead
            logger.warning("WAL checkpoints stay in the writer's commits: %s", exc)
            return
        writer.set_wal_hook(self._committed)
        self._worker.start()

    def stop(self, writer: apsw.Connection | None) -> None:
        """Stop the thread, close its connection and give ``writer`` SQLite's own
        checkpoints back. Twice is harmless."""
        self._worker.stop()  # (no bound: its connection closes next)
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except apsw.Error as exc:
                logger.warning("closing the checkpointer's connection: %s", exc)
        if writer is not None:
            try:
                writer.set_wal_hook(None)
                writer.wal_autocheckpoint(self.pages)
            except apsw.Error as exc:
                logger.debug("writer already closed: %s", exc)

    def request(self) -> None:
        """Copy the WAL soon, whatever its length (after a run of idle work)."""
        self._checkpoint_due = True
        self._wake()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No background checkpoint inside: the one under way ends first. For work that
        needs the checkpoint lock itself (``wal_checkpoint(TRUNCATE)``, which SQLite
        refuses as busy while another connection checkpoints) or replaces the file."""
        with self._working:
            yield

    def _committed(self, conn: apsw.Connection, name: str, pages: int) -> int:
        """WAL hook, in the writer's thread after each commit: ``pages`` is the WAL's
        length. Must not raise (the commit has happened)."""
        try:
            if pages < self._copied:
                self._copied = 0  # the WAL started over
            if not self._worker.running:
                if pages - self._copied >= self.pages:
                    self._inline(conn)
            elif pages >= self.restart_pages and (
                pages - self._copied < self.pages or pages >= self.hard_pages
            ):
                self._restart_due = True  # the thread starts no checkpoint meanwhile
                if self._inline(conn, wait=pages >= self.hard_pages):
                    self._restart_due = False
                    self.restarts += 1
            elif pages - self._copied >= self.pages and not self._copying:
                # (While the thread copies, _copied is the last round's: the commits
                # meanwhile are the next round's, due once they reach the threshold.
                # Marked due then, they made a second checkpoint, and two syncs, of a
                # few pages after every round: 1.6 checkpoints per threshold measured.)
                self._checkpoint_due = True
                self._wake()
        except Exception:
            logger.exception("WAL hook failed (the commit stands)")
        return apsw.SQLITE_OK

    def _inline(self, conn: apsw.Connection, *, wait: bool = False) -> bool:
        """The writer's own checkpoint, between two transactions; False if it could not
        run (the thread was checkpointing: the next commit tries again). ``wait``: first
        wait up to ``HARD_WAIT_S`` for the thread's checkpoint under way to end."""
        held = wait and self._working.acquire(timeout=HARD_WAIT_S)
        try:
            _, self._copied = conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
        except apsw.Error as exc:
            logger.debug("inline checkpoint skipped: %s", exc)
            return False
        finally:
            if held:
                self._working.release()
        return True

    def _closed(self) -> bool:
        return self._conn is None

    def _job(self) -> None:
        """The thread's work when woken: a checkpoint, if one is due."""
        conn = self._conn
        if conn is None or not self._checkpoint_due or self._restart_due:
            return  # (a restart due: the writer checkpoints next, so that the WAL restarts)
        self._checkpoint_due = False
        with self._working:
            if self._worker.stopping:
                return
            self._copying = True
            try:
                self._checkpoint(conn)
            finally:
                self._copying = False

    def _checkpoint(self, conn: apsw.Connection) -> None:
        """One ``PASSIVE`` checkpoint (busy when another connection checkpoints: the
        next wake tries again)."""
        try:
            _, self._copied = conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
        except apsw.BusyError:
            return
        self.checkpoints += 1

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

The same thread does the store's idle work (``idle_work``: merging the keyword index's
segments, which FTS5 would otherwise do in bursts inside commits): once the writer has
committed nothing for ``idle_s``, it runs ``idle_work`` until that reports nothing left,
the writer commits again, or the store closes. The engine runs each step as a short
transaction on the writer's own connection, under the writer's lock (so the writer
does not take it for another process's change); a step that finds the lock taken is
skipped (the writer comes first), and a writer that arrives during one waits a few ms.

Failures are logged and the next wake tries again (a full disk, say); if the thread
cannot run (its connection failed to open, ``FAILURES_TO_STOP`` checkpoints failed in a
row), the writer checkpoints inline again, as SQLite would.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import apsw

from persistence.sqlite.connection import ConnectionOptions, connect

logger = logging.getLogger("persistence.checkpointer")

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

IDLE_S = 0.05
"""The writer idle this long (no commit): the thread does the store's idle work."""

STEP_GAP_S = 0.001
"""Pause between two steps of idle work, in which a waiting writer gets its lock."""

IdleWork = Callable[[], bool]
"""One step of background work in a transaction of its own; True if it did something
(and more may be left). ``apsw.BusyError``: the writer is busy, try again at the next
idle time."""

FAILURES_TO_STOP = 3
"""After this many failed checkpoints in a row the thread ends (logged) and the writer
checkpoints inline again: a connection that cannot checkpoint should not let the WAL grow."""


class Checkpointer:
    """Checkpoint ``path``'s WAL in a thread of its own (see the module docstring).

    :meth:`start` installs the WAL hook on ``writer`` and starts the thread; :meth:`stop`
    ends it (before the writer closes). ``pages`` is the WAL length that triggers a
    checkpoint (``wal_autocheckpoint``).
    """

    def __init__(
        self,
        path: str,
        options: ConnectionOptions,
        pages: int,
        idle_work: IdleWork | None = None,
        idle_s: float | None = None,
    ) -> None:
        self.path = path
        self.options = options
        self.pages = pages
        self.idle_work = idle_work
        self.idle_s = IDLE_S if idle_s is None else idle_s
        self._last_commit = time.monotonic()
        self._idle_due = False  # a commit since the idle work last ran out
        self._checkpoint_due = False
        self.idle_steps = 0  # idle-work steps that did something
        self.restart_pages = pages * RESTART_FACTOR
        self.hard_pages = pages * HARD_FACTOR
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._thread_id: int | None = None
        self._alive = False  # the thread has started and not ended
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
        return self._thread is not None and self._alive and not self._stopping

    def start(self, writer: apsw.Connection) -> None:
        """Open the thread's connection, hook ``writer``'s commits and start the thread.
        Without a connection the writer keeps checkpointing inline (logged)."""
        try:
            self._conn = connect(self.path, self.options)
            self._conn.set_busy_timeout(0)  # idle work never waits for the writer
        except Exception as exc:  # the file stays usable: inline checkpoints instead
            logger.warning("WAL checkpoints stay in the writer's commits: %s", exc)
            return
        writer.set_wal_hook(self._committed)
        self._thread = threading.Thread(
            target=self._run, name=f"tiered-memory checkpointer {self.path}", daemon=True
        )
        self._alive = True
        self._thread.start()
        self._thread_id = self._thread.ident

    def stop(self, writer: apsw.Connection | None) -> None:
        """Stop the thread, close its connection and give ``writer`` SQLite's own
        checkpoints back. Twice is harmless."""
        self._stopping = True
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
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
            own = threading.get_ident() == self._thread_id  # idle work, not the writer
            if self.idle_work is not None and not own:
                self._last_commit = time.monotonic()
                if not self._idle_due:
                    self._idle_due = True
                    self._wake.set()
            if pages < self._copied:
                self._copied = 0  # the WAL started over
            if not self.running:
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
                self._wake.set()
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

    def _run(self) -> None:
        """The thread: checkpoint when woken, idle work when the writer rests, until
        stopped."""
        try:
            self._loop()
        finally:
            self._alive = False  # (read on every commit: cheaper than Thread.is_alive())

    def _loop(self) -> None:
        failures = 0
        while True:
            self._wake.wait(self.idle_s if self._idle_due else None)
            self._wake.clear()
            if self._stopping:
                return
            conn = self._conn
            if conn is None:
                return
            try:
                if self._checkpoint_due and not self._restart_due:
                    # (a restart due: the writer checkpoints next, so that the WAL restarts)
                    self._checkpoint_due = False
                    with self._working:
                        if not self._stopping:
                            self._copying = True
                            try:
                                self._checkpoint(conn)
                            finally:
                                self._copying = False
                if self._idle_due and self._idle_for() >= self.idle_s:
                    self._idle(conn)
                failures = 0
            except Exception as exc:  # a full disk, say: the next wake tries again
                failures += 1
                logger.warning("background WAL checkpoint of %s failed: %s", self.path, exc)
                if failures >= FAILURES_TO_STOP:
                    logger.error(
                        "background WAL checkpoints of %s stopped after %d failures; the "
                        "writer checkpoints in its commits again",
                        self.path,
                        failures,
                    )
                    self._stopping = True
                    return

    def _idle_for(self) -> float:
        return time.monotonic() - self._last_commit

    def _idle(self, conn: apsw.Connection) -> None:
        """Idle work, step by step, while the writer rests; then copy what it wrote."""
        work = self.idle_work
        if work is None:
            return
        did = False
        with self._working:
            while not self._stopping and self._idle_for() >= self.idle_s:
                try:
                    if not work():
                        self._idle_due = False  # nothing left until the next commit
                        break
                except apsw.BusyError:
                    break  # the writer is back: the next idle time goes on
                except Exception as exc:  # never stops the checkpoints
                    logger.warning("background idle work on %s failed: %s", self.path, exc)
                    self._idle_due = False  # tried again after the next commit
                    break
                did = True
                self.idle_steps += 1
                # Let a writer waiting for its lock take it now: re-taken at once, the
                # lock went to this thread step after step (stalls of 300 ms measured).
                time.sleep(STEP_GAP_S)
            if did and not self._stopping:
                self._checkpoint(conn)

    def _checkpoint(self, conn: apsw.Connection) -> None:
        """One ``PASSIVE`` checkpoint (busy when another connection checkpoints: the
        next wake tries again)."""
        try:
            _, self._copied = conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
        except apsw.BusyError:
            return
        self.checkpoints += 1

"""One background thread that runs a job when woken: the store's and the domain's
background work (WAL checkpoints, keyword-index merges, embedding, entity extraction)
each run on one.

:meth:`Worker.notify` wakes the thread (cheap: every commit may call it); without a
wake it runs the job anyway every ``wait_s()`` seconds (``None``: only when woken).
A job that raises is logged (through the caller's logger), counted (:attr:`failures`
in a row, :attr:`errors` in all) and, with a ``retry`` pause, run again after that
pause, doubling with each failure up to its longest; a wake does not shorten the pause
(a broken model must not spin). Without one, the next wake tries again. After
``max_failures`` in a row the worker ends (logged). An exception of the ``busy`` kinds
(another process holds the file) is no failure: the job runs again after ``busy_s``.
Neither is a failure while :meth:`stop` is under way or ``closed()`` says the work's
store has gone: the thread just ends. :meth:`stop` ends the thread after the job under
way, waiting for it (up to ``timeout``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Retry = tuple[float, float]
"""The first and the longest pause before a failed job runs again, in seconds."""


@contextmanager
def work_right(lock: threading.Lock | threading.RLock, in_transaction: bool) -> Iterator[None]:
    """A queue's right to work, held by ``lock``; never waited for inside a store
    transaction (``in_transaction``): the queue's background thread may hold it while it
    waits for that transaction's lock. The caller's transaction then does the work
    itself; what both do twice is stored once (the same vector, the same facts)."""
    if in_transaction:
        yield
        return
    with lock:
        yield


def backoff(retry: Retry, failures: int) -> float:
    """The pause after ``failures`` failures in a row: the first, doubled each time, at
    most the longest."""
    first, longest = retry
    return float(min(first * 2 ** (failures - 1), longest))


def _never() -> bool:
    return False


def _no_timeout() -> float | None:
    return None


class Worker:
    """A daemon thread named ``name`` that runs ``job`` (see the module docstring).

    ``what`` names the work in log lines ("background embedding on /path/agent.db").
    ``retry`` is read at each failure, so its owner may change it meanwhile (``None``:
    no pause, the next wake tries again). ``on_failure`` is called with each failure
    after it is logged (to count it in the file, say); it must not raise.
    """

    def __init__(
        self,
        name: str,
        job: Callable[[], object],
        *,
        logger: logging.Logger,
        what: str,
        wait_s: Callable[[], float | None] = _no_timeout,
        retry: Callable[[], Retry | None] | None = None,
        level: int = logging.ERROR,
        max_failures: int | None = None,
        stopped_note: str = "",
        busy: tuple[type[Exception], ...] = (),
        busy_s: float = 2.0,
        closed: Callable[[], bool] = _never,
        on_failure: Callable[[Exception], None] | None = None,
    ) -> None:
        self.name = name
        self._job = job
        self._log = logger
        self.what = what
        self._wait_s = wait_s
        self._retry = retry
        self._level = level
        self._max_failures = max_failures
        self._stopped_note = stopped_note
        self._busy = busy
        self._busy_s = busy_s
        self._closed = closed
        self._on_failure = on_failure
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.running = False
        """True while the thread runs and has not been asked to stop (a plain attribute:
        the WAL hook reads it on every commit)."""
        self.failures = 0  # in a row
        self.errors = 0  # in all

    @property
    def started(self) -> bool:
        """True from :meth:`start` to :meth:`stop` (also when the thread has ended)."""
        return self._thread is not None

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called (or the worker gave up), until :meth:`start`;
        a long job looks at it between its steps."""
        return self._stop.is_set()

    def start(self) -> None:
        """Start the thread; nothing if it runs. One that ended (it gave up) is replaced."""
        thread = self._thread
        if thread is not None and thread.is_alive():
            return
        self._stop.clear()
        self.failures = 0
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.running = True
        self._thread.start()

    def notify(self) -> None:
        """Wake the thread: there may be work."""
        if not self._wake.is_set():  # set already: the thread has not cleared it yet, and
            self._wake.set()  # looks for work after it does (Event.set costs ~1 µs)

    def sleep(self, seconds: float) -> bool:
        """Pause the job for ``seconds``, or until :meth:`stop`; True if stopping."""
        return self._stop.wait(seconds)

    def stop(self, timeout: float | None = None) -> bool:
        """End the thread after the job under way and wait for it, at most ``timeout``
        seconds (``None``: as long as it takes); False if it still runs then (logged).
        Twice is harmless."""
        self.running = False
        self._stop.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(timeout)
        if thread.is_alive():
            self._log.warning("%s did not stop within %.3g s", self.what, timeout)
            return False
        return True

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            self.running = False

    def _loop(self) -> None:
        while True:
            retry = self._retry() if self.failures and self._retry is not None else None
            if retry is not None:
                if self._stop.wait(backoff(retry, self.failures)):
                    return
            else:
                self._wake.wait(self._wait_s())
            self._wake.clear()
            if self._stop.is_set() or self._closed():
                return
            try:
                self._job()
            except self._busy:
                if self._stop.wait(self._busy_s):
                    return
                self._wake.set()  # the pause was the wait: try again at once
            except Exception as exc:
                if self._stop.is_set() or self._closed():
                    return  # closing under us is not a failure
                if self._failed(exc):
                    return
            else:
                if self.failures:
                    self._log.info("%s works again after %d failure(s)", self.what, self.failures)
                self.failures = 0

    def _failed(self, exc: Exception) -> bool:
        """Log and count a failure; True if the worker gives up."""
        self.failures += 1
        self.errors += 1
        retry = self._retry() if self._retry is not None else None
        when = "at the next wake" if retry is None else f"in {backoff(retry, self.failures):.3g} s"
        trace = exc if self._level >= logging.ERROR else None
        self._log.log(
            self._level, "%s failed (%d in a row); retrying %s: %s",
            self.what, self.failures, when, exc, exc_info=trace,
        )  # fmt: skip
        if self._on_failure is not None:
            self._on_failure(exc)
        if self._max_failures is not None and self.failures >= self._max_failures:
            self._log.error(
                "%s stopped after %d failures in a row%s",
                self.what, self.failures, self._stopped_note,
            )  # fmt: skip
            self.running = False
            self._stop.set()
            return True
        return False

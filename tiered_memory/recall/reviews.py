"""Recall's reinforcement: recalled memories count as reviews, written in batches, and
never at the caller's expense.

A recall is a read. What it writes (the reviews of the memories it returned, and with
them their access counts) waits in a queue and is written ``batch`` at a time. When other
writers keep the file busy (:class:`~persistence.DatabaseBusyError`), the batch goes back
to the queue and is tried again after a pause (:data:`RETRY_AFTER_S`, doubling while the
file stays busy, up to :data:`MAX_RETRY_AFTER_S`); the recall returns its hits all the
same, and recalls in the pause write nothing (not even the embeddings of pending memories,
which rank by keywords meanwhile). Past :data:`MAX_QUEUED` waiting reviews the oldest are
dropped. Both are counted (``statistics().recall_writes_deferred`` /
``recall_reviews_dropped``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from persistence import DatabaseBusyError, Memory, MemoryStorage

logger = logging.getLogger("tiered_memory.recall")

MAX_QUEUED = 10_000
"""Reviews waiting at most; older ones are dropped (and counted) past it."""
RETRY_AFTER_S = 1.0
"""After writers kept the file busy, recalls write nothing for this long (at first)."""
MAX_RETRY_AFTER_S = 60.0


class ReviewQueue:
    """Reviews of recalled memories, waiting to be written (see the module's docstring).

    ``review(memory_id, quality)`` and ``get(memory_id)`` are the manager's.
    """

    def __init__(
        self,
        store: MemoryStorage,
        clock: Callable[[], int],
        *,
        get: Callable[[str], Memory | None],
        review: Callable[[str, int], object],
        quality: int | None,
        batch: int,
    ) -> None:
        self._store = store
        self._clock = clock
        self._get = get
        self._review = review
        self.quality = quality
        self._batch = batch
        self._pending: list[str] = []
        self._lock = threading.Lock()
        self._retry_at = 0.0
        self._pause = RETRY_AFTER_S
        self.deferred = 0
        """Writes a recall put off because other writers kept the file busy."""
        self.dropped = 0
        """Reviews given up: past :data:`MAX_QUEUED`, or still busy at close."""

    def paused(self) -> bool:
        """True while recalls write nothing: writers kept the file busy a moment ago."""
        return time.monotonic() < self._retry_at

    def note_deferred(self) -> None:
        """Count a write a recall put off (its embedding flush, say) for busy writers,
        and pause recalls' writes (for longer each time in a row)."""
        with self._lock:
            self.deferred += 1
            self._retry_at = time.monotonic() + self._pause
            self._pause = min(self._pause * 2, MAX_RETRY_AFTER_S)

    def add(self, memory_ids: list[str]) -> None:
        """Queue these recalled memories' reviews; write a full batch unless writers were
        busy a moment ago. Never raises for busy writers: the batch waits instead."""
        if self.quality is None or not memory_ids or self._store.read_only:
            return
        with self._lock:
            self._pending += memory_ids
            self._trim()
            due = len(self._pending) >= self._batch
        if not due or self.paused():
            return
        try:
            self.write()
        except DatabaseBusyError as exc:
            self.note_deferred()
            logger.debug("recall reviews deferred: %s", exc)
            return
        with self._lock:
            self._pause = RETRY_AFTER_S

    def write(self, *, drop_if_busy: bool = False) -> None:
        """Write the queued reviews of memories that are due, in one transaction. Busy
        writers: the reviews go back to the queue and the error is raised, or with
        ``drop_if_busy`` (at close) they are dropped, counted and logged."""
        quality = self.quality
        with self._lock:
            pending, self._pending = self._pending, []
        if quality is None or not pending:
            return
        try:
            self._write(pending, quality)
        except DatabaseBusyError:
            with self._lock:
                if drop_if_busy:
                    self.dropped += len(set(pending))
                    logger.warning(
                        "%d recall review(s) dropped: the file stayed busy", len(set(pending))
                    )
                    return
                self._pending = pending + self._pending
                self._trim()
            raise

    def _write(self, pending: list[str], quality: int) -> None:
        now = self._clock()
        with self._store.transaction():
            for memory_id in dict.fromkeys(pending):
                schedule = self._store.schedules.get_repetition_schedule(memory_id)
                due = schedule is None or schedule.next_review_at <= now
                if due and self._get(memory_id) is not None:
                    self._review(memory_id, quality)

    def _trim(self) -> None:
        """Drop the oldest past :data:`MAX_QUEUED` (under the lock)."""
        extra = len(self._pending) - MAX_QUEUED
        if extra > 0:
            del self._pending[:extra]
            self.dropped += extra

"""The keyword index's one home: the policy that keeps ``memory_fts`` right and fast.

The SQL lives in ``sql/index_sql.py`` and ``sql/keyword_window_sql.py``, the steps that
run it in ``keyword_upkeep.py`` and ``keyword_search.py``; when they run is decided
here. The invariants:

1. **Nothing waits for indexing after a commit.** The tier tables' triggers only note
   what a write changed (``keyword_dirty``, schema 8 on); :meth:`KeywordIndex.before_commit`
   re-indexes those rows (and the keyword windows around them) inside the transaction,
   just before its ``COMMIT``, once per transaction and in rowid order. A search inside
   a transaction first does the same (:meth:`KeywordIndex.catch_up`), so it sees the
   transaction's own writes. A file written without the store (rows left dirty) is
   caught up as it opens.
2. **A batch does not pay for old merges.** A transaction that leaves ``BATCH_ROWS`` or
   more rows is indexed with FTS5's ``automerge`` off (``keyword_upkeep.update_keyword_index``).
3. **A bulk write rebuilds instead** (``bulk_index.triggers_suspended``): triggers off,
   then the whole index rebuilt from the tier tables, in the caller's transaction.
4. **Segments are merged while the writer rests.** Once the writer has committed
   nothing for ``idle_s`` (default :data:`IDLE_S`), :class:`IdleMerger`'s thread merges
   the index's segments step by step, each step a short transaction on the writer's own
   connection under its lock (so ``data_version`` never reports it as another
   process's change), skipped when the writer is busy; then it asks for a checkpoint of
   what it wrote. Read-only and in-memory stores, and files opened with
   ``wal_autocheckpoint=0``, merge nothing in the background.

The commit hook also collects the knowledge graph's garbage (memories deleted in the
transaction): one statement looks for both kinds of work, and every ``remember()``
commits.

``TIERED_MEMORY_IDLE_MERGE_S``: when set, the ``idle_s`` of every store constructed
without an explicit ``idle_merge_s`` (read once, at construction). The test suite sets
it to an hour for its own process, because merges rewrite FTS5's segment rows, which
its byte checksums would see as changes; the crash tests' worker processes drop it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence

import apsw

from persistence.errors import InvalidInputError
from persistence.records import KeywordParts, MemoryFilter
from persistence.sqlite import graph_steps, keyword_search, keyword_upkeep
from persistence.sqlite.database import Database
from persistence.sqlite.sql import graph_sql, index_sql
from persistence.statements import row, rows
from persistence.stores.scope import WHOLE, Scope
from persistence.worker import Worker

logger = logging.getLogger("tiered_memory.keyword_index")
"""The checkpointer's logger: merge failures are logged where they were when the
checkpointer's thread did the merging."""

IDLE_S = 0.05
"""The writer idle this long (no commit): the background thread merges segments."""

IDLE_ENV = "TIERED_MEMORY_IDLE_MERGE_S"
"""Environment variable: the default ``idle_s`` in seconds (see the module docstring)."""

STEP_GAP_S = 0.001
"""Pause between two merge steps, in which a waiting writer gets its lock."""


def idle_seconds(configured: float | None) -> float:
    """``configured``, else :data:`IDLE_ENV`'s value, else :data:`IDLE_S`."""
    if configured is None:
        raw = os.environ.get(IDLE_ENV)
        if not raw:
            return IDLE_S
        try:
            configured = float(raw)
        except ValueError:
            message = f"{IDLE_ENV} must be a number of seconds, got {raw!r}"
            raise InvalidInputError(message) from None
    if not configured > 0:
        raise InvalidInputError(f"idle_merge_s must be a positive number, got {configured!r}")
    return configured


class IdleMerger:
    """Merges the keyword index's segments in a thread of its own while the writer rests
    (invariant 4). :meth:`committed` is told of every commit; ``idle_s`` may be changed
    while it runs (the next wait uses it)."""

    def __init__(self, engine: Database, idle_s: float) -> None:
        self.engine = engine
        self.idle_s = idle_s
        self.last_commit = time.monotonic()
        self.due = False  # a commit since the merges last ran out
        self.steps = 0  # merge steps that merged something
        self._worker = Worker(
            f"tiered-memory keyword merger {engine.path}",
            self._job,
            logger=logger,
            what=f"background keyword-index merging on {engine.path}",
            wait_s=self._wait_s,
            level=logging.WARNING,
        )

    @property
    def running(self) -> bool:
        """True while the thread runs."""
        return self._worker.running

    def start(self, writer: apsw.Connection) -> None:
        """Start the thread (a file's writer only: nothing in memory)."""
        if not self.engine.is_memory:
            self._worker.start()

    def stop(self, writer: apsw.Connection | None) -> None:
        """End the thread after the step under way (before the writer closes)."""
        self._worker.stop()

    def committed(self) -> None:
        """The writer commits: wait for the next idle time."""
        self.last_commit = time.monotonic()
        if not self.due:
            self.due = True
            self._worker.notify()

    def wake(self) -> None:
        """Look at the idle time now (after ``idle_s`` changed)."""
        self._worker.notify()

    def _wait_s(self) -> float | None:
        return self.idle_s if self.due else None

    def _idle_for(self) -> float:
        return time.monotonic() - self.last_commit

    def _job(self) -> None:
        """Merge step by step while the writer rests; then have what it wrote copied.
        Only while the checkpointer runs (it did this work on its own thread before):
        none when it could not start or gave up."""
        if not self.due or self._idle_for() < self.idle_s or not self.engine.background.running:
            return
        did = False
        try:
            while not self._worker.stopping and self._idle_for() >= self.idle_s:
                try:
                    if not self.engine.when_idle(keyword_upkeep.merge_keyword_step):
                        self.due = False  # nothing left until the next commit
                        break
                except apsw.BusyError:
                    break  # the writer is back: the next idle time goes on
                except Exception:
                    self.due = False  # tried again after the next commit (logged)
                    raise
                did = True
                self.steps += 1
                # Let a writer waiting for its lock take it now: re-taken at once, the
                # lock went to this thread step after step (stalls of 300 ms measured).
                time.sleep(STEP_GAP_S)
        finally:
            if did and not self._worker.stopping:
                self.engine.background.request_checkpoint()


class KeywordIndex:
    """The keyword index of one store (see the module docstring): its commit hook and
    its idle merger, registered with ``engine``."""

    def __init__(self, engine: Database, idle_s: float | None = None) -> None:
        self.deferred = False  # the file defers keyword indexing to commit (v8+)
        self.graph = False  # the file has a knowledge graph, collected at commit (v10+)
        self.merger = IdleMerger(engine, idle_seconds(idle_s))
        engine.before_commit(self.before_commit)
        engine.background.jobs.append(self.merger)  # started as the writer opens

    def opened(self, conn: apsw.Connection) -> bool:
        """Learn what the file defers to commit; True if work was left by a writer that
        bypassed the store (a commit catches it up)."""
        self.deferred = keyword_upkeep.defers_keyword_index(conn)
        self.graph = row(conn, graph_sql.has_graph()) is not None
        behind = self.deferred and keyword_upkeep.keyword_index_behind(conn)
        return behind or (self.graph and row(conn, graph_sql.collection_behind()) is not None)

    def before_commit(self, conn: apsw.Connection) -> None:
        """The work a transaction leaves for its commit: provenance-safe forgetting (what
        deleted memories alone supported goes), then the keyword index. One statement
        looks for both (every ``remember()`` commits; collecting touches no tier table,
        so the keyword counts stay right)."""
        merger = self.merger
        if merger.due:
            merger.last_commit = time.monotonic()
        else:
            merger.committed()  # notes the time too, and wakes the merger
        if not (self.graph and self.deferred):
            self.collect_graph(conn)
            self.catch_up(conn)
            return
        pending = rows(conn, index_sql.PENDING_WORK)
        counts = [row for row in pending if row[0] is not None]
        if len(counts) < len(pending):  # graph_dirty holds rows
            graph_steps.collect_garbage(conn)
        if counts:
            keyword_upkeep.update_keyword_index(conn, counts)

    def collect_graph(self, conn: apsw.Connection) -> None:
        """Provenance-safe forgetting: what deleted memories alone supported goes."""
        if self.graph:
            graph_steps.collect_garbage(conn)

    def catch_up(self, conn: apsw.Connection) -> None:
        """Index what this transaction's writes left waiting (see migration v8)."""
        if self.deferred:
            keyword_upkeep.update_keyword_index(conn)

    def search(
        self,
        conn: apsw.Connection,
        words: Sequence[str],
        limit: int,
        where: MemoryFilter,
        context_weight: float,
        after_weight: float,
    ) -> list[tuple[str, float]]:
        """``(memory_id, bm25)`` of the memories ``where`` accepts that hold any of
        ``words`` (one FTS5 expression: each word quoted, joined with ``OR``), best
        (lowest) first: :func:`~persistence.sqlite.keyword_search.keyword_search`."""
        return keyword_search.keyword_search(
            conn, words, limit, where, context_weight, after_weight
        )

    def parts(
        self, conn: apsw.Connection, words: Sequence[str], memory_ids: Sequence[str],
        scope: Scope = WHOLE,
    ) -> dict[str, KeywordParts]:  # fmt: skip
        """Which columns of each memory's keyword window hold any of ``words`` (memories
        of ``scope`` only)."""
        match = index_sql.fts5_match(words)
        return keyword_search.keyword_parts(conn, match, memory_ids, scope)

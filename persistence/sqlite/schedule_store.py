"""ScheduleStore: spaced-repetition schedules and the forgetting curve's batch work.

One part of :class:`~persistence.sqlite.store.SQLiteStore`, over its
:class:`~persistence.sqlite.database.Database`: review schedules
(:mod:`~persistence.sqlite.sql.schedule_sql`), retention walked in bounded batches,
decay applied in one transaction, and the forgetting log
(:mod:`~persistence.sqlite.sql.forgetting_sql`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from persistence.errors import MemoryNotFoundError
from persistence.records import ForgettingRecord, RepetitionSchedule, RetentionInput, Tier
from persistence.sqlite.database import Database
from persistence.sqlite.memory_store import forget
from persistence.sqlite.sql import forgetting_sql, memory_sql, schedule_sql
from persistence.validation import parse_tier, require_int, require_str, validate_schedule


class ScheduleStore:
    """Review schedules, retention and forgetting in one file; ``clock`` (epoch ms)
    stamps the forgetting log."""

    def __init__(self, db: Database, clock: Callable[[], int]) -> None:
        self.db = db
        self.clock = clock
        self._reading = db.reading
        self._transaction = db.transaction

    # --- repetition schedules ---------------------------------------------------------------

    def put_repetition_schedule(self, schedule: RepetitionSchedule) -> None:
        """Insert or replace a memory's schedule; the memory must exist."""
        validate_schedule(schedule)
        with self._transaction() as conn:
            if memory_sql.tier_of(conn, schedule.memory_id) is None:
                raise MemoryNotFoundError(f"no memory {schedule.memory_id} to schedule")
            schedule_sql.upsert(conn, schedule)

    def get_repetition_schedule(self, memory_id: str) -> RepetitionSchedule | None:
        """A memory's schedule, or ``None``."""
        require_str(memory_id, "memory_id")
        with self._reading() as conn:
            return schedule_sql.fetch(conn, memory_id)

    def get_schedules_due_for_review(
        self, before: int, limit: int | None = None
    ) -> list[RepetitionSchedule]:
        """Schedules due at or before ``before`` (epoch ms), most overdue first."""
        require_int(before, "before")
        require_int(limit, "limit", allow_none=True, minimum=0)
        with self._reading() as conn:
            return schedule_sql.due(conn, before, limit)

    # --- forgetting curve batches -----------------------------------------------------------

    def retention_batch(
        self, tier: Tier, after_id: str = "", limit: int = 500, min_reviews: int = 0
    ) -> list[RetentionInput]:
        """The next ``limit`` memories of ``tier`` after ``after_id``, in id order.

        Lets the forgetting curve walk a file of any size in bounded memory.
        """
        require_str(after_id, "after_id")
        require_int(limit, "limit", minimum=1)
        require_int(min_reviews, "min_reviews", minimum=0)
        with self._reading() as conn:
            return forgetting_sql.retention_batch(
                conn, parse_tier(tier, "tier"), after_id, limit, min_reviews
            )

    def apply_decay(
        self,
        tier: Tier,
        updates: Sequence[tuple[str, float]],
        forgotten: Sequence[tuple[str, float]],
        reason: str,
    ) -> None:
        """In one transaction: store new retentions, forget ``forgotten`` with audit rows."""
        tier = parse_tier(tier, "tier")
        with self._transaction() as conn:
            forgetting_sql.set_retention(conn, tier, updates)
            for memory_id, retention in forgotten:
                forget(conn, tier, memory_id, retention, reason, self.clock)

    def get_forgetting_log(
        self, memory_id: str | None = None, *, agent_id: str | None = None
    ) -> list[ForgettingRecord]:
        """Audit rows of forgotten memories, oldest first (for one memory, or all; of
        ``agent_id``'s memories if given: rows written before schema version 12 name none)."""
        require_str(memory_id, "memory_id", allow_none=True)
        with self._reading() as conn:
            return forgetting_sql.forgetting_log(conn, memory_id, agent_id)

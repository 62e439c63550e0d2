"""PgScheduleStore: spaced-repetition schedules and the forgetting curve's batch work on
PostgreSQL.

One part of :class:`~persistence.postgres.store.PostgresStore`, the twin of
:class:`persistence.sqlite.schedule_store.ScheduleStore`: review schedules
(:mod:`~persistence.postgres.sql.schedule_sql`), retention walked in bounded batches,
decay applied in one transaction of a few set-based statements, and the forgetting log
(:mod:`~persistence.postgres.sql.forgetting_sql`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import psycopg

from persistence.errors import MemoryNotFoundError
from persistence.postgres.config import StoreConfig
from persistence.postgres.database import Connection, PgDatabase
from persistence.postgres.sql import forgetting_sql, memory_sql, schedule_sql
from persistence.postgres.translate import call_error
from persistence.records import ForgettingRecord, RepetitionSchedule, RetentionInput, Tier
from persistence.validation import parse_tier, require_int, require_str, validate_schedule


class PgScheduleStore:
    """Review schedules, retention and forgetting on one server; the config's clock
    stamps the forgetting log."""

    def __init__(self, db: PgDatabase, config: StoreConfig) -> None:
        self.db = db
        self.config = config

    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        with self.db.transaction() as conn:
            try:
                yield conn
            except psycopg.Error as exc:
                raise call_error(exc, self.db._url) from None

    # --- repetition schedules ---------------------------------------------------------------

    def put_repetition_schedule(self, schedule: RepetitionSchedule) -> None:
        """Insert or replace a memory's schedule; the memory must exist."""
        validate_schedule(schedule)
        with self._writing() as conn:
            if memory_sql.tier_of(conn, schedule.memory_id) is None:
                raise MemoryNotFoundError(f"no memory {schedule.memory_id} to schedule")
            schedule_sql.upsert(conn, schedule)

    def get_repetition_schedule(self, memory_id: str) -> RepetitionSchedule | None:
        """A memory's schedule, or ``None``."""
        require_str(memory_id, "memory_id")
        with self.db.reading() as conn:
            return schedule_sql.fetch(conn, memory_id)

    def get_schedules_due_for_review(
        self, before: int, limit: int | None = None
    ) -> list[RepetitionSchedule]:
        """Schedules due at or before ``before`` (epoch ms), most overdue first."""
        require_int(before, "before")
        require_int(limit, "limit", allow_none=True, minimum=0)
        with self.db.reading() as conn:
            return schedule_sql.due(conn, before, limit)

    # --- forgetting curve batches -----------------------------------------------------------

    def retention_batch(
        self, tier: Tier, after_id: str = "", limit: int = 500, min_reviews: int = 0
    ) -> list[RetentionInput]:
        """The next ``limit`` memories of ``tier`` after ``after_id``, in id order (byte-wise):
        lets the forgetting curve walk a store of any size in bounded memory."""
        require_str(after_id, "after_id")
        require_int(limit, "limit", minimum=1)
        require_int(min_reviews, "min_reviews", minimum=0)
        tier = parse_tier(tier, "tier")
        with self.db.reading() as conn:
            return forgetting_sql.retention_batch(conn, tier, after_id, limit, min_reviews)

    def apply_decay(
        self,
        tier: Tier,
        updates: Sequence[tuple[str, float]],
        forgotten: Sequence[tuple[str, float]],
        reason: str,
    ) -> None:
        """In one transaction: store new retentions (one ``UPDATE ... FROM unnest``) and
        forget ``forgotten`` with audit rows (one statement)."""
        tier = parse_tier(tier, "tier")
        with self._writing() as conn:
            forgetting_sql.set_retention(conn, tier, updates)
            if forgotten:
                memory_sql.forget_rows(
                    conn,
                    [memory_id for memory_id, _ in forgotten],
                    [float(retention) for _, retention in forgotten],
                    tier,
                    reason,
                    self.config.clock(),
                )

    def get_forgetting_log(self, memory_id: str | None = None) -> list[ForgettingRecord]:
        """Audit rows of forgotten memories, oldest first (for one memory, or all)."""
        require_str(memory_id, "memory_id", allow_none=True)
        with self.db.reading() as conn:
            return forgetting_sql.forgetting_log(conn, memory_id)

"""ScheduleStore: spaced-repetition schedules and the forgetting curve's batch work,
written once for both engines: review schedules (the engine's ``schedule_sql``),
retention walked in bounded batches, decay applied in one transaction, and the
forgetting log (the engine's ``forgetting_sql``); ``memory_sql`` says which tier holds
a memory. Each module has functions of the same names on both engines."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from persistence.engine import Engine
from persistence.errors import MemoryNotFoundError
from persistence.records import ForgettingRecord, RepetitionSchedule, RetentionInput, Tier
from persistence.statements import value
from persistence.stores.config import StoreConfig
from persistence.validation import parse_tier, require_int, require_str, validate_schedule


class ScheduleStore:
    """Review schedules, retention and forgetting; the config's clock (epoch ms) stamps
    the forgetting log, its scope goes with every read (a scoped handle: its agent's)."""

    def __init__(
        self,
        engine: Engine,
        config: StoreConfig,
        *,
        schedule_sql: Any,
        forgetting_sql: Any,
        memory_sql: Any,
    ) -> None:
        self.engine = engine
        self.config = config
        self.sql = schedule_sql
        self.forgetting = forgetting_sql
        self.memories = memory_sql

    # --- repetition schedules ---------------------------------------------------------------

    def put_repetition_schedule(self, schedule: RepetitionSchedule) -> None:
        """Insert or replace a memory's schedule; the memory must exist."""
        validate_schedule(schedule)
        with self.engine.transaction() as conn:
            if value(conn, self.memories.tier_of(schedule.memory_id)) is None:
                raise MemoryNotFoundError(f"no memory {schedule.memory_id} to schedule")
            self.sql.upsert(conn, schedule)

    def get_repetition_schedule(self, memory_id: str) -> RepetitionSchedule | None:
        """A memory's schedule, or ``None``."""
        require_str(memory_id, "memory_id")
        with self.engine.reading() as conn:
            found: RepetitionSchedule | None = self.sql.fetch(conn, memory_id, self.config.scope)
            return found

    def get_schedules_due_for_review(
        self, before: int, limit: int | None = None
    ) -> list[RepetitionSchedule]:
        """Schedules due at or before ``before`` (epoch ms), most overdue first."""
        require_int(before, "before")
        require_int(limit, "limit", allow_none=True, minimum=0)
        with self.engine.reading() as conn:
            return list(self.sql.due(conn, before, limit, self.config.scope))

    # --- forgetting curve batches -----------------------------------------------------------

    def retention_batch(
        self, tier: Tier, after_id: str = "", limit: int = 500, min_reviews: int = 0
    ) -> list[RetentionInput]:
        """The next ``limit`` memories of ``tier`` after ``after_id``, in id order
        (byte-wise): lets the forgetting curve walk a store of any size in bounded memory."""
        require_str(after_id, "after_id")
        require_int(limit, "limit", minimum=1)
        require_int(min_reviews, "min_reviews", minimum=0)
        tier = parse_tier(tier, "tier")
        with self.engine.reading() as conn:
            return list(
                self.forgetting.retention_batch(
                    conn, tier, after_id, limit, min_reviews, self.config.scope
                )
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
        with self.engine.transaction() as conn:
            self.forgetting.set_retention(conn, tier, updates)
            if forgotten:
                self.forgetting.forget_many(conn, tier, forgotten, reason, self.config.clock())

    def get_forgetting_log(
        self, memory_id: str | None = None, *, agent_id: str | None = None
    ) -> list[ForgettingRecord]:
        """Audit rows of forgotten memories, oldest first (for one memory, or all; of
        ``agent_id``'s memories if given, where the engine's log names agents)."""
        require_str(memory_id, "memory_id", allow_none=True)
        require_str(agent_id, "agent_id", allow_none=True)
        with self.engine.reading() as conn:
            return list(
                self.forgetting.forgetting_log(conn, memory_id, agent_id, self.config.scope)
            )

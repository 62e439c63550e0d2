"""ScheduleStore: spaced-repetition schedules and the forgetting curve's batch work,
written once for both engines: review schedules (the statements the engine's
``schedule_sql`` builds, :class:`ScheduleSql`), retention walked in bounded batches,
decay applied in one transaction, and the forgetting log (the engine's
``forgetting_sql``, :class:`ForgettingSql`). Forgetting a batch is the engine's own
compound step (:class:`ForgetMany`); ``memory_sql`` says which tier holds a memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from persistence.engine import Connection, Engine
from persistence.errors import MemoryNotFoundError
from persistence.records import ForgettingRecord, RepetitionSchedule, RetentionInput, Tier
from persistence.statements import Batch, Statement, row, rows, run, run_batch, value
from persistence.stores.config import StoreConfig
from persistence.stores.scope import Scope
from persistence.validation import parse_tier, require_int, require_str, validate_schedule


class ScheduleSql(Protocol):
    """What each engine's ``schedule_sql`` module builds and decodes for the store."""

    def to_schedule(self, row: Sequence[Any]) -> RepetitionSchedule: ...
    def upsert(self, schedule: RepetitionSchedule) -> Statement: ...
    def insert_many(self, schedules: Sequence[RepetitionSchedule]) -> Batch: ...
    def fetch(self, memory_id: str, scope: Scope = ...) -> Statement: ...
    def due(self, before: int, limit: int | None, scope: Scope = ...) -> Statement: ...


class ForgettingSql(Protocol):
    """What each engine's ``forgetting_sql`` module builds and decodes for the store."""

    def to_input(self, row: Sequence[Any], tier: Tier) -> RetentionInput: ...
    def to_record(self, row: Sequence[Any]) -> ForgettingRecord: ...
    def set_retention(self, tier: Tier, updates: Sequence[tuple[str, float]]) -> Batch: ...
    def retention_batch(
        self, tier: Tier, after_id: str, limit: int, min_reviews: int = ..., scope: Scope = ...
    ) -> Statement: ...
    def forgetting_log(
        self, memory_id: str | None, agent_id: str | None = ..., scope: Scope = ...
    ) -> Statement: ...


class ForgetMany(Protocol):
    """The engine's step forgetting ``(id, retention)`` pairs of ``tier``, each with an
    audit row giving ``reason``, stamped ``at``."""

    def __call__(
        self,
        conn: Connection,
        tier: Tier,
        forgotten: Sequence[tuple[str, float]],
        reason: str,
        at: int,
    ) -> None: ...


class ScheduleStore:
    """Review schedules, retention and forgetting; the config's clock (epoch ms) stamps
    the forgetting log, its scope goes with every read (a scoped handle: its agent's)."""

    def __init__(
        self,
        engine: Engine,
        config: StoreConfig,
        *,
        schedule_sql: ScheduleSql,
        forgetting_sql: ForgettingSql,
        forget_many: ForgetMany,
        memory_sql: Any,
    ) -> None:
        self.engine = engine
        self.config = config
        self.sql = schedule_sql
        self.forgetting = forgetting_sql
        self.forget_many = forget_many
        self.memories = memory_sql

    # --- repetition schedules ---------------------------------------------------------------

    def put_repetition_schedule(self, schedule: RepetitionSchedule) -> None:
        """Insert or replace a memory's schedule; the memory must exist."""
        validate_schedule(schedule)
        with self.engine.transaction() as conn:
            if value(conn, self.memories.tier_of(schedule.memory_id)) is None:
                raise MemoryNotFoundError(f"no memory {schedule.memory_id} to schedule")
            run(conn, self.sql.upsert(schedule))

    def get_repetition_schedule(self, memory_id: str) -> RepetitionSchedule | None:
        """A memory's schedule, or ``None``."""
        require_str(memory_id, "memory_id")
        with self.engine.reading() as conn:
            found = row(conn, self.sql.fetch(memory_id, self.config.scope))
            return None if found is None else self.sql.to_schedule(found)

    def get_schedules_due_for_review(
        self, before: int, limit: int | None = None
    ) -> list[RepetitionSchedule]:
        """Schedules due at or before ``before`` (epoch ms), most overdue first."""
        require_int(before, "before")
        require_int(limit, "limit", allow_none=True, minimum=0)
        with self.engine.reading() as conn:
            found = rows(conn, self.sql.due(before, limit, self.config.scope))
            return [self.sql.to_schedule(r) for r in found]

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
        batch = self.forgetting.retention_batch(
            tier, after_id, limit, min_reviews, self.config.scope
        )
        with self.engine.reading() as conn:
            return [self.forgetting.to_input(r, tier) for r in rows(conn, batch)]

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
            run_batch(conn, self.forgetting.set_retention(tier, updates))
            if forgotten:
                self.forget_many(conn, tier, forgotten, reason, self.config.clock())

    def get_forgetting_log(
        self, memory_id: str | None = None, *, agent_id: str | None = None
    ) -> list[ForgettingRecord]:
        """Audit rows of forgotten memories, oldest first (for one memory, or all; of
        ``agent_id``'s memories if given, where the engine's log names agents)."""
        require_str(memory_id, "memory_id", allow_none=True)
        require_str(agent_id, "agent_id", allow_none=True)
        with self.engine.reading() as conn:
            log = self.forgetting.forgetting_log(memory_id, agent_id, self.config.scope)
            return [self.forgetting.to_record(r) for r in rows(conn, log)]

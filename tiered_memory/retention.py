"""The forgetting curve applied to the file: reviews, what is due, decay, consolidation.

:class:`~tiered_memory.forgetting.ForgettingCurve` is the arithmetic; this module
walks the file with it, a batch per transaction, and keeps RAM in step through
:class:`~tiered_memory.memories.Memories`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from persistence import (
    MAX_COUNT,
    ConsolidationReport,
    DecayReport,
    ForgettingRecord,
    GraphStorage,
    Memory,
    RepetitionSchedule,
    Tier,
    require_int,
)
from tiered_memory import dedup as duplicates
from tiered_memory.config import MemoryConfig
from tiered_memory.forgetting import ForgettingCurve
from tiered_memory.memories import Memories


class Retention:
    """Spaced-repetition reviews, decay and consolidation of one manager's memories."""

    def __init__(
        self,
        memories: Memories,
        records: GraphStorage,
        curve: ForgettingCurve,
        config: MemoryConfig,
        clock: Callable[[], int],
    ) -> None:
        self._memories = memories
        self._store = memories.store
        self.records = records  # the knowledge graph's: merged near-duplicates move there
        self._curve = curve
        self._config = config
        self._clock = clock

    def review(self, memory_id: str, quality: int) -> RepetitionSchedule:
        """Record an SM-2 review of ``quality`` 0-5; retention is restored to 1.0."""
        self._memories.require_open()
        with self._store.transaction():
            memory = self._memories.require(memory_id)
            now = self._clock()
            schedule = self._store.schedules.get_repetition_schedule(
                memory_id
            ) or self._curve.schedule_for(memory_id, memory.importance, now)
            reviewed = self._curve.review(schedule, quality, memory.importance, now)
            self._store.schedules.put_repetition_schedule(reviewed)
            self._memories.rewrite(
                replace(
                    memory,
                    retention=1.0,
                    access_count=min(memory.access_count + 1, MAX_COUNT),
                    last_accessed_at=now,
                )
            )
        return reviewed

    def schedule(self, memory_id: str) -> RepetitionSchedule | None:
        """A memory's spaced-repetition schedule, or ``None``."""
        self._memories.require_open()
        return self._store.schedules.get_repetition_schedule(memory_id)

    def due_for_review(self, before: int | None, limit: int | None) -> list[Memory]:
        """Memories whose next review is due at or before ``before`` (default: now)."""
        self._memories.require_open()
        require_int(before, "before", allow_none=True)
        due = self._store.schedules.get_schedules_due_for_review(
            self._clock() if before is None else before, limit
        )
        return [m for s in due if (m := self._memories.get(s.memory_id)) is not None]

    def forgetting_log(self, memory_id: str | None) -> list[ForgettingRecord]:
        """Audit rows of forgotten memories (for one memory, or all), oldest first."""
        self._memories.require_open()
        return self._store.schedules.get_forgetting_log(memory_id)

    def decay(self) -> DecayReport:
        """Walk the file in batches, update retention, forget what fell under the threshold
        (see ``AgentMemoryManager.decay``)."""
        self._memories.require_open()
        cfg = self._config
        tiers = (Tier.EPISODIC, Tier.SEMANTIC) if cfg.decay_semantic else (Tier.EPISODIC,)
        checked = weakened = 0
        forgotten_ids: list[str] = []
        reason = f"decay: retention fell below {cfg.forgetting_threshold}"
        for tier in tiers:
            after = ""
            while True:
                with self._store.transaction():
                    batch = self._store.schedules.retention_batch(tier, after, cfg.decay_batch_size)
                    now = self._clock()
                    updates: list[tuple[str, float]] = []
                    forgotten: list[tuple[str, float]] = []
                    for row in batch:
                        strength = self._curve.retention_of(row, now)
                        if strength < cfg.forgetting_threshold:
                            forgotten.append((row.memory_id, strength))
                        elif abs(strength - row.retention) > 1e-9:
                            updates.append((row.memory_id, strength))
                            if strength < row.retention:
                                weakened += 1
                    self._store.schedules.apply_decay(tier, updates, forgotten, reason)
                    for memory_id, _ in (*updates, *forgotten):
                        self._memories.cache.invalidate(memory_id)
                if not batch:
                    break
                checked += len(batch)
                forgotten_ids += [memory_id for memory_id, _ in forgotten]
                after = batch[-1].memory_id
        return DecayReport(
            checked,
            weakened,
            len(forgotten_ids),
            tuple(forgotten_ids),
            tiers,
            cfg.forgetting_threshold,
        )

    def consolidate(self) -> ConsolidationReport:
        """Merge near-duplicates, then promote well-learned episodic memories to semantic
        (see ``AgentMemoryManager.consolidate``)."""
        self._memories.require_open()
        cfg = self._config
        merged = []
        if cfg.near_duplicate_threshold is not None:  # the same fact twice, near enough
            merged = duplicates.merge_near_duplicates(
                self._memories, self.records, self._clock, cfg.near_duplicate_threshold
            )
        promoted: list[str] = []
        checked = 0
        after = ""
        while True:
            with self._store.transaction():
                batch = self._store.schedules.retention_batch(
                    Tier.EPISODIC,
                    after,
                    cfg.decay_batch_size,
                    min_reviews=cfg.consolidation_min_reviews,
                )
                now = self._clock()
                for row in batch:
                    strength = self._curve.retention_of(row, now)
                    if strength >= cfg.consolidation_min_retention:
                        reason = (
                            f"consolidated: {row.review_count} reviews, retention {strength:.2f}"
                        )
                        self._memories.promote(row.memory_id, Tier.SEMANTIC, reason)
                        promoted.append(row.memory_id)
            if not batch:
                break
            checked += len(batch)
            after = batch[-1].memory_id
        return ConsolidationReport(checked, tuple(promoted), tuple(merged))


class RetentionCalls:
    """The manager's forgetting-curve calls (reviews, schedules, decay, the forgetting
    log, consolidation); the manager provides its :class:`Retention`."""

    _retention: Retention

    def review(self, memory_id: str, quality: int) -> RepetitionSchedule:
        """Record an SM-2 review of ``quality`` 0-5; retention is restored to 1.0."""
        return self._retention.review(memory_id, quality)

    def schedule(self, memory_id: str) -> RepetitionSchedule | None:
        """A memory's spaced-repetition schedule, or ``None``."""
        return self._retention.schedule(memory_id)

    def due_for_review(self, before: int | None = None, limit: int | None = None) -> list[Memory]:
        """Memories whose next review is due at or before ``before`` (default: now)."""
        return self._retention.due_for_review(before, limit)

    def decay(self) -> DecayReport:
        """Walk the file in batches, update retention, forget what fell under the threshold.

        The episodic tier is always walked, the semantic one only with
        ``decay_semantic=True``. Each batch is one transaction; every forgotten memory
        gets a row in the forgetting log.
        """
        return self._retention.decay()

    def forgetting_log(self, memory_id: str | None = None) -> list[ForgettingRecord]:
        """Audit rows of forgotten memories (for one memory, or all), oldest first."""
        return self._retention.forgetting_log(memory_id)

    def consolidate(self) -> ConsolidationReport:
        """Promote well-learned episodic memories to semantic.

        A memory qualifies with at least ``consolidation_min_reviews`` successful reviews
        in a row and a current retention of at least ``consolidation_min_retention``.
        First, near-duplicate episodic memories are merged (see :mod:`tiered_memory.dedup`).
        """
        return self._retention.consolidate()

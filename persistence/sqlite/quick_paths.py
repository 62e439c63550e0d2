"""What a file answers where a server has a quicker path of its own: the same Protocol
members on both engines, so the domain never asks which one it runs on (issue 41)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from persistence.records import Memory, RepetitionSchedule

if TYPE_CHECKING:
    from persistence.sqlite.memory_store import MemoryStore


class QuickPaths:
    """:class:`~persistence.sqlite.SQLiteStore`'s answers to the round-trip questions."""

    memories: MemoryStore

    rows_per_trip = 20
    """A read in-process costs microseconds: recall's batches are a little over its k."""

    def remember_new(
        self, memory: Memory, schedule: RepetitionSchedule, *, touch_at: int | None, dedup: bool
    ) -> Memory | None:
        """``None`` (see :meth:`MemoryStore.remember_new`): the step-by-step path."""
        return self.memories.remember_new(memory, schedule, touch_at=touch_at, dedup=dedup)

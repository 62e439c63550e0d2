"""Links between memories: both ways, each side's ``linked_memories`` in step."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from persistence import InvalidInputError, Memory
from tiered_memory.memories import Memories, touched


class Links:
    """``link``, ``unlink`` and ``linked`` of one manager's memories."""

    def __init__(self, memories: Memories, clock: Callable[[], int]) -> None:
        self._memories = memories
        self._store = memories.store
        self._clock = clock

    def link(self, memory_id: str, other_id: str) -> None:
        """Link two memories both ways (linking again changes nothing)."""
        self._memories.require_open()
        if memory_id == other_id:
            raise InvalidInputError("a memory cannot be linked to itself")
        with self._store.transaction():
            for this, that in ((memory_id, other_id), (other_id, memory_id)):
                memory = self._memories.require(this)
                if that not in memory.linked_memories:
                    linked = (*memory.linked_memories, that)
                    now = touched(memory, self._clock())
                    self._memories.rewrite(replace(memory, linked_memories=linked, updated_at=now))

    def unlink(self, memory_id: str, other_id: str) -> bool:
        """Remove the link between two memories; True if there was one."""
        self._memories.require_open()
        found = False
        with self._store.transaction():
            for this, that in ((memory_id, other_id), (other_id, memory_id)):
                memory = self._memories.require(this)
                if that in memory.linked_memories:
                    found = True
                    linked = tuple(i for i in memory.linked_memories if i != that)
                    now = touched(memory, self._clock())
                    self._memories.rewrite(replace(memory, linked_memories=linked, updated_at=now))
        return found

    def linked(self, memory_id: str) -> list[Memory]:
        """The memories linked to this one that still exist."""
        memory = self._memories.require(memory_id)
        return [m for i in memory.linked_memories if (m := self._memories.get(i)) is not None]

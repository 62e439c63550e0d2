"""Memories read through RAM and written back in step with it.

Scratchpad entries are held whole in RAM by the :class:`Scratchpad`; episodic and
semantic memories are read through an LRU :class:`~persistence.CacheLayer`. Every part
of the manager that reads, changes, promotes or forgets a memory goes through one
:class:`Memories`, so the file, the scratchpad and the cache never disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any

from persistence import (
    CacheLayer,
    InvalidInputError,
    InvalidPromotionError,
    Memory,
    MemoryNotFoundError,
    MemoryStorage,
    PromotionRecord,
    QueryOptions,
    StoreClosedError,
    Tier,
    parse_tier,
    require_bool,
    require_str,
)
from tiered_memory.scratchpad import Scratchpad

QUERY_FILTERS = frozenset(f.name for f in fields(QueryOptions)) - {"current"} | {
    "include_superseded"
}
"""``query()``'s filters: :class:`QueryOptions`' (``current`` aside: superseded memories
are left out unless ``include_superseded=True`` or ``as_of`` asks about a time)."""


class Memories:
    """Every memory of one store, in any tier, through the scratchpad and the cache."""

    def __init__(
        self, store: MemoryStorage, scratchpad: Scratchpad, cache: CacheLayer[str, Memory]
    ) -> None:
        self.store = store
        self.scratchpad = scratchpad
        self.cache = cache

    def require_open(self) -> None:
        if not self.store.is_open:
            raise StoreClosedError("memory manager is closed (or was never initialized)")

    def get(self, memory_id: str) -> Memory | None:
        """The memory with that id in any tier, or ``None`` (``AgentMemoryManager.get``
        runs the same lines inline: it is the hot path)."""
        if not self.store.is_open:
            self.require_open()
        if not isinstance(memory_id, str):
            require_str(memory_id, "memory_id")
        if not self.store.engine.check_external_changes():
            return self.store.memories.get_memory(memory_id)  # RAM may be stale: read the file
        in_scratchpad = self.scratchpad.by_id(memory_id)
        if in_scratchpad is not None:
            return in_scratchpad
        return self.cache.get_or_load(memory_id, self.store.memories.get_memory, not_scratchpad)

    def get_many(self, memory_ids: list[str]) -> dict[str, Memory]:
        """Several memories: scratchpad RAM, then the cache, then one query per tier."""
        if not self.store.engine.check_external_changes():
            return self.store.memories.get_memories(memory_ids)  # RAM may be stale: read the file
        found = {i: m for i in memory_ids if (m := self.scratchpad.by_id(i)) is not None}
        rest = [i for i in memory_ids if i not in found]
        found.update(
            self.cache.get_many_or_load(rest, self.store.memories.get_memories, not_scratchpad)
        )
        return found

    def current(self, memory_id: str) -> Memory | None:
        """:meth:`get` for a write to decide on: inside this thread's transaction a
        scratchpad entry is as the store holds it (see :meth:`_confirmed`)."""
        memory = self.get(memory_id)
        if memory is not None and memory.tier is Tier.SCRATCHPAD:
            return self._confirmed(memory)
        return memory

    def require(self, memory_id: str) -> Memory:
        """:meth:`current`, or :class:`~persistence.MemoryNotFoundError`."""
        memory = self.current(memory_id)
        if memory is None:
            raise MemoryNotFoundError(f"no memory {memory_id}")
        return memory

    def _confirmed(self, held: Memory) -> Memory | None:
        """A scratchpad entry this handle's RAM holds, read again from the store inside
        this thread's transaction (outside one: as held). The view is exact as a write
        transaction begins, but another agent's writers do not queue behind this
        handle's (an unscoped handle's nor the reverse): one may have moved or forgotten
        the entry since, and a write from RAM's copy would fail or bring it back. An
        entry gone from the scratchpad leaves the view; the memory is returned as it is
        now (in another tier), or ``None``. One indexed read, only for scratchpad entries."""
        if not self.store.in_transaction:
            return held
        stored = self.store.memories.get_memory(held.id)
        if stored is None or stored.tier is not Tier.SCRATCHPAD:
            self.scratchpad.discard(held.id)
        return stored

    def rewrite(self, memory: Memory) -> Memory:
        """Store a changed memory in its tier and keep RAM and cache in step."""
        if memory.tier is Tier.SCRATCHPAD:
            return self.scratchpad.rewrite(memory)
        stored = self.store.memories.put_memory(memory)
        self.cache.set(stored.id, stored)
        return stored

    def forget(self, memory_id: str, reason: str) -> bool:
        """Delete a memory and write its audit row (see ``AgentMemoryManager.forget``)."""
        self.require_open()
        require_str(memory_id, "memory_id")
        with self.store.transaction():
            held = self.scratchpad.by_id(memory_id)
            if held is not None and _in_scratchpad(self._confirmed(held)):
                return self.scratchpad.forget(memory_id, reason)
            self.cache.invalidate(memory_id)
            return self.store.memories.forget_memory(memory_id, reason) is not None

    def promote(self, memory_id: str, to_tier: Tier | str, reason: str | None) -> PromotionRecord:
        """Move a memory forward, logged, in one transaction."""
        self.require_open()
        require_str(memory_id, "memory_id")
        require_str(reason, "reason", allow_none=True)
        target = parse_tier(to_tier)
        with self.store.transaction():
            memory = self.require(memory_id)  # where the store holds it now (see require)
            if memory.tier is Tier.SCRATCHPAD:
                return self.scratchpad.promote(memory_id, target, reason)
            if memory.tier is target:  # another handle may have got there first
                raise InvalidPromotionError(
                    f"memory {memory_id} is already {target.value}; nothing changed "
                    "(promotion goes scratchpad -> episodic -> semantic)"
                )
            self.cache.invalidate(memory_id)
            return self.store.memories.promote_memory(memory_id, memory.tier, target, reason)

    def query(self, tier: Tier | str | None = None, **filters: Any) -> list[Memory]:
        """Memories matching every filter; with no ``tier`` the three tiers are searched
        and merged in the requested order."""
        self.require_open()
        self.store.engine.check_external_changes()
        unknown = set(filters) - QUERY_FILTERS
        if unknown:
            raise InvalidInputError(
                f"unknown filter(s) {sorted(unknown)}; use {sorted(QUERY_FILTERS)}"
            )
        if isinstance(filters.get("tags"), list):
            filters["tags"] = tuple(filters["tags"])
        include = filters.pop("include_superseded", False)
        require_bool(include, "include_superseded")
        current = not include and filters.get("as_of") is None
        options = QueryOptions(**filters, current=current)
        if tier is not None:
            return self.store.memories.query(parse_tier(tier), options)
        window = None if options.limit is None else options.limit + options.offset
        merged = [
            memory
            for each in Tier
            for memory in self.store.memories.query(each, replace(options, limit=window, offset=0))
        ]
        merged.sort(key=lambda m: _order_key(m, options.order_by), reverse=options.descending)
        end = None if options.limit is None else options.offset + options.limit
        return merged[options.offset : end]

    def tag_counts(self, prefix: str) -> dict[str, int]:
        """Memories per namespace tag starting with ``prefix`` (see
        :meth:`AgentMemoryManager.tag_counts`)."""
        self.require_open()
        require_str(prefix, "prefix")
        self.store.engine.check_external_changes()
        return self.store.memories.tag_counts(prefix)

    def embedded(self, rows: Sequence[tuple[str, Tier]]) -> None:
        """Inside the transaction that stored new embeddings: RAM copies follow it."""
        self.scratchpad.refresh([memory_id for memory_id, tier in rows if tier is Tier.SCRATCHPAD])
        for memory_id, _ in rows:
            self.cache.invalidate(memory_id)

    def replaced(self) -> None:
        """Inside the transaction that swapped in another model's embeddings."""
        self.cache.clear()
        self.scratchpad.refresh(None)

    def reload(self) -> None:
        """Drop RAM state after the file's content was replaced underneath it."""
        self.cache.clear()
        self.scratchpad.load()


def touched(memory: Memory, now: int) -> int:
    """``updated_at`` for a change at ``now``: never before ``created_at`` (the clock may
    have gone back since the memory was made, and validation refuses that order)."""
    return max(now, memory.created_at)


def _in_scratchpad(memory: Memory | None) -> bool:
    return memory is not None and memory.tier is Tier.SCRATCHPAD


def not_scratchpad(memory: Memory) -> bool:
    """Scratchpad entries live in RAM, not in the cache."""
    return memory.tier is not Tier.SCRATCHPAD


def _order_key(memory: Memory, order_by: str) -> tuple[bool, Any, str]:
    value = getattr(memory, order_by)
    return (value is not None, value if value is not None else 0, memory.id)

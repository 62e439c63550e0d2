"""Facts that change: a newer memory supersedes older ones, and each memory's timeline.

``remember(content, supersedes=id_or_ids)`` stores the new memory and, in the same
transaction, marks each older one: ``superseded_by`` (the new id), ``valid_to`` (the new
memory's time) and ``superseded_reason``. A superseded memory keeps its content, schedule
and provenance (the forgetting curve may still retire it); recall leaves it out unless
asked (``include_superseded=True``) or asked about a time it was still true (``as_of``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from persistence import (
    InvalidSupersessionError,
    InvalidTypeError,
    Memory,
    MemoryStorage,
    MemoryVersion,
    NoteStorage,
    Tier,
    require_str,
)
from tiered_memory.memories import Memories

EXPLICIT = "supersedes"
"""The reason of a supersession asked for with ``remember(..., supersedes=...)``."""


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One memory of a chain of supersessions, as :meth:`AgentMemoryManager.timeline`
    returns it: true from ``valid_from`` until ``valid_to`` (``None``: still true), when
    ``superseded_by`` replaced it (for ``reason``); ``supersedes``: the ids it replaced."""

    memory_id: str
    content: str
    valid_from: int
    valid_to: int | None
    superseded_by: str | None
    reason: str | None
    supersedes: tuple[str, ...]

    @property
    def current(self) -> bool:
        """True while no newer memory replaced this one."""
        return self.superseded_by is None


def check_supersedes(supersedes: str | Sequence[str] | None, tier: Tier) -> tuple[str, ...]:
    """``remember()``'s ``supersedes`` as a tuple of distinct ids (empty for ``None``);
    a wrong type or a scratchpad memory raises before anything is written."""
    if supersedes is None:
        return ()
    ids = (supersedes,) if isinstance(supersedes, str) else supersedes
    if not isinstance(ids, Sequence) or isinstance(ids, bytes):
        raise InvalidTypeError(
            f"supersedes must be a memory id or a sequence of them, got {type(ids).__name__}"
        )
    for memory_id in ids:
        require_str(memory_id, "supersedes", allow_empty=False)
    if not ids:
        raise InvalidSupersessionError("supersedes is empty: name a memory id, or pass None")
    if tier is Tier.SCRATCHPAD:
        raise InvalidSupersessionError(
            "a scratchpad entry cannot supersede memories: remember it as episodic or semantic"
        )
    return tuple(dict.fromkeys(ids))


def superseded_memories(
    memories: Memories, store: MemoryStorage, ids: tuple[str, ...], agent_id: str | None
) -> list[Memory]:
    """The memories ``ids`` name, each checked to be supersedable by a new memory of
    ``agent_id`` (inside the write's transaction, before anything is written)."""
    found: list[Memory] = []
    for memory_id in ids:
        old = memories.get(memory_id)
        if old is None:
            forgotten = store.schedules.get_forgetting_log(memory_id)
            state = "was forgotten" if forgotten else "does not exist (or is not this agent's)"
            raise InvalidSupersessionError(f"supersedes={memory_id!r}: that memory {state}")
        if old.agent_id != agent_id:
            raise InvalidSupersessionError(
                f"supersedes={memory_id!r}: that memory is agent {old.agent_id!r}'s, the new "
                f"one agent {agent_id!r}'s (a memory supersedes only its own agent's)"
            )
        if old.tier is Tier.SCRATCHPAD:
            raise InvalidSupersessionError(
                f"supersedes={memory_id!r}: a scratchpad entry is replaced by its key, not "
                "superseded"
            )
        if old.superseded_by is not None:
            raise InvalidSupersessionError(
                f"supersedes={memory_id!r}: already superseded by {old.superseded_by} "
                "(supersede that one instead)"
            )
        found.append(old)
    return found


def supersede(
    memories: Memories, old: Sequence[Memory], new: Memory, reason: str, *, strict: bool = True,
    earlier: bool = False,
) -> list[Memory]:  # fmt: skip
    """Mark each of ``old`` superseded by ``new`` at its time (in the caller's
    transaction; content, schedule and provenance untouched), each with one targeted
    update that only a memory nothing superseded yet takes: of two writers superseding
    the same memory at once, one wins. The other (``strict``) raises
    :class:`InvalidSupersessionError`, so its whole write rolls back; not ``strict``, it
    skips that memory; ``earlier``: a memory superseded after ``new`` is marked again (a
    fact arriving late). Returns the memories marked, as they now are."""
    marked: list[Memory] = []
    for memory in old:
        valid_to = max(new.created_at, memory.created_at)  # a clock gone back: never before
        if not memories.store.memories.mark_superseded(
            memory, new.id, valid_to, reason, earlier=earlier
        ):
            memories.cache.invalidate(memory.id)
            if strict:
                raise InvalidSupersessionError(
                    f"supersedes={memory.id!r}: another writer superseded (or forgot) that "
                    "memory meanwhile; nothing was written (read it again and supersede its "
                    "successor)"
                )
            continue
        now = replace(memory, superseded_by=new.id, valid_to=valid_to, superseded_reason=reason)
        memories.cache.set(memory.id, now)
        marked.append(now)
    return marked


def timeline(memories: Memories, store: MemoryStorage, memory_id: str) -> list[TimelineEntry]:
    """The chain ``memory_id`` is part of: every memory it superseded (and they, in
    turn), itself, and every memory that superseded it, oldest first; ``[]`` for an
    unknown memory."""
    require_str(memory_id, "memory_id")
    start = memories.get(memory_id)
    if start is None:
        return []
    chain: dict[str, Memory] = {start.id: start}
    older: dict[str, list[Memory]] = {}
    todo = [start.id]
    while todo:  # back: what each superseded
        each = todo.pop()
        older[each] = store.memories.superseded_of(each)
        for memory in older[each]:
            if memory.id not in chain:
                chain[memory.id] = memory
                todo.append(memory.id)
    newer = start.superseded_by
    while newer is not None and newer not in chain:  # forward: who replaced it
        successor = memories.get(newer)
        if successor is None:
            break  # its successor was forgotten: the chain ends here
        chain[successor.id] = successor
        older.setdefault(successor.id, store.memories.superseded_of(successor.id))
        newer = successor.superseded_by
    entries = [
        TimelineEntry(m.id, m.content, m.valid_from, m.valid_to, m.superseded_by,
                      m.superseded_reason, tuple(o.id for o in older.get(m.id, ())))
        for m in chain.values()
    ]  # fmt: skip
    return sorted(entries, key=lambda e: (e.valid_from, e.memory_id))


class HistoryCalls:
    """The manager's reads of a memory's past: :meth:`timeline` (the memories it
    superseded and that superseded it) and :meth:`history` (its edits)."""

    agent_id: str | None
    _memories: Memories
    _notebook: NoteStorage
    store: MemoryStorage

    def timeline(self, memory_id: str) -> list[TimelineEntry]:
        """The chain of supersessions ``memory_id`` is part of, oldest first: the
        memories it superseded (and theirs), itself, and the ones that superseded it,
        each with when it was true and why it stopped (see :class:`TimelineEntry`);
        ``[]`` for an unknown memory."""
        self._memories.require_open()
        return timeline(self._memories, self.store, memory_id)

    def history(self, memory_id: str) -> list[MemoryVersion]:
        """The contents a memory had, oldest first (version 1: as remembered), each with
        who changed it and when; ``[]`` for a memory whose content never changed.
        Forgetting the memory forgets its history."""
        self._memories.require_open()
        require_str(memory_id, "memory_id")
        if self.agent_id is not None and self._memories.get(memory_id) is None:
            return []  # not this agent's memory (on a file the history has no agent)
        return self._notebook.memory_versions(memory_id)

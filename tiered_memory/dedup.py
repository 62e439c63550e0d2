"""The same fact twice: exact deduplication in ``remember()`` and near-duplicate merging
in ``consolidate()``.

``remember()`` of content identical, after normalising case, whitespace and Unicode
form, to a live memory of the same tier, agent and session reinforces that memory (a
review, one more access, importance = the larger) and returns it, in the same
transaction, instead of adding a second row (``MemoryConfig.dedup=False`` turns it off).
One index probe on ``content_keys`` finds the candidate; its content is compared itself.

``consolidate()`` merges near-duplicates: an episodic memory whose vector has cosine
similarity of at least ``near_duplicate_threshold`` with an older one of the same agent
and session is folded into it (tags, links and graph provenance carried over,
importance the larger, accesses added) and forgotten with a forgetting-log row naming
the memory it was merged into.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from persistence import (
    DEDUPLICATED_KEY,
    NEAR_DUPLICATES_KEY,
    GraphStorage,
    Memory,
    MemoryFilter,
    MemoryStorage,
    Tier,
    normalised_content,
)
from tiered_memory.memories import Memories

PAGE = 200


def normalised(content: str) -> str:
    """Content as deduplication compares it (the rule, stated once for the engines'
    keys and this comparison: :func:`persistence.normalised_content`)."""
    return normalised_content(content)


def find_twin(
    store: MemoryStorage,
    content: str,
    tier: Tier,
    agent_id: str | None,
    session_id: str | None,
    load: Callable[[list[str]], dict[str, Memory]],
) -> Memory | None:
    """The oldest live, current memory of ``tier``, agent and session with the same
    normalised content, or ``None`` (a fact true again after it was superseded is a new
    memory: reinforcing the superseded one would leave it out of recall)."""
    ids = store.memories.find_same_content(content, tier, agent_id, session_id)
    if not ids:
        return None
    found = load(ids)
    text = normalised(content)
    for memory_id in ids:
        memory = found.get(memory_id)
        if (
            memory is not None
            and memory.tier is tier
            and memory.agent_id == agent_id
            and memory.session_id == session_id
            and memory.superseded_by is None
            and normalised(memory.content) == text
        ):
            return memory
    return None


def count(store: MemoryStorage, key: str, n: int = 1) -> None:
    """Add to a deduplication counter kept with the data (in the caller's transaction)."""
    store.increment_meta(key, n)


def count_duplicate(store: MemoryStorage) -> None:
    """One more ``remember()`` answered by an existing memory."""
    count(store, DEDUPLICATED_KEY)


def near_duplicate_pairs(
    store: MemoryStorage, memories: list[Memory], threshold: float
) -> list[tuple[Memory, str]]:
    """``(newer memory, older memory id)`` for each memory of ``memories`` whose nearest
    other episodic memory of the same agent and session is at least ``threshold``
    similar and older; current memories only (a superseded one is not folded into the
    fact that replaced it, nor it into one)."""
    pairs = []
    for memory in memories:
        if memory.embedding is None or memory.superseded_by is not None:
            continue
        where = MemoryFilter(Tier.EPISODIC, memory.session_id, memory.agent_id, current=True)
        for other_id, distance in store.indexes.vector_search(memory.embedding, 4, where=where):
            if other_id == memory.id or 1.0 - distance < threshold:
                continue
            pairs.append((memory, other_id))
            break
    return pairs


def merge_near_duplicates(
    memories: Memories, records: GraphStorage, clock: Callable[[], int], threshold: float
) -> list[tuple[str, str]]:
    """Fold each episodic memory into an older near-duplicate (see the module docstring),
    a page of memories per transaction; returns ``(merged id, kept id)`` pairs."""
    store = memories.store
    merged: list[tuple[str, str]] = []
    gone: set[str] = set()
    after = ""
    while page := store.memories.page(Tier.EPISODIC, after, PAGE):
        after = page[-1].id
        with store.transaction():
            for newer, older_id in near_duplicate_pairs(store, page, threshold):
                if newer.id in gone or older_id in gone:
                    continue
                older = memories.get(older_id)
                current = memories.get(newer.id)
                if older is None or current is None:
                    continue
                if (current.created_at, current.id) < (older.created_at, older.id):
                    older, current = current, older  # keep the older one
                links = tuple(
                    i for i in dict.fromkeys((*older.linked_memories, *current.linked_memories))
                    if i not in (older.id, current.id)
                )  # fmt: skip
                memories.rewrite(
                    replace(
                        older,
                        tags=tuple(dict.fromkeys((*older.tags, *current.tags))),
                        linked_memories=links,
                        importance=max(older.importance, current.importance),
                        access_count=older.access_count + current.access_count,
                        updated_at=max(clock(), older.created_at),
                    )
                )
                records.move_provenance(current.id, older.id)
                memories.forget(current.id, reason=f"near-duplicate of {older.id}")
                count(store, NEAR_DUPLICATES_KEY)
                gone.add(current.id)
                merged.append((current.id, older.id))
    return merged


__all__ = [
    "NEAR_DUPLICATES_KEY",
    "count",
    "count_duplicate",
    "find_twin",
    "near_duplicate_pairs",
    "normalised",
]

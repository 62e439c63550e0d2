"""The scratchpad: keyed working memory, held whole in RAM, bounded by a token budget.

Every change is written to the store first, inside a transaction. RAM keeps two views:
the committed one, which every thread reads, and a pending one that only the thread
inside the transaction sees; COMMIT publishes the pending view, ROLLBACK (of the
transaction or of a savepoint) restores what it was. When a change takes the scratchpad
over its budget, the least recently used entries are promoted to the episodic tier
through logged promotions, as MemGPT does under memory pressure.

Recency is tracked in RAM (``get`` and ``put`` refresh it); after a restart the order
falls back to each entry's last write.

Thread safety: one lock guards the order and content of both views' dicts, because
``get`` reorders the committed view from any thread while others iterate it (``tokens``,
``items``, the copy a transaction starts from). Store calls never run under it.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from persistence import (
    InvalidInputError,
    InvalidTypeError,
    Memory,
    MemoryNotFoundError,
    MemoryStorage,
    PromotionRecord,
    StoreClosedError,
    Tier,
    require_str,
    require_str_tuple,
)
from tiered_memory.arguments import typed_arguments
from tiered_memory.drafts import check_new_fields
from tiered_memory.redaction import Redactor, count_in_file, redact_fields
from tiered_memory.tokens import TokenCounter

logger = logging.getLogger("tiered_memory.scratchpad")

EVICTION_REASON = "scratchpad token budget exceeded"


class _Entries:
    """Key -> memory in LRU order (least recent first), with an index by memory id."""

    __slots__ = ("by_key", "key_of")

    def __init__(self, by_key: OrderedDict[str, Memory] | None = None) -> None:
        self.by_key: OrderedDict[str, Memory] = by_key if by_key is not None else OrderedDict()
        self.key_of = {memory.id: key for key, memory in self.by_key.items()}

    def copy(self) -> _Entries:
        return _Entries(OrderedDict(self.by_key))

    def put(self, key: str, memory: Memory, *, touch: bool = True) -> None:
        self.by_key[key] = memory
        if touch:
            self.by_key.move_to_end(key)
        self.key_of[memory.id] = key

    def drop(self, memory_id: str) -> None:
        del self.by_key[self.key_of.pop(memory_id)]

    def tokens(self) -> int:
        return sum(memory.token_count for memory in self.by_key.values())


@typed_arguments
class Scratchpad:
    """Keyed working memory; reach it as ``manager.scratchpad``."""

    def __init__(
        self,
        store: MemoryStorage,
        budget: int,
        token_counter: TokenCounter,
        clock: Callable[[], int],
        *,
        redactor: Redactor | None = None,
    ) -> None:
        self._store = store
        self._redactor = redactor
        self.budget = budget
        self._tokens = token_counter
        self._clock = clock
        self._lock = threading.RLock()  # guards both views' dicts (see the module doc)
        self._committed = _Entries()
        self._pending: _Entries | None = None

    def load(self) -> None:
        """Read the whole scratchpad from the store, least recently written first."""
        entries = self._store.memories.get_all_scratchpad()
        loaded = _Entries(OrderedDict((m.key or m.id, m) for m in entries))
        with self._lock:
            self._committed = loaded
            self._pending = None

    def refresh(self, memory_ids: Sequence[str] | None) -> None:
        """Re-read these entries (``None``: all) from the store, in a transaction, keeping
        their recency: for changes made below the scratchpad's API (new embeddings)."""
        if memory_ids is not None:
            require_str_tuple(memory_ids, "memory_ids")
        if memory_ids is not None and not memory_ids:
            return
        with self._change() as entries:
            if memory_ids is None:
                fresh = {m.key or m.id: m for m in self._store.memories.get_all_scratchpad()}
                with self._lock:
                    for key, held in list(entries.by_key.items()):
                        if key not in fresh or fresh[key].id != held.id:
                            entries.drop(held.id)
                    for key, memory in fresh.items():
                        entries.put(key, memory, touch=key not in entries.by_key)
                return
            for memory_id in memory_ids:
                with self._lock:
                    found = entries.key_of.get(memory_id)
                stored = None if found is None else self._store.memories.get_scratchpad(found)
                if found is not None and stored is not None and stored.id == memory_id:
                    with self._lock:
                        entries.put(found, stored, touch=False)

    def _view(self) -> _Entries:
        """The pending view for the thread inside the transaction, else the committed one."""
        pending = self._pending
        if pending is not None and self._store.in_transaction:
            return pending
        return self._committed

    @contextmanager
    def _change(self) -> Iterator[_Entries]:
        """A store transaction and the pending view to change alongside it."""
        self._require_open()
        with self._store.transaction():
            with self._lock:
                before = None if self._pending is None else self._pending.copy()
                if self._pending is None:
                    self._pending = self._committed.copy()
            self._store.engine.after_rollback(lambda: self._set_pending(before))
            self._store.engine.after_commit(self._publish)
            yield self._pending

    def _set_pending(self, entries: _Entries | None) -> None:
        with self._lock:
            self._pending = entries

    def _publish(self) -> None:
        with self._lock:
            if self._pending is not None:
                self._committed, self._pending = self._pending, None

    def _require_open(self) -> None:
        if not self._store.is_open:
            raise StoreClosedError("memory manager is closed")

    # --- reads ---------------------------------------------------------------------------

    def get(self, key: str) -> Memory | None:
        """The entry under ``key`` (and mark it recently used), or ``None``.

        The mark also goes into another thread's open transaction, if it holds the same
        entry, so that transaction's commit does not undo it.
        """
        require_str(key, "key")
        self._require_open()
        with self._lock:
            entries = self._view()
            memory = entries.by_key.get(key)
            if memory is not None:
                entries.by_key.move_to_end(key)
                pending = self._pending
                if pending is not None and pending is not entries:
                    held = pending.by_key.get(key)
                    if held is not None and held.id == memory.id:
                        pending.by_key.move_to_end(key)
        return memory

    def by_id(self, memory_id: str) -> Memory | None:
        """The entry whose memory id is ``memory_id``, or ``None`` (no recency change).

        Lock-free: it is on every ``get`` of every tier, and it only reads two dicts of
        one view (single lookups, never an iteration), which is never changed once it is
        committed but for recency.
        """
        if type(memory_id) is not str:
            require_str(memory_id, "memory_id")
        pending = self._pending  # self._view(), inlined
        in_transaction = pending is not None and self._store.in_transaction
        entries = pending if in_transaction and pending is not None else self._committed
        key = entries.key_of.get(memory_id)
        return None if key is None else entries.by_key.get(key)

    def items(self) -> list[tuple[str, Memory]]:
        """``(key, memory)`` pairs, least recently used first."""
        self._require_open()
        with self._lock:
            return list(self._view().by_key.items())

    def __len__(self) -> int:
        with self._lock:
            return len(self._view().by_key)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._view().by_key

    @property
    def tokens(self) -> int:
        """Tokens held now."""
        with self._lock:
            return self._view().tokens()

    # --- writes --------------------------------------------------------------------------

    def put(
        self,
        key: str,
        content: str,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        importance: float = 0.5,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        source: str | None = None,
        category: str | None = None,
        embedding: Sequence[float] | None = None,
        speaker: str | None = None,
    ) -> Memory:
        """Store ``content`` under ``key`` (replacing what it held) and return the entry.

        If the scratchpad then exceeds its token budget, its least recently used entries
        are promoted to episodic. A single entry larger than the whole budget is refused.
        """
        require_str(key, "key", allow_empty=False)
        require_str(content, "content")
        check_new_fields(session_id=session_id, agent_id=agent_id, importance=importance,
                         tags=tags, metadata=metadata, source=source, category=category,
                         speaker=speaker, embedding=embedding)  # fmt: skip
        content, tags, metadata, redacted = redact_fields(self._redactor, content, tags, metadata)
        self._store.memories.check_content_size(content)
        tokens = self._fits(key, content)
        fields: dict[str, Any] = {
            "content": content,
            "session_id": session_id,
            "agent_id": agent_id,
            "importance": importance,
            "tags": tuple(tags),
            "metadata": dict(metadata) if metadata is not None else {},
            "source": source,
            "category": category,
            "embedding": embedding,
            "token_count": tokens,
            "speaker": speaker,
        }
        now = self._clock()
        with self._change() as entries:
            count_in_file(self._store, redacted)
            with self._lock:
                current = entries.by_key.get(key)
            if current is not None:
                current = self._still_held(key, current)
            if current is None:
                memory = Memory.create(tier=Tier.SCRATCHPAD, key=key, now=now, **fields)
            else:
                memory = replace(current, updated_at=max(now, current.created_at), **fields)
            stored = self._store.memories.put_scratchpad(key, memory)
            with self._lock:
                entries.put(key, stored)
            self._evict_over_budget(entries, keep=key)
        return stored

    def _still_held(self, key: str, held: Memory) -> Memory | None:
        """The entry under ``key`` as the store holds it now (inside the transaction), or
        ``None``; one the view lists but the store no longer holds (another agent's
        handle moved or forgot it: such writers do not queue behind this handle's) leaves
        the view, so a replacement is a new entry, never the old id written back."""
        stored = self._store.memories.get_scratchpad(key)
        if stored is None or stored.id != held.id:
            self.discard(held.id)
        return stored

    def _fits(self, key: str, content: str) -> int:
        tokens = self._tokens.count(content)
        if tokens > self.budget:
            raise InvalidInputError(
                f"entry {key!r} has {tokens} tokens, more than the scratchpad budget of "
                f"{self.budget}: remember() it in the episodic tier instead"
            )
        return tokens

    def _evict_over_budget(self, entries: _Entries, keep: str) -> None:
        while True:
            with self._lock:
                if entries.tokens() <= self.budget:
                    return
                victim = next(m for k, m in entries.by_key.items() if k != keep)
            try:
                self._store.memories.promote_memory(
                    victim.id, Tier.SCRATCHPAD, Tier.EPISODIC, EVICTION_REASON
                )
            except MemoryNotFoundError:  # another process moved or forgot it meanwhile
                logger.debug("scratchpad eviction: %s had already left", victim.id)
            with self._lock:
                entries.drop(victim.id)

    def discard(self, memory_id: str) -> None:
        """Drop an entry the store no longer holds (another handle moved or forgot it)
        from both views: a correction of RAM, not a change, so it stays whatever the
        open transaction's outcome (the committed view is replaced, never changed)."""
        require_str(memory_id, "memory_id")
        with self._lock:
            if memory_id in self._committed.key_of:
                committed = self._committed.copy()
                committed.drop(memory_id)
                self._committed = committed
            pending = self._pending
            if pending is not None and memory_id in pending.key_of:
                pending.drop(memory_id)

    def promote(self, memory_id: str, to_tier: Tier, reason: str | None) -> PromotionRecord:
        """Move an entry out to ``to_tier`` through a logged promotion."""
        with self._change() as entries:
            record = self._store.memories.promote_memory(
                memory_id, Tier.SCRATCHPAD, to_tier, reason
            )
            with self._lock:
                entries.drop(memory_id)
            return record

    def rewrite(self, memory: Memory) -> Memory:
        """Store a changed entry (same id and key) in place, within the token budget."""
        if not isinstance(memory, Memory):
            raise InvalidTypeError(f"memory must be a Memory, got {type(memory).__name__}")
        key = memory.key or ""
        self._fits(key, memory.content)
        with self._change() as entries:
            stored = self._store.memories.put_scratchpad(key, memory)
            with self._lock:
                entries.put(key, stored, touch=False)
            self._evict_over_budget(entries, keep=key)
            return stored

    def forget(self, memory_id: str, reason: str) -> bool:
        """Delete an entry with an audit row; False if no entry has that id."""
        require_str(memory_id, "memory_id")
        require_str(reason, "reason", allow_empty=False)
        with self._change() as entries:
            if memory_id not in entries.key_of:
                return False
            forgotten = self._store.memories.forget_memory(memory_id, reason)
            with self._lock:
                entries.drop(memory_id)
            return forgotten is not None  # another handle may have got there first

    def delete(self, key: str) -> bool:
        """Delete the entry under ``key`` (no audit row: working memory is scratch)."""
        require_str(key, "key")
        with self._change() as entries:
            with self._lock:
                memory = entries.by_key.get(key)
            if memory is None:
                return False
            deleted = self._store.memories.delete_scratchpad(key)
            with self._lock:
                entries.drop(memory.id)
            return deleted  # another handle may have got there first

    def clear(self) -> int:
        """Delete every entry; return how many there were."""
        with self._change() as entries:
            count = self._store.memories.clear_scratchpad()
            with self._lock:
                for memory_id in list(entries.key_of):
                    entries.drop(memory_id)
            return count

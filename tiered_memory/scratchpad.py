"""The scratchpad: keyed working memory, held whole in RAM, bounded by a token budget.

Every change is written to the store first, inside a transaction; the in-RAM copy is
changed in the same step and restored if that transaction rolls back. When a put takes
the scratchpad over its budget, the least recently used entries are promoted to the
episodic tier through logged promotions, as MemGPT does under memory pressure.

Recency is tracked in RAM (``get`` and ``put`` refresh it); after a restart the order
falls back to each entry's last write.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from persistence import (
    InvalidInputError,
    Memory,
    PromotionRecord,
    SQLiteStore,
    StoreClosedError,
    Tier,
)
from persistence.validation import require_str
from tiered_memory.tokens import TokenCounter

EVICTION_REASON = "scratchpad token budget exceeded"


class Scratchpad:
    """Keyed working memory; reach it as ``manager.scratchpad``."""

    def __init__(
        self,
        store: SQLiteStore,
        budget: int,
        token_counter: TokenCounter,
        clock: Callable[[], int],
    ) -> None:
        self._store = store
        self.budget = budget
        self._tokens = token_counter
        self._clock = clock
        self._lock = threading.RLock()
        self._entries: OrderedDict[str, Memory] = OrderedDict()
        self._keys_by_id: dict[str, str] = {}

    def load(self) -> None:
        """Read the whole scratchpad from the store, least recently written first."""
        entries = self._store.get_all_scratchpad()
        with self._lock:
            self._replace(OrderedDict((m.key or m.id, m) for m in entries))

    def _replace(self, entries: OrderedDict[str, Memory]) -> None:
        self._entries = entries
        self._keys_by_id = {memory.id: key for key, memory in entries.items()}

    @contextmanager
    def _change(self) -> Iterator[None]:
        """A store transaction whose rollback also restores the in-RAM entries."""
        if not self._store.is_open:
            raise StoreClosedError("memory manager is closed")
        with self._store.transaction(), self._lock:
            snapshot = OrderedDict(self._entries)
            self._store.after_rollback(lambda: self._restore(snapshot))
            yield

    def _restore(self, snapshot: OrderedDict[str, Memory]) -> None:
        with self._lock:
            self._replace(snapshot)

    # --- reads ---------------------------------------------------------------------------

    def get(self, key: str) -> Memory | None:
        """The entry under ``key`` (and mark it recently used), or ``None``."""
        require_str(key, "key")
        self._require_open()
        with self._lock:
            memory = self._entries.get(key)
            if memory is not None:
                self._entries.move_to_end(key)
            return memory

    def by_id(self, memory_id: str) -> Memory | None:
        """The entry whose memory id is ``memory_id``, or ``None`` (no recency change).

        Lock-free: it is on every ``get`` of every tier, and two single dict reads are
        atomic; a concurrent removal makes it return ``None``, never fail.
        """
        key = self._keys_by_id.get(memory_id)
        return None if key is None else self._entries.get(key)

    def items(self) -> list[tuple[str, Memory]]:
        """``(key, memory)`` pairs, least recently used first."""
        self._require_open()
        with self._lock:
            return list(self._entries.items())

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    @property
    def tokens(self) -> int:
        """Tokens held now."""
        with self._lock:
            return sum(m.token_count for m in self._entries.values())

    def _require_open(self) -> None:
        if not self._store.is_open:
            raise StoreClosedError("memory manager is closed")

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
    ) -> Memory:
        """Store ``content`` under ``key`` (replacing what it held) and return the entry.

        If the scratchpad then exceeds its token budget, its least recently used entries
        are promoted to episodic. A single entry larger than the whole budget is refused.
        """
        require_str(key, "key", allow_empty=False)
        require_str(content, "content")
        tokens = self._tokens.count(content)
        if tokens > self.budget:
            raise InvalidInputError(
                f"entry {key!r} has {tokens} tokens, more than the scratchpad budget of "
                f"{self.budget}: remember() it in the episodic tier instead"
            )
        now = self._clock()
        fields: dict[str, Any] = {
            "content": content,
            "session_id": session_id,
            "agent_id": agent_id,
            "importance": importance,
            "tags": tuple(tags) if not isinstance(tags, str) else tags,
            "metadata": dict(metadata) if metadata is not None else {},
            "source": source,
            "category": category,
            "embedding": embedding,
            "token_count": tokens,
        }
        with self._change():
            current = self._entries.get(key)
            if current is None:
                memory = Memory.create(tier=Tier.SCRATCHPAD, key=key, now=now, **fields)
            else:
                memory = replace(current, updated_at=now, **fields)
            stored = self._store.put_scratchpad(key, memory)
            self._entries[key] = stored
            self._entries.move_to_end(key)
            self._keys_by_id[stored.id] = key
            while sum(m.token_count for m in self._entries.values()) > self.budget:
                victim = next(iter(self._entries.values()))
                self._promote_locked(victim.id, Tier.EPISODIC, EVICTION_REASON)
        return stored

    def promote(self, memory_id: str, to_tier: Tier, reason: str | None) -> PromotionRecord:
        """Move an entry out to ``to_tier`` through a logged promotion."""
        with self._change():
            return self._promote_locked(memory_id, to_tier, reason)

    def _promote_locked(self, memory_id: str, to_tier: Tier, reason: str | None) -> PromotionRecord:
        record = self._store.promote_memory(memory_id, Tier.SCRATCHPAD, to_tier, reason)
        self._drop(memory_id)
        return record

    def rewrite(self, memory: Memory) -> Memory:
        """Store a changed entry (same id and key), keeping its place in the LRU order."""
        with self._change():
            stored = self._store.put_scratchpad(memory.key or "", memory)
            self._entries[self._keys_by_id[memory.id]] = stored
            return stored

    def forget(self, memory_id: str, reason: str) -> bool:
        """Delete an entry with an audit row; False if no entry has that id."""
        with self._change():
            if memory_id not in self._keys_by_id:
                return False
            self._store.forget_memory(memory_id, reason)
            self._drop(memory_id)
            return True

    def delete(self, key: str) -> bool:
        """Delete the entry under ``key`` (no audit row: working memory is scratch)."""
        require_str(key, "key")
        with self._change():
            if key not in self._entries:
                return False
            self._store.delete_scratchpad(key)
            self._drop(self._entries[key].id)
            return True

    def clear(self) -> int:
        """Delete every entry; return how many there were."""
        with self._change():
            count = self._store.clear_scratchpad()
            self._replace(OrderedDict())
            return count

    def _drop(self, memory_id: str) -> None:
        key = self._keys_by_id.pop(memory_id)
        del self._entries[key]

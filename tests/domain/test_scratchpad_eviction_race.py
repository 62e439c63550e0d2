"""The scratchpad's eviction when another process moved the victim first: on a server
16 processes share one scratchpad, and an entry this handle still lists can already be
promoted (or forgotten) by another's eviction. The write that evicts must not fail
(the soak on PostgreSQL: 81 of 18,837 calls raised MemoryNotFoundError)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tiered_memory import AgentMemoryManager, Tier


def test_a_write_evicting_an_entry_another_handle_moved_still_succeeds(
    any_location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = AgentMemoryManager.open(any_location, embedder=None, scratchpad_token_budget=12)
    try:
        first = mine.remember("alpha bravo charlie delta", Tier.SCRATCHPAD)
        store = mine.store.memories
        real: Callable[..., Any] = store.promote_memory

        def raced(memory_id: str, *args: Any) -> Any:
            # The victim leaves the scratchpad just before this handle's eviction moves
            # it (as another process's eviction would): the real store then finds none.
            if memory_id == first.id:
                real(memory_id, Tier.SCRATCHPAD, Tier.EPISODIC, "the other's eviction")
            return real(memory_id, *args)

        monkeypatch.setattr(store, "promote_memory", raced)
        second = mine.remember("echo foxtrot golf hotel india", Tier.SCRATCHPAD)
        monkeypatch.undo()
        assert mine.get(second.id).tier is Tier.SCRATCHPAD  # type: ignore[union-attr]
        moved = mine.get(first.id)
        assert moved is not None and moved.tier is Tier.EPISODIC  # moved once, kept
        assert first.id not in {m.id for _, m in mine.scratchpad.items()}
    finally:
        mine.close()

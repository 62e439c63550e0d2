"""Two writers superseding the same memory at once: exactly one wins, the other gets
:class:`InvalidSupersessionError` and stores nothing; a write of an older copy of a
superseded memory never undoes its supersession (issue 43, on both engines)."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest

from tests.conftest import FakeClock, managers_at
from tiered_memory import AgentMemoryManager, Memory
from tiered_memory import writer as writer_module
from tiered_memory.errors import InvalidSupersessionError


def _contents(memory: AgentMemoryManager) -> set[str]:
    return {m.content for m in memory.query(include_superseded=True)}


def test_a_stale_view_loses_the_race_and_stores_nothing(
    any_location: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    with managers_at(any_location, clock) as make:
        a, b = make(), make()
        old = a.remember("The user lives in Paris")
        stale = b.get(old.id)  # B reads it while it is current
        assert stale is not None and stale.current
        clock.advance(1000)
        winner = a.remember("The user moved to Berlin", supersedes=old.id)
        seen: list[Memory] = []

        def checked_before_a_wrote(*args: Any) -> list[Memory]:
            """B's check ran before A's supersession committed: it saw the stale row."""
            seen.append(stale)
            return [stale]

        monkeypatch.setattr(writer_module, "superseded_memories", checked_before_a_wrote)
        clock.advance(1000)
        with pytest.raises(InvalidSupersessionError, match="another writer"):
            b.remember("The user moved to Rome", supersedes=old.id)
        assert seen == [stale]  # the guard, not the check, refused it
        kept = a.get(old.id)
        assert kept is not None and kept.superseded_by == winner.id
        assert "The user moved to Rome" not in _contents(a) | _contents(b)
        assert b.get(old.id).superseded_by == winner.id  # type: ignore[union-attr]


def test_an_older_copy_written_back_keeps_the_supersession(
    any_location: str, clock: FakeClock
) -> None:
    with managers_at(any_location, clock) as make:
        a, b = make(), make()
        old = a.remember("The user prefers dark mode", importance=0.3)
        stale = b.get(old.id)
        assert stale is not None
        clock.advance(1000)
        new = a.remember("The user prefers light mode", supersedes=old.id)
        b.store.memories.put_memory(replace(stale, importance=0.9))  # B's update, from its copy
        kept = a.store.memories.get_memory(old.id)
        assert kept is not None and kept.importance == 0.9  # B's change landed ...
        assert (kept.superseded_by, kept.valid_to) == (new.id, new.created_at)  # ... not over A's


def _supersede_at_once(
    name: str, memory: AgentMemoryManager, old_id: str, gate: threading.Barrier,
    outcomes: dict[str, Any],
) -> None:  # fmt: skip
    """One writer of the race: it sees the memory current, then supersedes it."""
    memory.get(old_id)
    gate.wait()
    try:
        outcomes[name] = memory.remember(f"Fact {old_id} by {name}", supersedes=old_id)
    except InvalidSupersessionError as exc:
        outcomes[name] = exc


def test_two_writers_at_once_one_wins(any_location: str, clock: FakeClock) -> None:
    with managers_at(any_location, clock) as make:
        a, b = make(), make()
        for round_ in range(4):
            old = a.remember(f"Fact {round_} as it was")
            gate = threading.Barrier(2)
            outcomes: dict[str, Any] = {}
            threads = [
                threading.Thread(target=_supersede_at_once, args=(n, m, old.id, gate, outcomes))
                for n, m in (("a", a), ("b", b))
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            won = [n for n, o in outcomes.items() if isinstance(o, Memory)]
            lost = [n for n, o in outcomes.items() if isinstance(o, InvalidSupersessionError)]
            assert len(won) == 1 and len(lost) == 1, outcomes
            kept = a.store.memories.get_memory(old.id)  # the row (a's cache may lag b's commit)
            assert kept is not None and kept.superseded_by == outcomes[won[0]].id
            assert f"Fact {old.id} by {lost[0]}" not in _contents(a)

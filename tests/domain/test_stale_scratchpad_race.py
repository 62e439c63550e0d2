"""Two handles on one store: a call that waited for the other handle's transaction must
see what that transaction committed. The soak on PostgreSQL (16 processes sharing one
scratchpad) had ``promote`` raise MemoryNotFoundError and ``review`` raise
DuplicateMemoryError on an entry another process had just moved out of the scratchpad:
the waiting handle still listed it there.

Each test holds handle A's transaction open (it moves or forgets a scratchpad entry),
starts handle B's call in a thread, waits until B is queued behind A's writer lock, and
only then lets A commit. B must act on the store as A left it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import FakeClock
from tests.support.pg_server import wait_for_a_queued_writer
from tiered_memory import AgentMemoryManager, Tier
from tiered_memory.errors import InvalidPromotionError, MemoryNotFoundError


@pytest.fixture
def pair(any_location: str) -> Iterator[tuple[AgentMemoryManager, AgentMemoryManager]]:
    """Handle A and handle B on one store (two processes' worth of RAM)."""
    a = AgentMemoryManager.open(any_location, embedder=None)
    b = AgentMemoryManager.open(any_location, embedder=None)
    try:
        yield a, b
    finally:
        b.close()
        a.close()


def _queued_behind(location: str) -> None:
    """Return once another call waits for the writer lock (on a file: after a while,
    since SQLite keeps no list of waiters)."""
    if location.startswith("postgresql"):
        wait_for_a_queued_writer(location)
    else:
        time.sleep(0.5)


def _while_a_commits(
    location: str, a: AgentMemoryManager, change: Callable[[], object], call: Callable[[], Any]
) -> Any:
    """Run ``call`` (on B) in a thread while A's transaction doing ``change`` is open;
    A commits once B waits for it. Returns what ``call`` returned, or raises what it raised."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # handed to the test below
            outcome["error"] = exc

    with a.transaction():
        change()
        thread = threading.Thread(target=run)
        thread.start()
        _queued_behind(location)
    thread.join(30)
    assert not thread.is_alive()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def test_promote_of_an_entry_another_handle_moved_out_of_the_scratchpad_succeeds(
    any_location: str, pair: tuple[AgentMemoryManager, AgentMemoryManager]
) -> None:
    a, b = pair
    entry = b.remember("the shared scratchpad entry", Tier.SCRATCHPAD)
    assert a.get(entry.id) is not None and b.scratchpad.by_id(entry.id) is not None
    record = _while_a_commits(
        any_location,
        a,
        lambda: a.promote(entry.id, Tier.EPISODIC, reason="A's eviction"),
        lambda: b.promote(entry.id, Tier.SEMANTIC, reason="B's promotion"),
    )
    assert (record.from_tier, record.to_tier) == (Tier.EPISODIC, Tier.SEMANTIC)
    for handle in (a, b):
        got = handle.get(entry.id)
        assert got is not None and got.tier is Tier.SEMANTIC
        assert handle.scratchpad.by_id(entry.id) is None
    tiers = [(r.from_tier, r.to_tier) for r in b.promotion_history(entry.id)]
    assert tiers == [(Tier.SCRATCHPAD, Tier.EPISODIC), (Tier.EPISODIC, Tier.SEMANTIC)]


def test_review_of_an_entry_another_handle_moved_out_of_the_scratchpad_succeeds(
    any_location: str, pair: tuple[AgentMemoryManager, AgentMemoryManager]
) -> None:
    a, b = pair
    entry = b.remember("the shared scratchpad entry", Tier.SCRATCHPAD)
    schedule = _while_a_commits(
        any_location,
        a,
        lambda: a.promote(entry.id, Tier.EPISODIC, reason="A's eviction"),
        lambda: b.review(entry.id, 4),
    )
    assert schedule.memory_id == entry.id and schedule.review_count == 1
    got = b.get(entry.id)
    assert got is not None and got.tier is Tier.EPISODIC and got.access_count == 1
    assert b.scratchpad.by_id(entry.id) is None
    assert a.scratchpad.items() == [] and b.scratchpad.items() == []


def test_review_of_an_entry_another_handle_forgot_does_not_bring_it_back(
    any_location: str, pair: tuple[AgentMemoryManager, AgentMemoryManager]
) -> None:
    a, b = pair
    entry = b.remember("the shared scratchpad entry", Tier.SCRATCHPAD)
    with pytest.raises(MemoryNotFoundError):
        _while_a_commits(
            any_location,
            a,
            lambda: a.forget(entry.id, reason="A forgot it"),
            lambda: b.review(entry.id, 4),
        )
    for handle in (a, b):
        assert handle.get(entry.id) is None
        assert handle.scratchpad.items() == []
    fresh = AgentMemoryManager.open(any_location, embedder=None)
    try:
        assert fresh.get(entry.id) is None and fresh.scratchpad.items() == []
    finally:
        fresh.close()


# --- a view behind the store without waiting: another agent's writer ------------------------
# Writers of different agents' scopes do not queue for each other on PostgreSQL, so a
# handle's view of the scratchpad can be behind even inside its own transaction. Below,
# the entry is moved or forgotten through the store directly (this handle's RAM is not
# told, as it would not be of another scope's commit not yet announced): each call must
# act on the store as it is, never fail on RAM's copy nor write it back.


def _moved_below_ram(memory: AgentMemoryManager, memory_id: str) -> None:
    memory.store.memories.promote_memory(memory_id, Tier.SCRATCHPAD, Tier.EPISODIC, "elsewhere")
    assert memory.scratchpad.by_id(memory_id) is not None  # RAM still lists it


def _forgotten_below_ram(memory: AgentMemoryManager, memory_id: str) -> None:
    memory.store.memories.forget_memory(memory_id, "elsewhere")
    assert memory.scratchpad.by_id(memory_id) is not None


def test_promote_and_review_follow_an_entry_moved_below_the_view(
    memory: AgentMemoryManager,
) -> None:
    entry = memory.remember("moved elsewhere", Tier.SCRATCHPAD)
    _moved_below_ram(memory, entry.id)
    schedule = memory.review(entry.id, 5)
    assert schedule.memory_id == entry.id
    assert memory.scratchpad.by_id(entry.id) is None and memory.scratchpad.items() == []
    record = memory.promote(entry.id, Tier.SEMANTIC, reason="known")
    assert (record.from_tier, record.to_tier) == (Tier.EPISODIC, Tier.SEMANTIC)
    got = memory.get(entry.id)
    assert got is not None and got.tier is Tier.SEMANTIC and got.access_count == 1


def test_promote_of_an_entry_moved_below_the_view_goes_on_from_where_it_is(
    memory: AgentMemoryManager,
) -> None:
    entry = memory.remember("moved elsewhere", Tier.SCRATCHPAD)
    _moved_below_ram(memory, entry.id)
    record = memory.promote(entry.id, Tier.SEMANTIC)
    assert (record.from_tier, record.to_tier) == (Tier.EPISODIC, Tier.SEMANTIC)
    assert memory.get(entry.id).tier is Tier.SEMANTIC  # type: ignore[union-attr]


def test_promote_to_the_tier_another_handle_already_reached_says_so(
    memory: AgentMemoryManager,
) -> None:
    entry = memory.remember("moved elsewhere", Tier.SCRATCHPAD)
    _moved_below_ram(memory, entry.id)
    with pytest.raises(InvalidPromotionError, match="already episodic; nothing changed"):
        memory.promote(entry.id, Tier.EPISODIC)
    assert [r.reason for r in memory.promotion_history(entry.id)] == ["elsewhere"]
    assert memory.scratchpad.items() == [] and memory.get(entry.id).tier is Tier.EPISODIC  # type: ignore[union-attr]


@pytest.mark.parametrize("call", ["link", "update", "review", "promote"])
def test_a_write_to_an_entry_forgotten_below_the_view_never_brings_it_back(
    memory: AgentMemoryManager, call: str
) -> None:
    entry = memory.remember("forgotten elsewhere", Tier.SCRATCHPAD)
    other = memory.remember("an episodic memory")
    _forgotten_below_ram(memory, entry.id)
    calls: dict[str, Callable[[], object]] = {
        "link": lambda: memory.link(entry.id, other.id),
        "update": lambda: memory.update(entry.id, importance=0.9),
        "review": lambda: memory.review(entry.id, 4),
        "promote": lambda: memory.promote(entry.id, Tier.EPISODIC),
    }
    with pytest.raises(MemoryNotFoundError):
        calls[call]()
    assert memory.get(entry.id) is None and memory.scratchpad.items() == []
    assert memory.store.memories.get_memory(entry.id) is None
    assert memory.get(other.id).linked_memories == ()  # type: ignore[union-attr]


def test_forget_of_an_entry_moved_below_the_view_forgets_it_where_it_is(
    memory: AgentMemoryManager,
) -> None:
    entry = memory.remember("moved elsewhere", Tier.SCRATCHPAD)
    _moved_below_ram(memory, entry.id)
    assert memory.forget(entry.id, reason="done") is True
    assert memory.get(entry.id) is None and memory.store.memories.get_memory(entry.id) is None
    assert memory.scratchpad.items() == []
    assert memory.forget(entry.id, reason="again") is False


def test_recall_reviews_skip_an_entry_forgotten_below_the_view(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    memory = make_memory(recall_review_quality=4)
    entry = memory.remember("the harbor ferry leaves at noon", Tier.SCRATCHPAD)
    kept = memory.remember("the harbor lights stay on")
    clock.advance(30 * 86_400_000)  # both due for review
    found = {hit.memory.id for hit in memory.recall("harbor", k=5)}
    assert {entry.id, kept.id} <= found  # both reviews queued
    _forgotten_below_ram(memory, entry.id)
    memory.flush()  # writes the queued reviews: the gone entry is skipped, not written back
    assert memory.store.memories.get_memory(entry.id) is None and memory.scratchpad.items() == []
    schedule = memory.schedule(kept.id)
    assert schedule is not None and schedule.review_count == 1


@pytest.mark.parametrize("gone", ["moved", "forgotten"])
def test_put_over_a_key_whose_entry_left_below_the_view_makes_a_new_entry(
    memory: AgentMemoryManager, gone: str
) -> None:
    old = memory.scratchpad.put("plan", "the old plan")
    (_moved_below_ram if gone == "moved" else _forgotten_below_ram)(memory, old.id)
    new = memory.scratchpad.put("plan", "the new plan")
    assert new.id != old.id and new.content == "the new plan"
    assert [(k, m.id) for k, m in memory.scratchpad.items()] == [("plan", new.id)]
    there = memory.store.memories.get_memory(old.id)
    if gone == "moved":  # left where the other handle put it, content and all
        assert there is not None and there.tier is Tier.EPISODIC
        assert there.content == "the old plan"
    else:  # a forgotten id never comes back
        assert there is None


def test_scratchpad_forget_and_delete_of_an_entry_gone_below_the_view_say_false(
    memory: AgentMemoryManager,
) -> None:
    first = memory.scratchpad.put("a", "first")
    second = memory.scratchpad.put("b", "second")
    _forgotten_below_ram(memory, first.id)
    _forgotten_below_ram(memory, second.id)
    assert memory.scratchpad.forget(first.id, "again") is False
    assert memory.scratchpad.delete("b") is False
    assert memory.scratchpad.items() == []

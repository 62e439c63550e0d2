"""The same fact twice: remember() reinforces an identical live memory; consolidate()
merges near-duplicates with their tags, links and graph provenance."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from persistence import InvalidInputError, InvalidTypeError, Memory, Tier
from tests.conftest import FakeClock
from tiered_memory import AgentMemoryManager


def episodic_count(memory: AgentMemoryManager) -> int:
    return memory.statistics().tier_counts[Tier.EPISODIC]


def test_identical_content_reinforces_the_live_memory(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    memory = make_memory(embedder=None, extractor=None)
    session = memory.start_session()
    first = memory.remember("The user prefers  dark mode", importance=0.3,
                            session_id=session.session_id)  # fmt: skip
    clock.advance(1000)
    again = memory.remember("the user PREFERS dark mode ", importance=0.9,
                            session_id=session.session_id, entities=["Dark Mode"])  # fmt: skip
    assert again.id == first.id and again.content == first.content
    assert (again.importance, again.access_count) == (0.9, 1)
    assert memory.schedule(first.id).review_count == 1  # type: ignore[union-attr]
    assert [m.id for m in memory.graph.memories_about("Dark Mode")] == [first.id]
    assert episodic_count(memory) == 1
    assert memory.statistics().graph.deduplicated == 1
    # Other scopes, other tiers and other words are other memories.
    memory.remember("The user prefers dark mode")  # no session
    memory.remember("The user prefers dark mode", agent_id="b", session_id=session.session_id)
    memory.remember("The user prefers dark mode", Tier.SEMANTIC, session_id=session.session_id)
    memory.remember("The user prefers dark modes", session_id=session.session_id)
    assert episodic_count(memory) == 4
    with pytest.raises(InvalidInputError):
        memory.remember("The user prefers dark mode", importance=2.0,
                        session_id=session.session_id)  # fmt: skip


@pytest.mark.slow  # 1.7 s measured on a busy machine
def test_a_forgotten_or_edited_memory_is_not_a_twin(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    memory = make_memory(embedder=None, extractor=None)
    one = memory.remember("tea at five")
    memory.forget(one.id)
    two = memory.remember("tea at five")
    assert two.id != one.id
    memory.update(two.id, content="coffee at six")
    three = memory.remember("tea at five")
    assert three.id != two.id and episodic_count(memory) == 2
    assert memory.remember("coffee at six").id == two.id


@pytest.mark.slow  # 1.9 s measured on a busy machine
def test_a_memory_inserted_through_the_store_is_found_by_remember(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    memory = make_memory(embedder=None, extractor=None)
    (stored,) = memory.store.memories.insert_memories(
        [Memory.create("Lunch with Ana", Tier.SEMANTIC)]
    )
    assert memory.store.memories.find_same_content(
        " lunch WITH ana", Tier.SEMANTIC, None, None
    ) == [stored.id]
    assert (
        memory.store.memories.find_same_content("lunch with ana", Tier.EPISODIC, None, None) == []
    )
    assert memory.remember("lunch with Ana", Tier.SEMANTIC).id == stored.id
    assert memory.statistics().tier_counts[Tier.SEMANTIC] == 1


@pytest.mark.slow  # 2.0 s measured on a busy machine
def test_dedup_can_be_turned_off(make_memory: Callable[..., AgentMemoryManager]) -> None:
    memory = make_memory(embedder=None, extractor=None, dedup=False)
    assert memory.remember("same").id != memory.remember("same").id
    assert memory.statistics().graph.deduplicated == 0


@pytest.mark.slow  # 2.2 s measured on a busy machine
def test_consolidate_merges_near_duplicates_with_their_links(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    memory = make_memory(embedder=None, extractor=None)
    older = memory.remember("Ana lives in Lyon", tags=["home"], importance=0.4,
                            embedding=[1.0, 0.0, 0.0, 0.0], entities=["Lyon"])  # fmt: skip
    clock.advance(1000)
    other = memory.remember("unrelated", embedding=[0.0, 1.0, 0.0, 0.0])
    newer = memory.remember("Ana has moved to Lyon", tags=["move"], importance=0.8,
                            embedding=[0.99, 0.05, 0.0, 0.0],
                            relations=[("Ana", "lives_in", "Lyon")])  # fmt: skip
    memory.link(newer.id, other.id)
    report = memory.consolidate()
    assert report.merged == ((newer.id, older.id),)
    kept = memory.get(older.id)
    assert kept is not None and memory.get(newer.id) is None
    assert set(kept.tags) == {"home", "move"} and kept.importance == 0.8
    assert kept.linked_memories == (other.id,)
    assert [m.id for m in memory.graph.memories_about("Ana")] == [older.id]
    assert memory.graph.neighbors("Ana")[0].entity.name == "Lyon"
    [log] = memory.forgetting_log(newer.id)
    assert log.reason == f"near-duplicate of {older.id}"
    assert memory.statistics().graph.near_duplicates_merged == 1
    assert memory.consolidate().merged == ()
    assert memory.check_integrity().ok


@pytest.mark.slow  # 1.8 s measured on a busy machine
def test_dedup_false_on_one_call_adds_a_second_memory(any_location: str) -> None:
    with AgentMemoryManager.open(any_location, embedder=None) as memory:
        first = memory.remember("The office is in Berlin")
        again = memory.remember("the office is in  berlin")
        apart = memory.remember("The office is in Berlin", dedup=False)
        assert again.id == first.id and apart.id != first.id
        with pytest.raises(InvalidTypeError):
            memory.remember("The office is in Berlin", dedup="no")  # type: ignore[arg-type]


def test_the_rule_is_stated_once_for_the_keys_and_the_comparison() -> None:
    """The engines' content keys and the domain's comparison normalise alike: texts the
    domain calls the same get the same key, for the same agent and session only."""
    from persistence.dedup_key import content_key
    from tiered_memory.dedup import normalised

    same = ("Ｔｈｅ  Cat\tSAT", "the cat sat")  # NFKC, case and whitespace
    assert normalised(same[0]) == normalised(same[1])
    assert content_key(same[0], "a", "s") == content_key(same[1], "a", "s")
    assert content_key(same[0], "a", "s") != content_key(same[1], "b", "s")
    assert content_key(same[0], "a", "s") != content_key(same[1], "a", None)

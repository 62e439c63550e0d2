"""The stores (SQLite and PostgreSQL): the three tiers, validation of bad input, queries
and promotion."""

from __future__ import annotations

import datetime
import math
from dataclasses import replace

import numpy as np
import pytest

from persistence import (
    DuplicateMemoryError,
    EmbeddingDimensionError,
    InvalidEmbeddingError,
    InvalidInputError,
    InvalidPromotionError,
    InvalidTypeError,
    Memory,
    MemoryNotFoundError,
    QueryOptions,
    RepetitionSchedule,
    Tier,
)
from persistence.postgres import PostgresStore
from persistence.sqlite import SQLiteStore
from tests.conftest import FakeClock
from tests.support.backends import refuse_inserts, snapshot, store_on_each_backend  # noqa: F401


def test_episodic_round_trip_keeps_every_field(store: SQLiteStore) -> None:
    memory = Memory.create(
        "The user prefers dark mode",
        Tier.EPISODIC,
        session_id="s1",
        agent_id="a1",
        category="ui",
        tags=("ui", "prefs"),
        importance=0.8,
        retention=0.9,
        token_count=6,
        source="chat",
        metadata={"nested": {"k": [1, 2.5, "x"]}, "ok": True},
        linked_memories=("m0",),
        embedding=[0.1, 0.2, 0.3],
        access_count=3,
        last_accessed_at=5,
    )
    stored = store.put_episodic(memory)
    again = store.get_episodic(memory.id)
    assert again == stored == memory
    assert again is not None and again.embedding is not None
    assert again.embedding.dtype == np.float32
    assert np.array_equal(again.embedding, np.asarray([0.1, 0.2, 0.3], dtype=np.float32))
    assert not again.embedding.flags.writeable


def test_put_updates_in_place(store: SQLiteStore) -> None:
    memory = store.put_semantic(Memory.create("v1", Tier.SEMANTIC, tags=("a",)))
    later = memory.created_at + 9
    store.put_semantic(replace(memory, content="v2", tags=("b", "c"), updated_at=later))
    again = store.get_semantic(memory.id)
    assert again is not None
    assert (again.content, again.tags, again.updated_at) == ("v2", ("b", "c"), later)
    assert store.memories.count(Tier.SEMANTIC) == 1


def test_tags_keep_order_and_lose_duplicates(store: SQLiteStore) -> None:
    stored = store.put_episodic(Memory.create("x", tags=("z", "a", "z", "m")))
    assert stored.tags == ("z", "a", "m")
    again = store.get_episodic(stored.id)
    assert again is not None and again.tags == ("z", "a", "m")


def test_delete_removes_tags_and_schedule(store: SQLiteStore) -> None:
    memory = store.put_episodic(Memory.create("x", tags=("t",)))
    store.put_repetition_schedule(RepetitionSchedule(memory.id, 10, 1000))
    assert store.delete_episodic(memory.id) is True
    assert store.get_episodic(memory.id) is None
    assert store.get_repetition_schedule(memory.id) is None
    assert store.query_episodic(QueryOptions(tags=("t",))) == []
    assert store.delete_episodic(memory.id) is False
    assert store.delete_semantic("missing") is False


def test_scratchpad_by_key(store: SQLiteStore) -> None:
    goal = store.put_scratchpad("goal", Memory.create("Ship v1", Tier.SCRATCHPAD))
    store.put_scratchpad("plan", Memory.create("Write tests", Tier.SCRATCHPAD))
    assert store.get_scratchpad("goal") == goal
    assert goal.key == "goal"
    newer = store.put_scratchpad("goal", Memory.create("Ship v2", Tier.SCRATCHPAD))
    assert store.get_scratchpad("goal") == newer
    assert sorted(m.key or "" for m in store.get_all_scratchpad()) == ["goal", "plan"]
    assert store.delete_scratchpad("plan") is True
    assert store.delete_scratchpad("plan") is False
    assert store.clear_scratchpad() == 1
    assert store.get_all_scratchpad() == []


def test_memory_of_the_wrong_tier_is_refused(store: SQLiteStore) -> None:
    with pytest.raises(InvalidInputError, match="not episodic"):
        store.put_episodic(Memory.create("x", Tier.SEMANTIC))


def test_one_id_lives_in_one_tier(store: SQLiteStore) -> None:
    memory = store.put_episodic(Memory.create("x"))
    before = snapshot(store)
    with pytest.raises(DuplicateMemoryError, match="already lives in episodic"):
        store.put_semantic(replace(memory, tier=Tier.SEMANTIC))
    assert snapshot(store) == before


SELF_REFERENCING: dict[str, object] = {}
SELF_REFERENCING["me"] = SELF_REFERENCING

BAD_FIELDS = [
    ("content", 42, InvalidTypeError),
    ("content", None, InvalidTypeError),
    ("id", "", InvalidInputError),
    ("tags", "ui", InvalidTypeError),
    ("tags", ("ok", 3), InvalidTypeError),
    ("importance", 1.5, InvalidInputError),
    ("importance", math.nan, InvalidInputError),
    ("importance", "high", InvalidTypeError),
    ("retention", -0.1, InvalidInputError),
    ("token_count", -1, InvalidInputError),
    ("created_at", 1.5, InvalidTypeError),
    ("session_id", 7, InvalidTypeError),
    ("metadata", ["not", "a", "dict"], InvalidTypeError),
    ("metadata", {"x": object()}, InvalidTypeError),
    ("metadata", {"x": math.inf}, InvalidInputError),
    ("embedding", [1.0, math.nan, 2.0], InvalidEmbeddingError),
    ("embedding", [1.0, math.inf, 2.0], InvalidEmbeddingError),
    ("embedding", [[1.0, 2.0], [3.0, 4.0]], InvalidEmbeddingError),
    ("embedding", [], InvalidEmbeddingError),
    ("embedding", ["a", "b"], InvalidEmbeddingError),
    ("content", "broken \ud800 surrogate", InvalidInputError),
    ("created_at", 2**64, InvalidInputError),
    ("importance", 10**400, InvalidInputError),
    ("metadata", {"when": datetime.date(2024, 1, 1)}, InvalidTypeError),
    ("metadata", {"set": {1, 2}}, InvalidTypeError),
    ("metadata", {1: "non-str key"}, InvalidTypeError),
    ("metadata", {"big": 2**70}, InvalidInputError),
    ("metadata", SELF_REFERENCING, InvalidInputError),
]


@pytest.mark.slow
@pytest.mark.parametrize(("field", "value", "error"), BAD_FIELDS)
def test_bad_input_raises_and_changes_nothing(
    store: SQLiteStore, field: str, value: object, error: type[Exception]
) -> None:
    store.put_episodic(Memory.create("keep me", embedding=[1.0, 2.0, 3.0]))
    before = snapshot(store)
    with pytest.raises(error):
        store.put_episodic(replace(Memory.create("new"), **{field: value}))
    assert snapshot(store) == before


def test_first_embedding_fixes_the_dimension(store: SQLiteStore) -> None:
    store.put_episodic(Memory.create("a", embedding=[1.0, 0.0, 0.0, 0.0]))
    before = snapshot(store)
    with pytest.raises(EmbeddingDimensionError, match="3 dimensions but this store holds 4"):
        store.put_semantic(Memory.create("b", Tier.SEMANTIC, embedding=[1.0, 0.0, 0.0]))
    assert snapshot(store) == before
    store.put_semantic(Memory.create("c", Tier.SEMANTIC, embedding=[0.0, 1.0, 0.0, 0.0]))


def test_configured_dimension_is_enforced_and_remembered(db_path: object) -> None:
    with SQLiteStore(str(db_path), embedding_dim=4) as store:
        with pytest.raises(EmbeddingDimensionError):
            store.put_episodic(Memory.create("a", embedding=[1.0, 2.0]))
        store.put_episodic(Memory.create("a", embedding=[1.0, 2.0, 3.0, 4.0]))
    with pytest.raises(EmbeddingDimensionError):
        SQLiteStore(str(db_path), embedding_dim=8).open()


def test_configured_dimension_is_enforced_and_remembered_on_postgres(pg_url: str) -> None:
    with PostgresStore(pg_url, embedding_dim=4) as store:
        with pytest.raises(EmbeddingDimensionError):
            store.put_episodic(Memory.create("a", embedding=[1.0, 2.0]))
        with pytest.raises(EmbeddingDimensionError):
            store.memories.insert_memories([Memory.create("a", embedding=[1.0, 2.0])])
        store.put_episodic(Memory.create("a", embedding=[1.0, 2.0, 3.0, 4.0]))
        assert store.get_meta("embedding_dim") == "4"
    with pytest.raises(EmbeddingDimensionError):
        PostgresStore(pg_url, embedding_dim=8).open()


# --- queries ---------------------------------------------------------------------------


@pytest.fixture
def corpus(store: SQLiteStore, clock: FakeClock) -> list[Memory]:
    """Ten episodic memories with known sessions, agents, tags, categories and times."""
    out = []
    for i in range(10):
        clock.advance(1000)
        out.append(
            store.put_episodic(
                Memory.create(
                    f"m{i}",
                    now=clock(),
                    session_id=f"s{i % 2}",
                    agent_id=f"a{i % 3}",
                    category="work" if i < 5 else "home",
                    tags=tuple(t for t, keep in (("red", i % 2 == 0), ("big", i >= 6)) if keep),
                    importance=i / 10,
                )
            )
        )
    return out


def _contents(memories: list[Memory]) -> list[str]:
    return sorted(m.content for m in memories)


def _expected(corpus: list[Memory], keep: object) -> list[str]:
    return sorted(m.content for m in corpus if keep(m))  # type: ignore[operator]


def test_filter_by_session(store: SQLiteStore, corpus: list[Memory]) -> None:
    got = store.query_episodic(QueryOptions(session_id="s1"))
    assert _contents(got) == _expected(corpus, lambda m: m.session_id == "s1")


def test_filter_by_agent(store: SQLiteStore, corpus: list[Memory]) -> None:
    got = store.query_episodic(QueryOptions(agent_id="a2"))
    assert _contents(got) == _expected(corpus, lambda m: m.agent_id == "a2")
    assert got


def test_filter_by_one_tag(store: SQLiteStore, corpus: list[Memory]) -> None:
    got = store.query_episodic(QueryOptions(tags=("red",)))
    assert _contents(got) == _expected(corpus, lambda m: "red" in m.tags)


def test_filter_by_all_tags(store: SQLiteStore, corpus: list[Memory]) -> None:
    got = store.query_episodic(QueryOptions(tags=("red", "big")))
    assert _contents(got) == _expected(corpus, lambda m: {"red", "big"} <= set(m.tags))
    assert _contents(got) == ["m6", "m8"]


def test_filter_by_category(store: SQLiteStore, corpus: list[Memory]) -> None:
    got = store.query_episodic(QueryOptions(category="home"))
    assert _contents(got) == _expected(corpus, lambda m: m.category == "home")


def test_filter_by_time_range(store: SQLiteStore, corpus: list[Memory]) -> None:
    start, end = corpus[2].created_at, corpus[5].created_at
    got = store.query_episodic(QueryOptions(created_after=start, created_before=end))
    assert _contents(got) == ["m2", "m3", "m4"]
    assert _contents(store.query_episodic(QueryOptions(created_after=corpus[8].created_at))) == [
        "m8",
        "m9",
    ]


def test_filters_combine(store: SQLiteStore, corpus: list[Memory]) -> None:
    got = store.query_episodic(QueryOptions(session_id="s0", category="home", tags=("big",)))
    assert _contents(got) == ["m6", "m8"]


def test_order_limit_offset(store: SQLiteStore, corpus: list[Memory]) -> None:
    newest = store.query_episodic(QueryOptions(limit=3))
    assert [m.content for m in newest] == ["m9", "m8", "m7"]
    page = store.query_episodic(QueryOptions(limit=3, offset=3))
    assert [m.content for m in page] == ["m6", "m5", "m4"]
    by_importance = store.query_episodic(QueryOptions(order_by="importance", descending=False))
    assert [m.content for m in by_importance] == [f"m{i}" for i in range(10)]
    assert len(store.query_episodic(QueryOptions(limit=None))) == 10
    assert store.query_semantic() == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "options",
    [
        QueryOptions(order_by="content; DROP TABLE episodic"),  # type: ignore[arg-type]
        QueryOptions(limit=-1),
        QueryOptions(offset=-5),
        QueryOptions(tags="red"),  # type: ignore[arg-type]
        QueryOptions(created_after="yesterday"),  # type: ignore[arg-type]
        QueryOptions(session_id=123),  # type: ignore[arg-type]
        QueryOptions(tags=(1,)),  # type: ignore[arg-type]
        QueryOptions(descending="no"),  # type: ignore[arg-type]
        QueryOptions(limit=2**64),
    ],
)
def test_bad_query_options_are_refused(store: SQLiteStore, options: QueryOptions) -> None:
    with pytest.raises(InvalidInputError):
        store.query_episodic(options)


# --- promotion -------------------------------------------------------------------------


def test_promotion_moves_logs_and_keeps_tags_and_schedule(
    store: SQLiteStore, clock: FakeClock
) -> None:
    memory = store.put_scratchpad(
        "goal",
        Memory.create(
            "Ship v1", Tier.SCRATCHPAD, tags=("plan",), embedding=[1.0, 2.0], now=clock()
        ),
    )
    store.put_repetition_schedule(RepetitionSchedule(memory.id, 50, 1000))
    clock.advance(5)
    record = store.promote_memory(memory.id, Tier.SCRATCHPAD, Tier.EPISODIC, reason="pressure")
    assert store.get_scratchpad("goal") is None
    moved = store.get_episodic(memory.id)
    assert moved is not None
    assert moved.key is None and moved.metadata["scratchpad_key"] == "goal"
    assert moved.tags == ("plan",) and moved.updated_at == clock()
    assert moved.embedding is not None and list(moved.embedding) == [1.0, 2.0]
    assert store.get_repetition_schedule(memory.id) is not None
    assert (record.from_tier, record.to_tier, record.reason) == (
        Tier.SCRATCHPAD,
        Tier.EPISODIC,
        "pressure",
    )
    store.promote_memory(memory.id, Tier.EPISODIC, Tier.SEMANTIC)
    history = store.memories.get_promotion_history(memory.id)
    assert [(h.from_tier, h.to_tier) for h in history] == [
        (Tier.SCRATCHPAD, Tier.EPISODIC),
        (Tier.EPISODIC, Tier.SEMANTIC),
    ]
    assert store.get_episodic(memory.id) is None
    assert store.get_semantic(memory.id) is not None


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (Tier.SEMANTIC, Tier.EPISODIC),
        (Tier.EPISODIC, Tier.SCRATCHPAD),
        (Tier.EPISODIC, Tier.EPISODIC),
    ],
)
def test_promotion_only_goes_forward(store: SQLiteStore, source: Tier, target: Tier) -> None:
    with pytest.raises(InvalidPromotionError, match="scratchpad -> episodic -> semantic"):
        store.promote_memory("any", source, target)


@pytest.mark.slow  # 1.0 s measured on a busy machine
def test_promoting_a_missing_memory_changes_nothing(store: SQLiteStore) -> None:
    memory = store.put_semantic(Memory.create("x", Tier.SEMANTIC))
    before = snapshot(store)
    with pytest.raises(MemoryNotFoundError, match="episodic"):
        store.promote_memory(memory.id, Tier.EPISODIC, Tier.SEMANTIC)
    with pytest.raises(InvalidInputError, match="from_tier"):
        store.promote_memory(memory.id, "attic", Tier.SEMANTIC)  # type: ignore[arg-type]
    assert snapshot(store) == before


def test_promotion_that_fails_midway_is_rolled_back_whole(store: SQLiteStore) -> None:
    memory = store.put_episodic(Memory.create("x", tags=("t",)))
    refuse_inserts(store, "promotion_log", "log is full")
    before = snapshot(store)
    with pytest.raises(Exception, match="log is full"):
        store.promote_memory(memory.id, Tier.EPISODIC, Tier.SEMANTIC)
    assert snapshot(store) == before
    assert store.get_episodic(memory.id) == memory
    assert store.get_semantic(memory.id) is None


def test_get_memory_finds_any_tier(store: SQLiteStore) -> None:
    a = store.put_episodic(Memory.create("a"))
    b = store.put_semantic(Memory.create("b", Tier.SEMANTIC))
    assert store.memories.get_memory(a.id) == a and store.memories.get_memory(b.id) == b
    assert store.memories.get_memory("nope") is None


def test_returned_memories_share_nothing_mutable_with_the_store(store: SQLiteStore) -> None:
    mine = {"nested": {"a": 1}, "pair": (1, 2)}
    stored = store.put_episodic(Memory.create("x", metadata=mine))
    mine["nested"]["a"] = 999
    with pytest.raises(TypeError):
        stored.metadata["a"] = 1  # type: ignore[index]
    assert stored.metadata == {"nested": {"a": 1}, "pair": [1, 2]}  # as it reads back
    assert store.get_episodic(stored.id) == stored

"""remember_many() with per-record fields, and batches of remember() in one transaction:
all or nothing, every index exact at commit (and inside the transaction), and the
keyword window written once per transaction rather than once per memory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from persistence import (
    DuplicateMemoryError,
    EmbeddingDimensionError,
    InvalidInputError,
    InvalidTypeError,
    SessionNotFoundError,
    Tier,
    TieredMemoryError,
)
from persistence.sqlite import SQLiteStore
from tests.engines.sqlite.test_keyword_context import found
from tests.support.backends import (
    index_rows,
    is_postgres,
    keyword_state,
    rebuilt_keyword_state,
)
from tiered_memory import AgentMemoryManager

Make = Callable[..., AgentMemoryManager]


def _vector(seed: int) -> np.ndarray:
    vector = np.random.default_rng(seed).standard_normal(8).astype(np.float32)
    return vector / np.linalg.norm(vector)


def _counts(memory: AgentMemoryManager) -> tuple[Any, ...]:
    stats = memory.statistics().storage
    fts, tags = index_rows(memory.store)
    return (stats.episodic_count, stats.semantic_count, stats.scratchpad_count,
            stats.schedule_count, fts, tags)  # fmt: skip


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_each_record_carries_its_own_fields(make_memory: Make) -> None:
    memory = make_memory(embedder=None)
    a, b = memory.start_session().session_id, memory.start_session().session_id
    stored = memory.remember_many(
        [
            {"content": "alpha turn", "session_id": a, "tags": ["x"], "importance": 0.9},
            {"content": "bravo turn", "session_id": b, "metadata": {"n": 1}},
            "charlie turn",
            {
                "content": "delta fact",
                "tier": Tier.SEMANTIC,
                "agent_id": "bot",
                "embedding": _vector(1),
            },
            {"content": "echo note", "tier": "scratchpad", "key": "note", "session_id": a},
            {"content": "fox turn", "session_id": a, "source": "chat", "category": "c"},
        ],  # fmt: skip
        tags=["batch"],
    )
    assert [m.content for m in stored] == [
        "alpha turn", "bravo turn", "charlie turn", "delta fact", "echo note", "fox turn",
    ]  # fmt: skip
    first, second, third, fourth, fifth, sixth = stored
    assert (first.session_id, first.tags, first.importance) == (a, ("x",), 0.9)
    assert (second.session_id, dict(second.metadata), second.tags) == (b, {"n": 1}, ("batch",))
    assert (third.tier, third.session_id) == (Tier.EPISODIC, None)
    assert (fourth.tier, fourth.agent_id) == (Tier.SEMANTIC, "bot")
    assert fourth.embedding is not None and np.allclose(fourth.embedding, _vector(1))
    assert (fifth.tier, fifth.key) == (Tier.SCRATCHPAD, "note")
    assert memory.scratchpad.get("note") is not None
    assert (sixth.source, sixth.category) == ("chat", "c")
    for m in stored:
        assert memory.get(m.id) == m
        assert memory.schedule(m.id) is not None
    # The window follows each record's own session: alpha and fox are neighbours in a.
    assert set(found(memory.store, "alpha")) == {first.id, sixth.id}
    assert set(found(memory.store, "bravo")) == {second.id}


@pytest.mark.slow  # 1.3 s measured on a busy machine
def test_the_old_call_form_still_works(make_memory: Make) -> None:
    memory = make_memory(embedder=None)
    stored = memory.remember_many(["one", "two"], Tier.SEMANTIC, tags=["t"], importance=0.7)
    assert [(m.content, m.tier, m.tags, m.importance) for m in stored] == [
        ("one", Tier.SEMANTIC, ("t",), 0.7),
        ("two", Tier.SEMANTIC, ("t",), 0.7),
    ]
    assert memory.remember_many([]) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ({"content": "x", "colour": "red"}, InvalidInputError),
        ({"session_id": "nobody"}, InvalidInputError),  # no content
        ({"content": 5}, InvalidTypeError),
        ({"content": "x", "importance": 2.0}, InvalidInputError),
        ({"content": "x", "tier": "attic"}, InvalidInputError),
        ({"content": "x", "key": "k"}, InvalidInputError),
        ({"content": "x", "metadata": {"when": object()}}, InvalidTypeError),
        ({"content": "x", "tags": ["ok", 3]}, InvalidTypeError),
        ({"content": "x", "embedding": [1.0, 2.0, 3.0]}, EmbeddingDimensionError),
        ({"content": "x", "session_id": "nobody"}, SessionNotFoundError),
        (b"bytes", InvalidTypeError),
    ],
)
def test_a_bad_record_anywhere_writes_nothing(
    make_memory: Make, bad: object, error: type[TieredMemoryError]
) -> None:
    memory = make_memory(embedder=None)
    session = memory.start_session().session_id
    memory.remember("already here", embedding=_vector(0))  # fixes the dimension at 8
    before = _counts(memory)
    good = [{"content": f"good {i}", "session_id": session, "embedding": _vector(i)}
            for i in range(5)]  # fmt: skip
    records = [*good, bad, {"content": "after", "tier": Tier.SCRATCHPAD, "key": "k2"}]
    with pytest.raises(error):
        memory.remember_many(records)
    assert _counts(memory) == before
    assert found(memory.store, "good") == []
    assert memory.scratchpad.get("k2") is None
    assert memory.check_integrity().ok


@pytest.mark.slow  # 1.2 s measured on a busy machine
def test_a_record_sequence_not_a_text(make_memory: Make) -> None:
    memory = make_memory(embedder=None)
    with pytest.raises(InvalidTypeError):
        memory.remember_many("one text")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        memory.remember_many(["x"], colour="red")


@pytest.mark.slow  # 1.6 s measured on a busy machine
def test_duplicate_ids_are_refused_by_the_store(make_memory: Make) -> None:
    from persistence import Memory

    memory = make_memory(embedder=None)
    existing = memory.remember("first")
    batch = [Memory.create("a", id="dup"), Memory.create("b", id="dup")]
    with pytest.raises(DuplicateMemoryError):
        memory.store.memories.insert_memories(batch)
    with pytest.raises(DuplicateMemoryError):
        memory.store.memories.insert_memories([Memory.create("c", Tier.SEMANTIC, id=existing.id)])
    assert memory.statistics().storage.semantic_count == 0


def _interleaved(memory: AgentMemoryManager, count: int, sessions: list[str]) -> list[Any]:
    return [
        {"content": f"w{n}x turn", "session_id": sessions[n % len(sessions)],
         "tier": Tier.SEMANTIC if n % 7 == 0 else Tier.EPISODIC}
        for n in range(count)
    ]  # fmt: skip


@pytest.mark.slow  # 2.3 s measured on a busy machine
def test_batches_keep_the_keyword_index_exact(make_memory: Make) -> None:
    memory = make_memory(embedder=None)
    sessions = [memory.start_session().session_id for _ in range(5)]
    for n in range(30):  # one transaction each, as before
        memory.remember(f"v{n}x early", session_id=sessions[n % 5])
    memory.remember_many(_interleaved(memory, 120, sessions))
    victims = memory.query(session_id=sessions[1])[:3]
    with memory.transaction():
        for n in range(40):
            memory.remember(f"u{n}x late", session_id=sessions[n % 5])
        for victim in victims:
            memory.forget(victim.id)
        memory.update(memory.query(session_id=sessions[2])[0].id, content="edited words")
        # Inside the transaction, keyword search already sees every write.
        inside = set(found(memory.store, "u3x"))
        assert len(inside) == 5  # itself, two before and two after in its session
        words = ["u3x", "w10x", "v4x", "edited", "early", "late", "turn"]
        assert keyword_state(memory.store, words) == rebuilt_keyword_state(memory.store, words)
    assert set(found(memory.store, "u3x")) == inside
    assert keyword_state(memory.store, words) == rebuilt_keyword_state(memory.store, words)
    if not is_postgres(memory.store):  # PostgreSQL indexes in the writing statement
        with memory.store.engine.reading() as conn:
            assert conn.execute("SELECT count(*) FROM keyword_dirty").fetchone() == (0,)
    assert memory.check_integrity().ok


def test_a_large_batch_is_exact_and_leaves_the_merge_setting_as_it_was(
    make_sqlite_memory: Make,
) -> None:  # SQLite only: FTS5's automerge setting
    """A batch of at least ``BATCH_ROWS`` writes its keyword rows with FTS5's automerge
    off and sets it back before the commit."""
    from persistence.sqlite import keyword_upkeep

    def automerge() -> object:
        with memory.store.engine.reading() as conn:
            row = conn.execute("SELECT v FROM memory_fts_config WHERE k = 'automerge'")
            return (row.fetchall() or [(4,)])[0][0]

    memory = make_sqlite_memory(embedder=None)
    sessions = [memory.start_session().session_id for _ in range(7)]
    memory.remember_many(_interleaved(memory, 50, sessions))
    before = automerge()
    records = _interleaved(memory, keyword_upkeep.BATCH_ROWS + 150, sessions)
    memory.remember_many(records)
    assert automerge() == before
    words = ["w10x", "w300x", "turn", "early"]
    assert keyword_state(memory.store, words) == rebuilt_keyword_state(memory.store, words)
    assert memory.check_integrity().ok


@pytest.mark.slow  # 1.8 s measured on a busy machine
def test_a_rolled_back_batch_leaves_the_index_as_it_was(make_memory: Make) -> None:
    memory = make_memory(embedder=None)
    session = memory.start_session().session_id
    memory.remember_many([{"content": f"k{n}x", "session_id": session} for n in range(10)])
    words = [f"k{n}x" for n in range(10)]
    before = keyword_state(memory.store, words)
    with pytest.raises(RuntimeError), memory.transaction():
        memory.remember_many([{"content": "k9x more", "session_id": session}] * 3)
        memory.forget(memory.query(session_id=session)[0].id)
        raise RuntimeError("changed my mind")
    assert keyword_state(memory.store, words) == before
    assert keyword_state(memory.store, words) == rebuilt_keyword_state(memory.store, words)


def test_a_transaction_of_remembers_writes_the_window_as_one_segment(tmp_path: Any) -> None:
    """FTS5 flushes a segment whenever a row's rowid is lower than the one before: the
    window used to be re-indexed inside each write, flushing three segments per memory
    (one per neighbour), which is what made writes slow down as the file grew."""
    with AgentMemoryManager.open(tmp_path / "seg.db", embedder=None) as memory:
        sessions = [memory.start_session().session_id for _ in range(50)]
        for n in range(100):
            memory.remember(f"first {n}", session_id=sessions[n % 50])
        flushes: list[str] = []
        memory.store._writer.set_profile(  # type: ignore[union-attr]
            lambda sql, _ns: flushes.append(sql) if "memory_fts_idx'(segid" in sql else None
        )
        with memory.transaction():
            for n in range(200):
                memory.remember(f"second {n}", session_id=sessions[n % 50])
        memory.store._writer.set_profile(None)  # type: ignore[union-attr]
        # One new segment (a few index entries); version 7 wrote over 400.
        assert 0 < len(flushes) < 20, len(flushes)


def test_remember_opens_no_savepoint(tmp_path: Any) -> None:
    """Inside a savepoint SQLite makes every write that fires a trigger slower as the file
    grows (about 250 µs a row at 60k memories): remember() used to open four, one per
    store call. It joins the transaction instead, alone or inside a larger one."""
    with AgentMemoryManager.open(tmp_path / "sp.db", embedder=None) as memory:
        session = memory.start_session().session_id
        statements: list[str] = []
        memory.store._writer.set_profile(  # type: ignore[union-attr]
            lambda sql, _ns: statements.append(sql) if "SAVEPOINT" in sql.upper() else None
        )
        memory.remember("alone", session_id=session, tags=["t"], embedding=_vector(1))
        with memory.transaction():
            memory.remember("grouped", session_id=session, embedding=_vector(2))
            memory.remember_many([{"content": "many", "session_id": session}])
        memory.store._writer.set_profile(None)  # type: ignore[union-attr]
        assert statements == []
        assert len(found(memory.store, "grouped")) == 3


@pytest.mark.slow  # 1.5 s measured on a busy machine
def test_a_joined_block_that_fails_before_writing_leaves_the_transaction_usable(
    make_memory: Make,
) -> None:
    memory = make_memory(embedder=None)
    with memory.transaction():
        kept = memory.remember("kept")
        with pytest.raises(SessionNotFoundError):
            memory.remember("refused", session_id="nobody")
        with pytest.raises(InvalidInputError):
            memory.remember_many(["fine", {"content": "bad", "importance": 5.0}])
        also = memory.remember("also kept")
    assert memory.get(kept.id) is not None and memory.get(also.id) is not None
    assert memory.statistics().storage.episodic_count == 2


@pytest.mark.slow  # 2.3 s measured on a busy machine
def test_a_joined_block_that_fails_after_writing_aborts_the_transaction(
    make_memory: Make,
) -> None:
    from persistence import TransactionAbortedError

    memory = make_memory(embedder=None)
    store = memory.store
    with pytest.raises(TransactionAbortedError), store.transaction():
        memory.remember("first")
        with pytest.raises(RuntimeError), store.transaction(join=True):
            memory.remember("half")
            raise RuntimeError("after a write")
        memory.remember("after")  # refused: the block above wrote before it failed
    assert memory.statistics().storage.episodic_count == 0
    assert found(store, "first") == [] and memory.check_integrity().ok


def test_writes_after_a_batch_that_reset_the_writers_schema_are_indexed(tmp_path: Any) -> None:
    """A large batch is followed by a schema reset on the writer (FTS5's per-connection
    state starts over, see persistence.sqlite.database.RESET_AFTER_CHANGES): the batch and the
    writes after it are all in the keyword index, which the rebuild agrees with."""
    with AgentMemoryManager.open(tmp_path / "reset.db", embedder=None) as memory:
        store = memory.store
        assert isinstance(store, SQLiteStore)
        store.engine.reset_after_changes = 50  # (the engine's tunable: no MemoryConfig field)
        session = memory.start_session().session_id
        memory.remember_many(
            [{"content": f"batch word{n % 7}", "session_id": session} for n in range(40)]
        )
        after = memory.remember("after it word3")  # no session: no batch words around it
        with memory.transaction():
            grouped = memory.remember("grouped later word3")
        assert len(found(memory.store, "batch")) == 40
        assert {after.id, grouped.id} <= set(found(memory.store, "word3"))
        words = ["batch", "word3", "after", "grouped"]
        assert keyword_state(memory.store, words) == rebuilt_keyword_state(memory.store, words)

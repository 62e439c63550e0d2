"""The keyword index's window: a memory is also found by the words of the two memories
before it (``context``) and the two after it (``after``) in its session and tier, and
that stays exact through edits, moves, forgets and promotions."""

from __future__ import annotations

import random
from collections.abc import Iterable
from pathlib import Path

import apsw

from migrations.sqlite import LATEST_VERSION
from migrations.sqlite import v008_keyword_window_order as keyword_window
from persistence import Memory, MemoryFilter, Tier
from persistence.records import SessionState
from persistence.sqlite import BackupManager, SQLiteStore, keyword_search, keyword_upkeep
from tests.conftest import old_schema_store


def found(store: SQLiteStore, word: str, tier: Tier | None = None) -> list[str]:
    return [memory_id for memory_id, _ in store.indexes.keyword_search([word], 100, tier)]


def add(store: SQLiteStore, memory_id: str, text: str, session: str | None = "s1",
        tier: Tier = Tier.EPISODIC) -> None:  # fmt: skip
    store.memories.put_memory(Memory.create(text, tier, id=memory_id, session_id=session))


def session(store: SQLiteStore, session_id: str) -> None:
    store.put_session(SessionState(session_id, started_at=1, last_active_at=1))


def test_a_reply_is_found_by_the_words_of_the_turns_around_it(store: SQLiteStore) -> None:
    session(store, "s1")
    add(store, "q", "Did you visit Paris last summer?")
    add(store, "a", "Yes, it was wonderful.")
    add(store, "b", "The museums were closed.")
    add(store, "c", "What a pity.")
    add(store, "loose", "Unrelated note.", session=None)
    add(store, "lone", "Paris again, one day.", session=None)
    assert set(found(store, "paris")) == {"q", "a", "b", "lone"}  # two after, none for "lone"
    assert set(found(store, "pity")) == {"c", "b", "a"}  # two before
    own = dict(store.indexes.keyword_search(["paris"], 10))
    assert own["q"] < own["a"]  # own words weigh more than the window (bm25: lower is better)
    no_after = dict(store.indexes.keyword_search(["pity"], 10, after_weight=0.0))
    assert no_after["c"] < 0 and no_after["a"] == no_after["b"] == 0  # "after" columns only
    no_context = dict(store.indexes.keyword_search(["paris"], 10, context_weight=0.0))
    assert no_context["q"] < 0 and no_context["a"] == no_context["b"] == 0
    assert set(found(store, "unrelated")) == {"loose"}  # no session: no window


def test_the_window_follows_forget_edit_and_promotion(store: SQLiteStore) -> None:
    session(store, "s1")
    for memory_id, word in zip(
        "abcdef", ("alpha", "bravo", "charlie", "delta", "echo", "fox"), strict=True
    ):
        add(store, memory_id, f"{word} words")
    assert set(found(store, "charlie")) == set("abcde")
    store.memories.forget_memory("c", reason="test")
    assert found(store, "charlie") == []  # a forgotten memory's words leave its neighbours
    assert set(found(store, "bravo")) == set("abde")  # the window closes over the gap
    store.memories.put_memory(Memory.create("golf words", Tier.EPISODIC, id="a", session_id="s1"))
    assert found(store, "alpha") == []
    assert set(found(store, "golf")) == set("abd")
    store.promote_memory("d", Tier.EPISODIC, Tier.SEMANTIC, reason="test")
    assert set(found(store, "delta")) == {"d"}  # alone in its session in the semantic tier
    assert set(found(store, "bravo")) == set("abef")
    assert found(store, "delta", Tier.SEMANTIC) == ["d"]


def test_the_index_matches_a_recomputation_after_random_operations(db_path: Path) -> None:
    rng = random.Random(5)
    with SQLiteStore(db_path) as store:
        for name in ("s1", "s2"):
            session(store, name)
        live: dict[str, tuple[Tier, str | None]] = {}
        for step in range(300):
            roll = rng.random()
            if roll < 0.55 or not live:
                memory_id = f"m{step}"
                tier = rng.choice([Tier.EPISODIC, Tier.EPISODIC, Tier.SEMANTIC, Tier.SCRATCHPAD])
                chosen = rng.choice(["s1", "s2", None])
                if tier is Tier.SCRATCHPAD:
                    store.put_scratchpad(memory_id, Memory.create(
                        f"w{step}x", tier, id=memory_id, session_id=chosen))  # fmt: skip
                else:
                    add(store, memory_id, f"w{step}x", chosen, tier)
                live[memory_id] = (tier, chosen)
            else:
                memory_id = rng.choice(sorted(live))
                tier, chosen = live[memory_id]
                if roll < 0.7:
                    store.memories.forget_memory(memory_id, reason="test")
                    del live[memory_id]
                elif roll < 0.85 and tier is Tier.EPISODIC:
                    store.promote_memory(memory_id, tier, Tier.SEMANTIC, reason="test")
                    live[memory_id] = (Tier.SEMANTIC, chosen)
                elif tier is not Tier.SCRATCHPAD:
                    moved = rng.choice(["s1", "s2", None])
                    current = store.memories.get_memory(memory_id)
                    assert current is not None
                    store.memories.put_memory(Memory.create(f"w{step}x", tier, id=memory_id,
                                                   session_id=moved))  # fmt: skip
                    live[memory_id] = (tier, moved)
        tables = {Tier.SCRATCHPAD: "scratchpad", Tier.EPISODIC: "episodic",
                  Tier.SEMANTIC: "semantic"}  # fmt: skip
        with store.engine.reading() as conn:
            expected: dict[str, set[str]] = {}
            for table in tables.values():
                rows = conn.execute(
                    f"SELECT id, content, session_id FROM {table} ORDER BY rowid"
                ).fetchall()
                by_session: dict[str, list[tuple[str, str]]] = {}
                for memory_id, content, chosen in rows:
                    expected.setdefault(content, set()).add(memory_id)
                    if chosen is not None:
                        by_session.setdefault(chosen, []).append((memory_id, content))
                for turns in by_session.values():
                    for i, (memory_id, _) in enumerate(turns):
                        for _, content in turns[max(i - 2, 0) : i] + turns[i + 1 : i + 3]:
                            expected[content].add(memory_id)
        assert expected
        for content, ids in expected.items():
            assert set(found(store, content)) == ids, content
        # Scores and row counts too (a stale or duplicate row changes bm25), against an
        # index rebuilt from scratch in the same transaction, then rolled back.
        assert scores_and_size(store, expected) == rebuilt_scores_and_size(store, expected)


def scores_and_size(store: SQLiteStore, words: Iterable[str]) -> tuple[dict[str, object], int]:
    with store.engine.reading() as conn:
        return _scores_and_size(conn, words)


def _scores_and_size(conn: apsw.Connection, words: Iterable[str]) -> tuple[dict[str, object], int]:
    scores = {
        w: sorted(
            (m, round(s, 9))
            for m, s in keyword_search.keyword_search(conn, [w], 1000, MemoryFilter(), 0.3, 0.7)
        )
        for w in words
    }
    (rows,) = conn.execute("SELECT count(*) FROM memory_fts_docsize").fetchone()
    return scores, rows


def rebuilt_scores_and_size(
    store: SQLiteStore, words: Iterable[str]
) -> tuple[dict[str, object], int]:
    class Undo(Exception):
        pass

    try:
        with store.transaction() as conn:
            keyword_upkeep.fill_keyword_index(conn)
            result = _scores_and_size(conn, words)
            raise Undo
    except Undo:
        return result


def test_upgrading_fills_the_window_of_existing_memories(db_path: Path) -> None:
    with old_schema_store(db_path, 5) as old:
        session(old, "s1")
        add(old, "q", "which museum in Lisbon")
        add(old, "a", "the tile one")
        add(old, "b", "near the river")
    with SQLiteStore(db_path) as store:
        assert store.schema_version == LATEST_VERSION
        assert set(found(store, "lisbon")) == {"q", "a", "b"}
        assert set(found(store, "river")) == {"q", "a", "b"}
        assert BackupManager(store).check_integrity().ok
        add(store, "c", "and a cafe")
        assert set(found(store, "lisbon")) == {"q", "a", "b"}
        assert set(found(store, "cafe")) == {"a", "b", "c"}


def test_an_export_import_round_trip_keeps_each_sessions_order(tmp_path: Path) -> None:
    from tiered_memory import AgentMemoryManager

    options = {"embedder": None, "embed_in_background": False}
    with AgentMemoryManager.open(tmp_path / "a.db", **options) as memory:
        session_id = memory.start_session().session_id
        for word in ("zulu", "alpha", "mike", "bravo", "yankee"):  # ids sort otherwise
            memory.remember(f"{word} words", session_id=session_id)
        exported = memory.export_json(tmp_path / "a.json")
        before = {w: set(found(memory.store, w)) for w in ("zulu", "alpha", "mike", "bravo")}
    with AgentMemoryManager.open(tmp_path / "b.db", **options) as copy:
        copy.import_json(exported)
        assert {w: set(found(copy.store, w)) for w in before} == before


def test_the_window_triggers_search_by_key_even_with_statistics_of_a_tiny_table(
    tmp_path: Path,
) -> None:
    """A file analysed while small and then grown in one process keeps its old statistics;
    the triggers' neighbour lookups must still be key searches, never a scan of the tier
    table on every write (which made writes grow linearly slower with the table)."""
    with SQLiteStore(tmp_path / "small.db") as store:
        session(store, "s1")
        for i in range(30):
            add(store, f"m{i}", f"word{i}", session=f"s{i % 3}" if i % 3 else None)
        with store.transaction() as conn:
            conn.execute("ANALYZE")
            for tier in ("scratchpad", "episodic", "semantic"):
                conn.execute(
                    "INSERT INTO keyword_dirty (tier, r, session_id) VALUES (?, 5, 's1')", (tier,)
                )
            for sql in keyword_window.WORK_OFF:
                plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
                scans = [step for step in plan if step.startswith(("SCAN t", "SCAN w"))]
                tiers = ("scratchpad", "episodic", "semantic")
                assert not scans and not any(t in step for t in tiers for step in plan
                                             if "SCAN" in step), plan  # fmt: skip
            conn.execute("DELETE FROM keyword_dirty")

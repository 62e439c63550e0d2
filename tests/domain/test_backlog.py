"""Nothing waits on a backlog: ``recall()`` embeds pending memories for about 250 ms at
most, finds the rest by their keywords and says how many its vector search could not
see (each hit's ``explanation.vector_pending``, ``statistics().vector_pending``);
``flush()`` and ``tiered-memory embed`` wait for all of it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import orjson
import pytest

from persistence import EMBEDDING_MODEL_KEY
from tests.support.worker import hash_vector
from tiered_memory import AgentMemoryManager
from tiered_memory.embedding.embedders import DEFAULT_MODEL_ID, OnnxEmbedder

BACKLOG = 300
PER_TEXT = 0.01
"""Seconds the slow model takes per text: the backlog costs BACKLOG * PER_TEXT = 3 s."""
ROOT = Path(__file__).resolve().parents[2]


class SlowEmbedder:
    """A deterministic 384-d model (random unit vectors: near-orthogonal, so keywords
    decide) that takes ``PER_TEXT`` seconds a text and counts them."""

    dim = 384
    model_id = "test-slow"

    def __init__(self) -> None:
        self.embedded = 0
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        time.sleep(PER_TEXT * len(texts))
        with self._lock:
            self.embedded += len(texts)
        return np.stack([hash_vector(self.model_id, self.dim, t) for t in texts])


def fill(memory: AgentMemoryManager) -> list[str]:
    """BACKLOG memories, each with its own keyword (``topic<i>``), left unembedded."""
    with memory.transaction():
        return [memory.remember(f"note {i} about topic{i} and the weather").id
                for i in range(BACKLOG)]  # fmt: skip


@pytest.mark.slow  # 18.3 s measured on a busy machine
def test_recall_embeds_a_backlog_only_briefly_and_says_what_its_vectors_missed(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    model = SlowEmbedder()
    memory = make_memory(embedder=model)
    ids = fill(memory)
    assert memory.statistics().vector_pending == BACKLOG
    started = time.monotonic()
    hits = memory.recall("weather notes", k=5)
    elapsed = time.monotonic() - started
    # The whole backlog takes 3 s of model time; recall stopped after a batch or two.
    assert 0 < model.embedded - 1 < BACKLOG  # (1: the query)
    assert elapsed < BACKLOG * PER_TEXT / 2
    pending = memory.statistics().vector_pending
    assert pending == BACKLOG - (model.embedded - 1)
    assert hits and all(h.explanation.vector_pending == pending for h in hits)
    assert f"could not see {pending} memories yet" in str(hits[0].explanation)
    # A memory still waiting is found by its keyword, and says it has no vector.
    waiting = next(i for i in reversed(ids) if (m := memory.get(i)) and m.embedding is None)
    index = ids.index(waiting)
    # (The stand-in model's random vectors may outscore it: look among the top 10.)
    hits = memory.recall(f"topic{index}", k=10)
    hit = next(h for h in hits if h.memory.id == waiting)
    assert "keyword" in [s.signal for s in hit.explanation.signals]
    assert hit.memory.embedding is None  # the last in the queue: still waiting
    assert "no vector yet: ranked by keywords only" in hit.explanation.notes
    # flush() waits for all of it, with progress.
    calls: list[tuple[int, int]] = []
    left = memory.statistics().vector_pending
    assert memory.flush(progress=lambda done, total: calls.append((done, total))) == left
    assert calls[0] == (0, left) and calls[-1] == (left, left)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert memory.statistics().vector_pending == 0
    assert (after := memory.get(waiting)) is not None and after.embedding is not None
    hit = memory.recall(f"topic{index}", k=1)[0]
    assert hit.explanation.vector_pending == 0
    assert "vector" in [s.signal for s in hit.explanation.signals]
    assert "could not see" not in str(hit.explanation)


def test_a_small_backlog_is_embedded_before_recall_searches(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    memory = make_memory(embedder=SlowEmbedder())
    memory.remember("The user prefers dark mode in every editor")
    hit = memory.recall("dark mode", k=1)[0]
    assert hit.explanation.vector_pending == 0 and hit.memory.embedding is not None
    assert "vector" in [s.signal for s in hit.explanation.signals]


FRESH_STORES = 6


@pytest.mark.slow
def test_the_first_recall_after_a_write_on_a_new_store_finds_it_by_its_vector(
    new_location: Callable[[str], str],
) -> None:
    """The issue's case, as a new user meets it: a new store with the default model and
    background embedding, one memory, and at once a recall sharing none of its words, so
    only its vector can find it, while the background thread embeds it (the first batch
    warms the model up: it took longer than recall's 250 ms catch-up)."""
    for attempt in range(FRESH_STORES):
        with AgentMemoryManager.open(new_location(f"fresh{attempt}")) as memory:
            fact = memory.remember("I love hiking in the Alps every summer")
            hits = memory.recall("what outdoor activities do I enjoy", k=3)
            assert [h.memory.id for h in hits] == [fact.id], f"store {attempt}: {hits}"
            assert hits[0].explanation.vector_pending == 0
            assert "vector" in [s.signal for s in hits[0].explanation.signals]
            assert memory.statistics().vector_pending == 0


@pytest.mark.slow  # 11.3 s measured on a busy machine
def test_recall_does_not_wait_for_the_background_thread_embedding_a_backlog(
    any_location: str,
) -> None:
    """The issue's case: memories written without a model, reopened with one: the
    background thread starts on the backlog, and recall does not queue behind it."""
    with AgentMemoryManager.open(any_location, embedder=None) as memory:
        memory.remember_many([f"note {i} about topic{i} and the weather" for i in range(BACKLOG)])
    model = SlowEmbedder()
    with AgentMemoryManager.open(any_location, embedder=model) as memory:
        memory.remember("kick the background thread")  # it starts on the backlog
        deadline = time.monotonic() + 10
        while model.embedded == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        hits = memory.recall("topic7", k=10)
        assert any(h.memory.content.startswith("note 7 ") for h in hits)
        # It answered with part of the backlog still waiting (its catch-up is bounded, the
        # rest stays the background thread's), not after the whole backlog: no wall-clock
        # bound here (the benchmarks time it; a loaded machine stretched one to 1.8 s).
        assert hits[0].explanation.vector_pending > 0
        memory.flush()
        assert memory.statistics().vector_pending == 0
        assert memory.recall("topic7", k=1)[0].explanation.vector_pending == 0
        assert model.embedded == BACKLOG + 1 + 1  # each memory once, the query once (cached)


# SQLite only: runs the CLI on a file
@pytest.mark.subprocess
@pytest.mark.slow
def test_the_embed_command_embeds_the_backlog_with_the_files_own_model(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    texts = [f"note {i} about topic{i} and the weather" for i in range(40)]
    with AgentMemoryManager.open(path, embedder=OnnxEmbedder()) as memory:
        memory.remember("recorded with the previous default model")
        memory.flush()
    with AgentMemoryManager.open(path, embedder=None) as memory:
        memory.remember_many(texts)
        assert memory.statistics().vector_pending == 40
    cli = str(Path(sys.executable).with_name("tiered-memory"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([cli, "embed", str(path), "--json"], capture_output=True,
                            text=True, timeout=300, env=env, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout) == {"embedded": 40, "pending": 0}
    with AgentMemoryManager.open(path, embedder=None, read_only=True) as memory:
        assert memory.statistics().vector_pending == 0
        assert memory.store.get_meta(EMBEDDING_MODEL_KEY) == DEFAULT_MODEL_ID
        stored = {m.content: m.embedding for m in memory.query()}
    expected = OnnxEmbedder().embed(texts[:3])
    for text, vector in zip(texts[:3], expected, strict=True):
        assert float(np.asarray(stored[text]) @ vector) > 0.999

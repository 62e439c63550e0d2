"""The default model for new files is the compact MiniLM with clause-blended vectors; a
file an earlier default (MiniLM, ``DEFAULT_MODEL_ID``, or the plain compact MiniLM)
embedded keeps that model until ``reembed=True`` converts it; a cache directory that
cannot be written gives ``ModelCacheError`` and writes nothing (checked on a read-only
mount: root writes through mode bits)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest

from persistence import EMBEDDING_MODEL_KEY, ModelCacheError
from tiered_memory import AgentMemoryManager
from tiered_memory.embedding import ClauseBlendEmbedder, compact_model
from tiered_memory.embedding.embedders import DEFAULT_MODEL_ID, OnnxEmbedder

FACTS = [
    "My sister adopted two cats from the shelter in March.",
    "Remind me to renew the passport before the trip to Lisbon.",
    "We booked the Italian place on Elm Street for the anniversary dinner.",
    "The build failed because the lock file was out of date.",
]
ROOT = Path(__file__).resolve().parents[2]
LONG = "Thanks for asking! The move went well. We finally painted the kitchen yellow."


def new_default() -> str:
    """The model id a new file records: the compact MiniLM, clause-blended."""
    return ClauseBlendEmbedder(OnnxEmbedder.compact()).model_id


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache directory holding the built compact model (built once per module)."""
    path = tmp_path_factory.mktemp("model-cache")
    compact_model.build(path)
    return path


@pytest.fixture
def in_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TIERED_MEMORY_CACHE", str(cache))
    return cache


def model_of(memory: AgentMemoryManager) -> str | None:
    embedder = memory.embedder()
    return None if embedder is None else embedder.model_id


def vectors(memory: AgentMemoryManager) -> dict[str, bytes]:
    return {m.content: np.asarray(m.embedding).tobytes() for m in memory.query()}


@pytest.mark.slow
def test_a_new_file_gets_the_clause_blended_compact_model(db_path: Path, in_cache: Path) -> None:
    with AgentMemoryManager.open(db_path, embed_in_background=False) as memory:
        memory.remember_many([*FACTS, LONG])
        assert model_of(memory) == new_default() == f"{compact_model.MODEL_ID}+clauses0.6"
        assert memory.store.get_meta(EMBEDDING_MODEL_KEY) == new_default()
        hit = memory.recall("where are we having the anniversary dinner", k=1)[0]
        assert "anniversary" in hit.memory.content
        assert "vector" in [s.signal for s in hit.explanation.signals]
    blend = ClauseBlendEmbedder(OnnxEmbedder.compact())
    expected = blend.embed([*FACTS, LONG])
    with AgentMemoryManager.open(db_path, embedder=None, read_only=True) as memory:
        stored = {m.content: m.embedding for m in memory.query()}
    for text, vector in zip([*FACTS, LONG], expected, strict=True):
        assert np.allclose(np.asarray(stored[text]), vector, atol=1e-6)
    # One-sentence facts embed as the compact model does; the long one is blended.
    plain = OnnxEmbedder.compact().embed([FACTS[0], LONG])
    assert np.allclose(np.asarray(stored[FACTS[0]]), plain[0], atol=1e-6)
    assert not np.allclose(np.asarray(stored[LONG]), plain[1], atol=1e-3)


@pytest.mark.slow
def test_a_file_of_the_plain_compact_model_keeps_it_until_reembedded(
    db_path: Path, in_cache: Path
) -> None:
    plain = OnnxEmbedder.compact()
    with AgentMemoryManager.open(db_path, embedder=plain, embed_in_background=False) as memory:
        memory.remember_many([*FACTS, LONG])
        before = vectors(memory)
    with AgentMemoryManager.open(db_path, embed_in_background=False) as memory:
        assert model_of(memory) == compact_model.MODEL_ID
        assert "kitchen" in memory.recall("what colour is the kitchen", k=1)[0].memory.content
        assert vectors(memory) == before
    with AgentMemoryManager.open(db_path, reembed=True, embed_in_background=False) as memory:
        assert model_of(memory) == new_default()
        memory.flush()
        after = vectors(memory)
        assert memory.store.get_meta(EMBEDDING_MODEL_KEY) == new_default()
    one, long = (np.frombuffer(after[t], "<f4") for t in (FACTS[0], LONG))
    assert np.allclose(one, np.frombuffer(before[FACTS[0]], "<f4"), atol=1e-6)  # one sentence
    assert not np.allclose(long, np.frombuffer(before[LONG], "<f4"), atol=1e-3)  # blended


@pytest.mark.slow
def test_a_file_of_the_previous_default_keeps_its_model_until_reembedded(
    db_path: Path, in_cache: Path
) -> None:
    previous = OnnxEmbedder()
    assert previous.model_id == DEFAULT_MODEL_ID
    with AgentMemoryManager.open(db_path, embedder=previous, embed_in_background=False) as memory:
        memory.remember_many(FACTS)
        before = vectors(memory)
    # Reopened with the defaults: the file's own model, its vectors untouched, and a new
    # memory embedded in the same vector space (not the compact model's).
    with AgentMemoryManager.open(db_path, embed_in_background=False) as memory:
        assert model_of(memory) == DEFAULT_MODEL_ID
        memory.remember("The dentist appointment moved to Thursday at nine.")
        hit = memory.recall("when is the dentist", k=1)[0]
        assert "dentist" in hit.memory.content
        signal = next(s for s in hit.explanation.signals if s.signal == "vector")
        assert 1.0 - signal.raw > 0.3  # a real cosine, not a mixed-space accident
        after = vectors(memory)
        assert memory.store.get_meta(EMBEDDING_MODEL_KEY) == DEFAULT_MODEL_ID
    assert {k: after[k] for k in before} == before
    dentist = np.frombuffer(after["The dentist appointment moved to Thursday at nine."], "<f4")
    old = previous.embed(["The dentist appointment moved to Thursday at nine."])[0]
    new = OnnxEmbedder.compact().embed(["The dentist appointment moved to Thursday at nine."])[0]
    assert np.allclose(dentist, old, atol=1e-6) and not np.allclose(dentist, new, atol=1e-4)
    # reembed=True converts it to the default for new files.
    with AgentMemoryManager.open(db_path, reembed=True, embed_in_background=False) as memory:
        assert model_of(memory) == new_default()
        hit = memory.recall("which pets did my sister adopt", k=1)[0]
        assert "cats" in hit.memory.content
        converted = vectors(memory)
        assert memory.store.get_meta(EMBEDDING_MODEL_KEY) == new_default()
    # Every vector was replaced by the new default's (dynamic quantization scales
    # activations per batch, so a vector matches its text embedded alone closely, not
    # bit for bit).
    compact = ClauseBlendEmbedder(OnnxEmbedder.compact())
    for text, blob in converted.items():
        vector = np.frombuffer(blob, "<f4")
        assert float(vector @ compact.embed([text])[0]) > 0.98
        assert blob != after[text]
    # Converted, it stays converted: the defaults now open it with the new default.
    with AgentMemoryManager.open(db_path, embed_in_background=False) as memory:
        assert model_of(memory) == new_default()


CHILD = """
import json, os, sys
from pathlib import Path
from tiered_memory import AgentMemoryManager
from tiered_memory.embedding import compact_model
from persistence import EMBEDDING_MODEL_KEY, ModelCacheError
assert not os.access(os.environ["TIERED_MEMORY_CACHE"], os.W_OK)
out = {}
try:
    compact_model.build(Path(os.environ["TIERED_MEMORY_CACHE"]))
except ModelCacheError as exc:
    out["build"] = str(exc)
with AgentMemoryManager.open("db/memory.db", embed_in_background=False) as memory:
    memory.remember("The garden needs water on mondays")
    try:
        memory.recall("garden", k=1)
    except ModelCacheError as exc:
        out["recall"] = str(exc)
    out["model"] = memory.store.get_meta(EMBEDDING_MODEL_KEY)
    out["pending"] = memory.statistics().vector_pending
print(json.dumps(out))
"""


@pytest.mark.slow  # 1.4 s measured on a busy machine
@pytest.mark.subprocess
def test_an_unwritable_cache_is_a_clear_error_and_nothing_is_written(tmp_path: Path) -> None:
    """The child runs in its own mount namespace where the cache folder is bind-mounted
    read-only (tests run as root, and root writes through any mode bits)."""
    assert shutil.which("unshare"), "the test needs util-linux's unshare"
    cache = tmp_path / "cache"
    cache.mkdir()
    (tmp_path / "db").mkdir()
    env = {**os.environ, "TIERED_MEMORY_CACHE": str(cache), "PYTHONPATH": str(ROOT)}
    script = (
        f'mount --bind {cache} {cache} && mount -o remount,bind,ro {cache} && exec "$0" -c "$1"'
    )
    result = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
         sys.executable, CHILD],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = orjson.loads(result.stdout.strip().splitlines()[-1])
    for key in ("build", "recall"):
        assert "TIERED_MEMORY_CACHE" in out[key] and str(compact_model.FOLDER) in out[key]
        assert "Read-only file system" in out[key]
    assert out["model"] is None  # the file records no model
    assert out["pending"] == 1  # the memory waits, unembedded, for a usable model
    assert list(cache.iterdir()) == []  # nothing was written to the cache


def test_build_refuses_a_read_only_cache_before_any_work(tmp_path: Path) -> None:
    """In-process variant: a cache path under a regular file cannot be created even by
    root; the error is typed and nothing appears."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    before = blocker.read_bytes()
    with pytest.raises(ModelCacheError, match="TIERED_MEMORY_CACHE"):
        compact_model.build(blocker / "cache")
    assert blocker.read_bytes() == before and sorted(tmp_path.iterdir()) == [blocker]

"""tiered_memory/embedding/preload.py: the embedding model loads in a thread once the
file is open (issue 46: loading it took 0.2-0.4 s of every open + first recall, and
checking the config loaded it before the file was even read). The model so loaded
embeds as one loaded in the foreground, and a recall meanwhile waits for that load
(one session); a model that cannot load fails its first use, typed, not the open, and
the file records nothing for it; closing during a load waits for it and leaves no
thread; a read-only open still changes no byte."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from persistence import EMBEDDING_MODEL_KEY, EmbedderError
from tests.conftest import file_digest
from tiered_memory import AgentMemoryManager, MemoryConfig
from tiered_memory.embedding.embedders import BUNDLED_TOKENIZER, OnnxEmbedder, is_embedder

FACTS = ["The heron nests by the lake every spring.", "Ship the release notes on Friday."]
THREAD = "tiered-memory-model"


def _loaders() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(THREAD)]


def _sessions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts onnxruntime sessions made from now on (the model files they load)."""
    import onnxruntime as ort

    made: list[str] = []
    real = ort.InferenceSession

    def counting(path: str, *args: Any, **kwargs: Any) -> Any:
        made.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", counting)
    return made


class SlowModel:
    """An embedder whose model takes ``seconds`` to load (embeds nothing useful)."""

    dim = 4
    model_id = "slow-model"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = threading.Event()
        self.loaded = False

    def load_model(self) -> None:
        self.started.set()
        time.sleep(self.seconds)
        self.loaded = True

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        out[:, 0] = 1.0
        return out


class Proxy:
    """Members only ``__getattr__`` provides (a wrapper around an embedder)."""

    def __init__(self, inner: object) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_checking_the_config_loads_no_model() -> None:
    model = OnnxEmbedder()
    MemoryConfig(embedder=model)  # was: isinstance read .dim, which loaded the model
    assert model._session is None
    assert is_embedder(model) and is_embedder(SlowModel(0))
    assert model._session is None
    assert is_embedder(Proxy(SlowModel(0)))  # members found by __getattr__ are read

    class NoEmbed:
        dim, model_id = 4, "x"

    class EmbedNotCallable(SlowModel):
        embed = None  # type: ignore[assignment]

    assert not is_embedder(NoEmbed()) and not is_embedder(EmbedNotCallable(0))
    assert not is_embedder("default") and not is_embedder(None)


def test_the_model_loads_after_the_open_and_embeds_as_in_the_foreground(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _sessions(monkeypatch)
    model = OnnxEmbedder()
    with AgentMemoryManager.open(db_path, embedder=model, embed_in_background=False) as memory:
        memory.remember_many(FACTS)
        hit = memory.recall("where does the heron nest", k=1)[0]  # waits for the load
        assert "heron" in hit.memory.content
        assert "vector" in [s.signal for s in hit.explanation.signals]
        memory.flush()
        stored = {m.content: np.asarray(m.embedding) for m in memory.query()}
    assert len(made) == 1  # one session: the recall waited for the thread's
    expected = OnnxEmbedder().embed(FACTS)
    for text, vector in zip(FACTS, expected, strict=True):
        assert np.allclose(stored[text], vector, atol=1e-6)
    # Opened and closed, nothing embedded: the thread loaded it all the same.
    idle = OnnxEmbedder()
    AgentMemoryManager.open(db_path, embedder=idle).close()
    assert idle._session is not None
    # Unless asked not to.
    lazy = OnnxEmbedder()
    AgentMemoryManager.open(db_path, embedder=lazy, load_model_at_open=False).close()
    assert lazy._session is None
    assert len(made) == 3


def _broken_model(folder: Path) -> OnnxEmbedder:
    folder.mkdir()
    (folder / "model.onnx").write_bytes(b"not an ONNX model")
    shutil.copyfile(BUNDLED_TOKENIZER, folder / "tokenizer.json")
    return OnnxEmbedder(folder, model_id="broken-model")


def test_a_model_that_cannot_load_fails_its_first_use_not_the_open(
    db_path: Path, tmp_path: Path
) -> None:
    broken = _broken_model(tmp_path / "broken")
    with AgentMemoryManager.open(db_path, embedder=broken, embed_in_background=False) as memory:
        kept = memory.remember("the heron nests by the lake").id
        with pytest.raises(EmbedderError, match="cannot load the embedding model"):
            memory.recall("heron", k=1)
        with pytest.raises(EmbedderError, match="cannot load the embedding model"):
            memory.flush()
        # The file does not name the model that never loaded (it did before the fix:
        # the next open with a working model then failed with a model mismatch).
        assert memory.store.get_meta(EMBEDDING_MODEL_KEY) is None
        assert memory.get(kept).embedding is None  # type: ignore[union-attr]
    with AgentMemoryManager.open(db_path, embedder=OnnxEmbedder()) as memory:
        assert [h.memory.id for h in memory.recall("heron", k=1)] == [kept]


def test_closing_while_the_model_loads_waits_for_it_and_leaves_no_thread(
    db_path: Path,
) -> None:
    slow = SlowModel(0.4)
    memory = AgentMemoryManager.open(db_path, embedder=slow, embed_in_background=False)
    assert slow.started.wait(5)
    assert not slow.loaded and _loaders()
    memory.close()
    assert slow.loaded  # waited for, not abandoned
    assert not _loaders()
    # The real model, closed at once.
    AgentMemoryManager.open(db_path, embedder=OnnxEmbedder()).close()
    assert not _loaders()


def test_a_read_only_open_that_loads_the_model_changes_no_byte(db_path: Path) -> None:
    with AgentMemoryManager.open(db_path, embedder=OnnxEmbedder()) as memory:
        memory.remember_many(FACTS)
        memory.flush()
    before = file_digest(db_path)
    model = OnnxEmbedder()
    with AgentMemoryManager.open(db_path, embedder=model, read_only=True) as memory:
        assert "heron" in memory.recall("heron", k=1)[0].memory.content
    assert model._session is not None
    assert file_digest(db_path) == before


class OwnLoader:
    """A user's embedder with a ``load_model`` of its own (``kind`` picks which)."""

    dim = 4
    model_id = "own-loader"

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.loads = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 4), np.float32)
        out[:, 0] = 1
        return out


class WithPath(OwnLoader):
    def load_model(self, path: str) -> None:  # not the library's step: never called
        raise AssertionError("called")


class Failing(OwnLoader):
    def load_model(self) -> None:
        raise OSError("weights file missing")


class Counting(OwnLoader):
    def load_model(self) -> None:
        self.loads += 1


def _open(path: Path, embedder: object, **options: Any) -> AgentMemoryManager:
    return AgentMemoryManager.open(
        path, embedder=embedder, embed_in_background=False, extractor=None, **options
    )


def test_an_embedders_own_load_model_with_arguments_is_left_alone(tmp_path: Path) -> None:
    with _open(tmp_path / "own.db", WithPath("path"), load_model_at_open=True) as memory:
        memory.remember("the heron nests by the lake")
        assert memory.recall("heron", k=1)[0].memory.content == "the heron nests by the lake"


def test_a_load_model_that_fails_raises_a_typed_error_and_records_nothing(tmp_path: Path) -> None:
    path = tmp_path / "failing.db"
    with _open(path, Failing("fail")) as memory:
        with pytest.raises(EmbedderError, match="weights file missing"):
            memory.recall("heron", k=1)
        assert memory.store.get_meta(EMBEDDING_MODEL_KEY) is None


def test_load_model_runs_once_however_many_recalls(tmp_path: Path) -> None:
    embedder = Counting("count")
    with _open(tmp_path / "count.db", embedder, load_model_at_open=True) as memory:
        memory.remember("the heron nests by the lake")
        memory.flush()
        for _ in range(5):
            memory.recall("heron", k=1)
    assert embedder.loads == 1


HELD = threading.Lock()


class HoldsALock(OwnLoader):
    """Holds :data:`HELD` while its model loads, as onnxruntime's import holds Python's
    import lock."""

    def __init__(self) -> None:
        super().__init__("held")
        self.inside = threading.Event()

    def load_model(self) -> None:
        with HELD:
            self.inside.set()
            time.sleep(0.6)


def test_a_fork_waits_for_the_load_under_way(tmp_path: Path) -> None:
    """A child forked while the load held a lock inherited it held by no thread, and hung
    at its first model load (review of issue 46's preload)."""
    embedder = HoldsALock()
    with _open(tmp_path / "fork.db", embedder, load_model_at_open=True):
        assert embedder.inside.wait(5)
        pid = os.fork()
        if pid == 0:  # the child: the lock must be free here
            os._exit(0 if HELD.acquire(timeout=3) else 1)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0

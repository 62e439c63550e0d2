"""The compact profile: the packaged MiniLM requantized once into the cache directory,
checked against its source, reused while undamaged, and refused by a file the default
model embedded (its vectors differ)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import onnx
import pytest

from persistence import EmbedderError, EmbeddingModelMismatchError
from tiered_memory import AgentMemoryManager
from tiered_memory.embedding import compact_model
from tiered_memory.embedding.embedders import DEFAULT_MODEL_ID, OnnxEmbedder

SENTENCES = [
    "My sister adopted two cats from the shelter in March.",
    "Remind me to renew the passport before the trip to Lisbon.",
    "Which restaurant did we book for the anniversary dinner?",
    "The build failed because the lock file was out of date.",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cache")
    compact_model.build(path)
    return path


@pytest.mark.slow
def test_the_compact_model_uses_integer_kernels_and_embeds_like_its_source(cache: Path) -> None:
    folder = cache / compact_model.FOLDER
    graph = onnx.load(str(folder / "model.onnx")).graph
    ops = {node.op_type for node in graph.node}
    assert ops & {"MatMulInteger", "DynamicQuantizeMatMul"}, sorted(ops)
    eight_bit = (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)
    small = sum(int(np.prod(t.dims)) for t in graph.initializer if t.data_type in eight_bit)
    assert small > 20_000_000  # the weights stay 8-bit (MatMul and the embedding table)
    embedder = OnnxEmbedder.compact(cache=cache)
    assert embedder.model_id == compact_model.MODEL_ID != DEFAULT_MODEL_ID
    ours, theirs = embedder.embed(SENTENCES), OnnxEmbedder().embed(SENTENCES)
    assert ours.shape == theirs.shape == (len(SENTENCES), 384)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1, atol=1e-5)
    assert np.min(np.sum(ours * theirs, axis=1)) > 0.95
    # Nearest neighbours agree: each sentence is closest to itself under both models.
    assert (np.argmax(ours @ theirs.T, axis=1) == np.arange(len(SENTENCES))).all()


@pytest.mark.slow
def test_a_built_model_is_reused_and_a_damaged_one_rebuilt(cache: Path) -> None:
    model = cache / compact_model.FOLDER / "model.onnx"
    stamp = model.stat().st_mtime_ns
    assert OnnxEmbedder.compact(cache=cache).model_id == compact_model.MODEL_ID
    assert model.stat().st_mtime_ns == stamp  # not rebuilt
    good = model.read_bytes()
    with model.open("r+b") as f:
        f.seek(len(good) // 2)
        f.write(b"\x00" * 64)
    OnnxEmbedder.compact(cache=cache)
    assert model.read_bytes() == good  # the same bytes again
    assert not [p for p in model.parent.iterdir() if p.name.startswith(".build-")]


def test_without_onnx_the_error_names_the_extra_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name == "onnx" else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(EmbedderError, match=r"pip install 'tiered-memory\[compact\]'"):
        OnnxEmbedder.compact(cache=tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.mark.slow  # 10.8 s measured on a busy machine
def test_a_file_embedded_by_the_default_model_refuses_the_compact_one(
    cache: Path, tmp_path: Path
) -> None:
    path = tmp_path / "agent.db"
    options = {"embed_in_background": False}
    with AgentMemoryManager.open(path, embedder=OnnxEmbedder(), **options) as memory:
        memory.remember("The user prefers dark mode")
        memory.flush()
    with (
        AgentMemoryManager.open(path, embedder=OnnxEmbedder.compact(cache=cache),
                                **options) as memory,
        pytest.raises(EmbeddingModelMismatchError, match="reembed=True"),
    ):  # fmt: skip
        memory.remember("A second memory")
        memory.flush()
    with AgentMemoryManager.open(
        path, embedder=OnnxEmbedder.compact(cache=cache), reembed=True, **options
    ) as memory:
        memory.flush()
        hits = memory.recall("which theme does the user like?", k=1)
        assert [h.memory.content for h in hits] == ["The user prefers dark mode"]
        assert any(s.signal == "vector" for s in hits[0].explanation.signals)


@pytest.mark.slow
def test_a_text_embeds_the_same_alone_and_among_others(cache: Path) -> None:
    """The integer kernels quantize activations per run: batched, a text's vector
    depended on its neighbours; the profile embeds one text per run, so it does not."""
    embedder = OnnxEmbedder.compact(cache=cache)
    other = "A much longer turn about the garden, the dog, the move and the new job. " * 4
    alone = np.vstack([embedder.embed([text]) for text in SENTENCES])
    assert np.array_equal(embedder.embed(SENTENCES), alone)
    assert np.array_equal(embedder.embed([other, *SENTENCES])[1:], alone)
    # The same model run on a batch: the extra text changes the others' vectors.
    batched = OnnxEmbedder(cache / compact_model.FOLDER, batch_size=32)
    assert not np.array_equal(batched.embed([other, *SENTENCES])[1:], batched.embed(SENTENCES))

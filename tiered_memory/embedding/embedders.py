"""Local sentence embeddings: the ``Embedder`` protocol and the default ONNX embedder.

:class:`OnnxEmbedder` is :class:`~tiered_memory.embedding.onnx_encoder.OnnxEncoder` (the
model runner: tokenizer, onnxruntime session, pooling) with the shipped profiles as
constructors: :meth:`OnnxEmbedder.quality` and :meth:`OnnxEmbedder.compact` (what the
default for new files, :class:`~tiered_memory.embedding.clause_blend.ClauseBlendEmbedder`,
runs; the plain compact model and ``OnnxEmbedder()``, earlier defaults, are kept by files
they embedded).
The profiles' build modules check their output with the encoder, so they import no
module that imports them.
"""

from __future__ import annotations

import os
from pathlib import Path

from persistence import EmbedderError
from tiered_memory.embedding import compact_model, quality_model
from tiered_memory.embedding.onnx_encoder import (
    BUNDLED_TOKENIZER,
    CHARS_PER_TOKEN,
    DEFAULT_MODEL_ID,
    Embedder,
    OnnxEncoder,
    Vectors,
    is_embedder,
    token_prefix,
)

__all__ = [
    "BUNDLED_TOKENIZER",
    "CHARS_PER_TOKEN",
    "DEFAULT_MODEL_ID",
    "Embedder",
    "EmbedderError",
    "OnnxEmbedder",
    "Vectors",
    "is_embedder",
    "token_prefix",
]


class OnnxEmbedder(OnnxEncoder):
    """A BERT-style ONNX sentence encoder (the default: MiniLM-L6-v2, int8), with the
    shipped profiles as constructors (:class:`OnnxEncoder` has the arguments)."""

    @classmethod
    def quality(
        cls, *, threads: int = 1, cache: str | os.PathLike[str] | None = None
    ) -> OnnxEmbedder:
        """The quality profile: all-mpnet-base-v2 (768 dimensions, 384 tokens), built
        once from the ``mpnet`` extra's packages into the cache directory (see
        :mod:`tiered_memory.embedding.quality_model`; about 20 s and 440 MB). Slower than the
        default MiniLM; finds more on conversations (README)."""
        folder = quality_model.build(None if cache is None else Path(cache))
        return cls(folder, threads=threads, max_length=384, model_id=quality_model.MODEL_ID)

    @classmethod
    def compact(
        cls, *, threads: int = 1, cache: str | os.PathLike[str] | None = None
    ) -> OnnxEmbedder:
        """The compact profile: the default MiniLM requantized for onnxruntime's integer
        kernels (see :mod:`tiered_memory.embedding.compact_model`): about half the RAM and twice
        the speed, the same LoCoMo recall, its own model id; the default for new files.
        Built once (a few seconds) from the packaged model into the cache directory
        (``ModelCacheError`` if it cannot be written).

        One text per model run (``batch_size=1``): the integer kernels quantize their
        activations with one scale per run, so in a batch a text's vector depended on
        the texts beside it (cosine down to 0.97 with its vector alone; a file indexed
        twice recalled differently). Alone, a memory embeds as the query does, the
        same every time, and as fast on LoCoMo turns (4.2 s for 419 either way)."""
        folder = compact_model.build(None if cache is None else Path(cache))
        return cls(folder, threads=threads, model_id=compact_model.MODEL_ID,
                   batch_size=compact_model.BATCH_SIZE)  # fmt: skip

"""Embeddings: the ``Embedder`` protocol, the default ONNX embedder and its profiles, and
the queue that embeds new memories off the writer's path.

:mod:`~tiered_memory.embedding.onnx_encoder` (the model runner),
:mod:`~tiered_memory.embedding.embedders` (``OnnxEmbedder`` with its profiles),
:mod:`~tiered_memory.embedding.compact_model` and :mod:`~tiered_memory.embedding.quality_model`
(the profiles' one-time builds), :mod:`~tiered_memory.embedding.clause_blend`
(``ClauseBlendEmbedder``: the default's vectors of several sentences),
:mod:`~tiered_memory.embedding.queue` (``EmbeddingQueue``).
"""

from tiered_memory.embedding.clause_blend import ClauseBlendEmbedder
from tiered_memory.embedding.embedders import Embedder, OnnxEmbedder

__all__ = ["ClauseBlendEmbedder", "Embedder", "OnnxEmbedder"]

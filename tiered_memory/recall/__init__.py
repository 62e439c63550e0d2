"""Recall: candidates from each signal, fused into one ranked, explained answer.

:mod:`~tiered_memory.recall.settings` (``RecallSettings``, keywords of free text),
:mod:`~tiered_memory.recall.types` (hits, explanations, the ``Reranker`` protocol),
:mod:`~tiered_memory.recall.fusion` (score and rank fusion, explanation),
:mod:`~tiered_memory.recall.recaller` (the orchestration: search, fuse, early stop,
reinforcement), and the signals beyond keywords and vectors:
:mod:`~tiered_memory.recall.conversation`, :mod:`~tiered_memory.recall.neighbours`,
:mod:`~tiered_memory.recall.rerank` and :mod:`~tiered_memory.recall.graph_signal`.
"""

from tiered_memory.recall.note_hits import NoteHit
from tiered_memory.recall.settings import RecallSettings
from tiered_memory.recall.types import (
    Explanation,
    RecallHit,
    RerankCandidate,
    Reranker,
    SignalMatch,
)

__all__ = [
    "Explanation",
    "NoteHit",
    "RecallHit",
    "RecallSettings",
    "RerankCandidate",
    "Reranker",
    "SignalMatch",
]

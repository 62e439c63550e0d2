"""Reranking: a second look at the best fused candidates.

``recall()`` fuses keyword and vector candidates cheaply; a :class:`Reranker` then
scores the top ``RecallSettings.rerank_depth`` of them with the query, and
``rerank_weight`` times that score joins their fused value (and the explanation, as the
``rerank`` signal). Two implementations ship:

- :class:`SessionContextReranker` needs no new weights: it compares the query vector
  with the candidate's vector blended with its session neighbours' (the turn before and
  the turn after it), so a short reply ("Yes, last May!") is judged with the exchange it
  belongs to.
- :class:`OnnxCrossEncoder` runs a cross-encoder the user supplies (``model.onnx`` and
  ``tokenizer.json`` in one folder) on (query, memory) pairs; its logits pass through a
  sigmoid so that scores are in (0, 1).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from persistence import EmbedderError, InvalidInputError, Memory
from tiered_memory.recall.types import (
    RerankCandidate,
    Reranker,
    SignalMatch,
    Vector,
    fused_values,
)

if TYPE_CHECKING:
    from tiered_memory.recall.conversation import Turn
    from tiered_memory.recall.settings import RecallSettings

__all__ = [
    "OnnxCrossEncoder",
    "RerankCandidate",
    "Reranker",
    "SessionContextReranker",
]


class SessionContextReranker:
    """Cosine of the query with ``normalise(own + neighbour_weight * (before + after))``:
    the candidate read together with the turns around it. Needs only the vectors the
    embedder already stored; scores 0 without a query vector or own vector."""

    def __init__(self, neighbour_weight: float = 0.5) -> None:
        if not isinstance(neighbour_weight, int | float) or not 0 <= neighbour_weight <= 4:
            raise InvalidInputError(
                f"neighbour_weight must be a number from 0 to 4, got {neighbour_weight!r}"
            )
        self.neighbour_weight = float(neighbour_weight)

    @property
    def name(self) -> str:
        return "session context"

    def score(
        self, query: str, query_vector: Vector | None, candidates: Sequence[RerankCandidate]
    ) -> list[float]:
        scores = []
        for candidate in candidates:
            if query_vector is None or candidate.vector is None:
                scores.append(0.0)
                continue
            blend = candidate.vector.astype(np.float32).copy()
            for other in (candidate.before, candidate.after):
                if other is not None:
                    blend += self.neighbour_weight * other
            norm = float(np.linalg.norm(blend))
            scores.append(float(query_vector @ blend) / norm if norm > 0 else 0.0)
        return scores


class OnnxCrossEncoder:
    """A cross-encoder in ONNX form: ``model.onnx`` (inputs ``input_ids``,
    ``attention_mask`` and optionally ``token_type_ids``; first output ``[batch, 1]`` or
    ``[batch]`` logits) and ``tokenizer.json`` in one folder. Scores are the logits
    through a sigmoid. Load with :meth:`from_directory`; the model loads on first use."""

    def __init__(self, model: Path, tokenizer: Path, *, threads: int, max_length: int) -> None:
        self._model = model
        self._tokenizer_path = tokenizer
        self.threads = threads
        self.max_length = max_length
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: set[str] = set()

    @classmethod
    def from_directory(
        cls, path: str | os.PathLike[str], *, threads: int = 1, max_length: int = 256
    ) -> OnnxCrossEncoder:
        """The cross-encoder in folder ``path``; ``EmbedderError`` if it lacks a file."""
        for name, value in (("threads", threads), ("max_length", max_length)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInputError(f"{name} must be an int >= 1, got {value!r}")
        folder = Path(path)
        model, tokenizer = folder / "model.onnx", folder / "tokenizer.json"
        missing = [p.name for p in (model, tokenizer) if not p.is_file()]
        if missing:
            raise EmbedderError(
                f"{folder} is not a cross-encoder folder: it lacks {' and '.join(missing)} "
                "(export one with its tokenizer.json, e.g. with optimum-cli export onnx)"
            )
        return cls(model, tokenizer, threads=threads, max_length=max_length)

    @property
    def name(self) -> str:
        return f"cross-encoder {self._model.parent.name}"

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime as ort
            from tokenizers import Tokenizer

            options = ort.SessionOptions()
            options.intra_op_num_threads = self.threads
            options.inter_op_num_threads = 1
            try:
                session = ort.InferenceSession(
                    str(self._model), options, providers=["CPUExecutionProvider"]
                )
                tokenizer = Tokenizer.from_file(str(self._tokenizer_path))
            except Exception as exc:
                raise EmbedderError(f"cannot load the cross-encoder: {exc}") from exc
            tokenizer.enable_truncation(max_length=self.max_length)
            tokenizer.enable_padding()
            self._inputs = {i.name for i in session.get_inputs()}
            self._tokenizer = tokenizer
            self._session = session

    def score(
        self, query: str, query_vector: Vector | None, candidates: Sequence[RerankCandidate]
    ) -> list[float]:
        if not candidates:
            return []
        self._load()
        encodings = self._tokenizer.encode_batch([(query, c.content) for c in candidates])
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
        try:
            logits = np.asarray(self._session.run(None, feed)[0], dtype=np.float64)
        except Exception as exc:
            raise EmbedderError(f"the cross-encoder failed: {exc}") from exc
        flat = logits.reshape(len(candidates), -1)[:, 0]
        return [float(v) for v in 1.0 / (1.0 + np.exp(-flat))]


RERANK = "rerank"


def rerank_candidates(
    fused: dict[str, list[SignalMatch]],
    query: str,
    query_vector: Vector | None,
    settings: RecallSettings,
    memories: Callable[[list[str]], Mapping[str, Memory]],
    turns: Callable[[Sequence[str]], Mapping[str, Turn]],
) -> None:
    """Score the best ``settings.rerank_depth`` candidates of ``fused`` with
    ``settings.reranker`` and add each score, times ``rerank_weight``, as the
    ``rerank`` signal (its rank among the reranked, the raw score, the contribution)."""
    reranker = settings.reranker
    if reranker is None or not fused:
        return
    strength = fused_values(fused)
    head = sorted(strength, key=lambda m: (-strength[m], m))[: settings.rerank_depth]
    facts = turns(head)
    near = {n for m in head if m in facts for n in facts[m][2:] if n is not None}
    found = memories(list(dict.fromkeys([*head, *near])))

    def vector(memory_id: str | None) -> Vector | None:
        memory = found.get(memory_id) if memory_id is not None else None
        return None if memory is None or memory.embedding is None else memory.embedding

    candidates = [
        RerankCandidate(
            m,
            found[m].content,
            vector(m),
            vector(facts[m][2] if m in facts else None),
            vector(facts[m][3] if m in facts else None),
        )  # fmt: skip
        for m in head
        if m in found
    ]
    scores = list(reranker.score(query, query_vector, candidates))
    if len(scores) != len(candidates):
        raise InvalidInputError(
            f"reranker {reranker.name!r} returned {len(scores)} scores for {len(candidates)}"
        )
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    for rank, i in enumerate(order, start=1):
        score = float(scores[i])
        fused[candidates[i].memory_id].append(
            SignalMatch(
                RERANK,
                rank,
                score,
                reranker.name,
                settings.rerank_weight * score,
                detail=f"rerank #{rank} ({reranker.name} {score:.2f})",
            )  # fmt: skip
        )

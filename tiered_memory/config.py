"""MemoryConfig: every tunable of the manager in one typed, validated object."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass

from persistence import (
    DEFAULT_MAX_CONTENT_BYTES,
    InvalidInputError,
    InvalidTypeError,
    Synchronous,
)
from tiered_memory.embeddings import Embedder
from tiered_memory.recall import RecallSettings
from tiered_memory.tokens import EstimatedTokenCounter, TokenCounter


@dataclass(frozen=True, slots=True)
class MemoryConfig:
    """Settings of an :class:`~tiered_memory.AgentMemoryManager`, with sane defaults.

    - ``cache_size``: episodic/semantic memories kept in the LRU cache.
    - ``scratchpad_token_budget``: tokens the scratchpad may hold; beyond it the least
      recently used entries are promoted to episodic.
    - ``forgetting_threshold``: ``decay()`` forgets memories whose retention falls below it.
    - ``decay_semantic``: whether ``decay()`` also walks the semantic tier.
    - ``decay_batch_size``: memories per transaction while decaying or consolidating.
    - ``initial_stability_days`` and ``importance_stability_boost``: a new memory's
      stability is ``initial * (1 + boost * importance)`` days.
    - ``target_retention``: reviews are scheduled for when retention falls to this.
    - ``consolidation_min_retention`` / ``consolidation_min_reviews``: what
      ``consolidate()`` requires of an episodic memory before promoting it to semantic.
    - ``synchronous``: ``"NORMAL"`` survives a crashed process, ``"FULL"`` power loss too.
    - ``clock``: returns epoch milliseconds (inject one in tests; never sleep).
    - ``token_counter``: counts tokens for the scratchpad budget.
    - ``backup_dir``: where snapshots and exports go by default (``<db>-backups/``
      beside the database when unset).
    - ``external_change_check_ms``: how often reads look for commits by other
      processes (which make the cache and scratchpad reload); writes always look.
    - ``embedder``: ``"default"`` (local MiniLM via onnxruntime, loaded on first need),
      any :class:`~tiered_memory.embeddings.Embedder`, or ``None`` for keyword-only recall.
    - ``embed_in_background``: a daemon thread embeds new memories soon after they are
      remembered (``False``: only ``flush()`` and ``recall()`` embed).
    - ``embedding_cache_size``: how many embeddings the file keeps by (model, content
      hash) so identical text is embedded once (``0``: no cache); least recently used
      are evicted.
    - ``reembed``: when the file was embedded by another model, re-embed every memory
      with this one on first need (build-new-then-swap; resumable) instead of raising
      :class:`~persistence.EmbeddingModelMismatchError`.
    - ``recall``: fusion weights (:class:`~tiered_memory.recall.RecallSettings`).
    - ``recall_review_quality``: a recalled memory that is due for review counts as a
      review of this quality (``None``: recall does not reinforce); reviews are written
      ``recall_review_batch`` at a time, so recall stays read-mostly.
    - ``max_content_bytes``: the largest memory content accepted, in UTF-8 bytes (default
      1,000,000: 1 MB, decimal); larger content is refused with ``InvalidInputError`` by
      ``remember``, ``remember_many``, ``update``, the scratchpad, the store and import.
    """

    cache_size: int = 500
    scratchpad_token_budget: int = 2048
    forgetting_threshold: float = 0.1
    decay_semantic: bool = False
    decay_batch_size: int = 500
    initial_stability_days: float = 1.0
    importance_stability_boost: float = 4.0
    target_retention: float = 0.9
    consolidation_min_retention: float = 0.7
    consolidation_min_reviews: int = 2
    synchronous: Synchronous = "NORMAL"
    clock: Callable[[], int] | None = None
    token_counter: TokenCounter = EstimatedTokenCounter()
    backup_dir: str | os.PathLike[str] | None = None
    external_change_check_ms: int = 50
    embedder: Embedder | str | None = "default"
    embed_in_background: bool = True
    embedding_cache_size: int = 20_000
    reembed: bool = False
    recall: RecallSettings = RecallSettings()
    recall_review_quality: int | None = 4
    recall_review_batch: int = 32
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES

    def __post_init__(self) -> None:
        for name in ("cache_size", "scratchpad_token_budget", "decay_batch_size"):
            _positive_int(name, getattr(self, name))
        _non_negative_int("consolidation_min_reviews", self.consolidation_min_reviews)
        _non_negative_int("external_change_check_ms", self.external_change_check_ms)
        for name in ("forgetting_threshold", "consolidation_min_retention"):
            _fraction(name, getattr(self, name), open_ends=False)
        _fraction("target_retention", self.target_retention, open_ends=True)
        for name in ("initial_stability_days", "importance_stability_boost"):
            value = getattr(self, name)
            _number(name, value)
            if value < 0 or (name == "initial_stability_days" and value == 0):
                raise InvalidInputError(f"{name} must be > 0, got {value!r}")
        if not isinstance(self.decay_semantic, bool):
            raise InvalidTypeError("decay_semantic must be a bool")
        if self.synchronous not in ("NORMAL", "FULL"):
            raise InvalidInputError(
                f"synchronous must be 'NORMAL' or 'FULL', got {self.synchronous!r}"
            )
        if self.clock is not None and not callable(self.clock):
            raise InvalidTypeError("clock must be a callable returning epoch milliseconds")
        if not (
            self.embedder is None
            or self.embedder == "default"
            or isinstance(self.embedder, Embedder)
        ):
            raise InvalidTypeError("embedder must be 'default', None, or an Embedder")
        if not isinstance(self.embed_in_background, bool):
            raise InvalidTypeError("embed_in_background must be a bool")
        _non_negative_int("embedding_cache_size", self.embedding_cache_size)
        if not isinstance(self.reembed, bool):
            raise InvalidTypeError("reembed must be a bool")
        if not isinstance(self.recall, RecallSettings):
            raise InvalidTypeError("recall must be a RecallSettings")
        if self.recall_review_quality is not None:
            _non_negative_int("recall_review_quality", self.recall_review_quality)
            if self.recall_review_quality > 5:
                raise InvalidInputError("recall_review_quality must be from 0 to 5, or None")
        _positive_int("recall_review_batch", self.recall_review_batch)
        _positive_int("max_content_bytes", self.max_content_bytes)
        if self.backup_dir is not None and not isinstance(self.backup_dir, str | os.PathLike):
            raise InvalidTypeError("backup_dir must be a path")
        if not callable(getattr(self.token_counter, "count", None)):
            raise InvalidTypeError("token_counter must have a count(text) -> int method")


def _number(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidTypeError(f"{name} must be a finite number, got {value!r}")


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(f"{name} must be an int >= 1, got {value!r}")


def _non_negative_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f"{name} must be an int >= 0, got {value!r}")


def _fraction(name: str, value: object, open_ends: bool) -> None:
    _number(name, value)
    assert isinstance(value, int | float)
    inside = 0 < value < 1 if open_ends else 0 <= value <= 1
    if not inside:
        bounds = "(0, 1)" if open_ends else "[0, 1]"
        raise InvalidInputError(f"{name} must be within {bounds}, got {value!r}")

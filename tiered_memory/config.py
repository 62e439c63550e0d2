"""MemoryConfig: every tunable of the manager in one typed, validated object."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from persistence import (
    DEFAULT_MAX_CONTENT_BYTES,
    InvalidInputError,
    InvalidTypeError,
    PoolSettings,
    Synchronous,
    TracedStatement,
    require_bool,
    require_callable,
    require_choice,
    require_int,
    require_number,
)
from tiered_memory.embedding.embedders import Embedder, is_embedder
from tiered_memory.graph.extraction import Extractor
from tiered_memory.graph.facade import check_predicates
from tiered_memory.recall.fact_signal import PREDICATE_WORDS
from tiered_memory.recall.settings import RecallSettings
from tiered_memory.redaction import DEFAULT_REDACTOR, Redactor
from tiered_memory.tokens import EstimatedTokenCounter, TokenCounter

SINGLE_VALUED = (
    "lives_in", "located_in", "based_in", "works_at", "works_for", "employed_by",
    "reports_to", "married_to",
)  # fmt: skip
"""``MemoryConfig.single_valued``'s default: predicates that hold one object per subject
at a time (docs/concepts/facts-over-time.md)."""


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
    - ``embedder``: ``"default"`` (local MiniLM via onnxruntime, loaded on first need:
      the compact profile with clause-blended vectors, ``ClauseBlendEmbedder(
      OnnxEmbedder.compact())``, for a new file; an earlier default, ``OnnxEmbedder()``
      or ``OnnxEmbedder.compact()``, for a file it embedded unless ``reembed``), any
      :class:`~tiered_memory.embedding.Embedder`, or ``None`` for keyword-only recall.
    - ``load_model_at_open``: a thread loads the embedder's model once the file is open
      (an embedder with a ``load_model()`` method, as the shipped ones have), while the
      caller goes on, so the first recall finds it loaded (one that comes first waits
      for it); ``False``: on first need, for a handle that may never embed (the CLI's
      commands that do not search). Closing waits for a load under way.
    - ``embed_in_background``: a daemon thread embeds new memories soon after they are
      remembered (``False``: only ``flush()`` and, for about 250 ms at most each,
      ``recall()`` embed).
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
    - ``extractor``: finds entities and relations in new and edited memories for the
      knowledge graph: ``"default"`` (local, deterministic: proper nouns, quoted names,
      @handles, #tags, e-mails, URLs), any :class:`~tiered_memory.graph.Extractor`
      (an LLM, say), or ``None`` (the graph holds only what is given to it).
    - ``extract_in_background``: a daemon thread extracts soon after each write
      (``None``, the default: when a background thread embeds, i.e. with
      ``embed_in_background`` and an embedder; ``False``: only ``flush()`` extracts).
    - ``dedup``: ``remember()`` of content identical (after normalising case and
      whitespace) to a live memory of the same tier, agent and session reinforces that
      memory and returns it instead of adding a second one.
    - ``near_duplicate_threshold``: ``consolidate()`` merges an episodic memory into an
      older one of the same agent and session whose vector is at least this similar
      (cosine; ``None``: no merging).
    - ``max_content_bytes``: the largest memory content accepted, in UTF-8 bytes (default
      1,000,000: 1 MB, decimal); larger content is refused with ``InvalidInputError`` by
      ``remember``, ``remember_many``, ``update``, the scratchpad, the store and import.
    - ``redactor``: replaces secrets (API keys, tokens, passwords, private keys) by
      ``[REDACTED:kind]`` before anything is written: memory content, tags, metadata
      values, scratchpad values, transcript lines, imports. ``redact=False`` or
      ``redactor=None`` turns it off.
    - ``trace``: called with a :class:`~persistence.TracedStatement` (its SQL, how many
      parameters it was given, how long it took) for every statement the store runs, to
      see where a slow call spends its time (``None``, the default: nothing is traced).
      A callback that raises is logged once and never fails the call.
    - ``pool``: on a PostgreSQL server, the connection pool's size and timeouts
      (:class:`~persistence.PoolSettings`); a file store ignores it.
    - ``tracer_provider``: the OpenTelemetry ``TracerProvider`` the manager's spans go
      to (``None``, the default: the global one); needs the ``otel`` extra, see
      :mod:`tiered_memory.telemetry` (without ``opentelemetry-api`` there are no spans).
    - ``capture_content``: whether spans carry memory content, queries and error
      messages (``None``, the default: as ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
      says, off when unset).
    - ``single_valued``: graph predicates that hold one object per subject at a time
      (default :data:`SINGLE_VALUED`: ``lives_in``, ``works_at``, ...; ``()``: none).
      When a memory asserts ``(s, p, o2)`` while ``(s, p, o1)`` holds, the older relation
      ends and a memory of the same agent whose single-valued facts have all ended is
      superseded by the new one (docs/concepts/facts-over-time.md).
    - ``predicate_words``: single-valued predicate -> words that express it besides its
      name's (default :data:`~tiered_memory.recall.fact_signal.PREDICATE_WORDS`:
      ``lives_in`` <- ``moved``, ``home``, ...; ``works_at`` <- ``job``, ``employer``,
      ...). A recall query naming one of them favours the memories holding that fact
      (recall's fact signal: ``RecallSettings.fact_share``, ``fact_words``), and the
      mean of a predicate's words' vectors is its meaning (``fact_vectors``); ``{}``
      leaves each predicate its name's words only.
    - ``vector_index``: how a file store searches vectors: ``"cells"`` (the default)
      keeps nothing per memory in RAM and reads the codes of the cells nearest the query
      from the file (docs/concepts/guarantees.md, "The vector cells"); ``"ram"`` keeps
      a 3-bit code of every vector in RAM (about 170 MiB per million memories). A
      server ignores it.
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
    load_model_at_open: bool = True
    embed_in_background: bool = True
    embedding_cache_size: int = 20_000
    reembed: bool = False
    recall: RecallSettings = RecallSettings()
    recall_review_quality: int | None = 4
    recall_review_batch: int = 32
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES
    redact: bool = True
    redactor: Redactor | None = DEFAULT_REDACTOR
    extractor: Extractor | str | None = "default"
    extract_in_background: bool | None = None
    dedup: bool = True
    near_duplicate_threshold: float | None = 0.95
    trace: Callable[[TracedStatement], None] | None = None
    pool: PoolSettings = PoolSettings()
    tracer_provider: Any = None
    capture_content: bool | None = None
    single_valued: tuple[str, ...] = SINGLE_VALUED
    predicate_words: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: dict(PREDICATE_WORDS), hash=False
    )
    vector_index: str = "cells"

    def __post_init__(self) -> None:
        object.__setattr__(  # a list or any sequence of predicates, kept as a tuple
            self, "single_valued", tuple(dict.fromkeys(check_predicates(self.single_valued)))
        )
        object.__setattr__(self, "predicate_words", _predicate_words(self.predicate_words))
        for name in ("cache_size", "scratchpad_token_budget", "decay_batch_size"):
            require_int(getattr(self, name), name, minimum=1)
        require_int(self.consolidation_min_reviews, "consolidation_min_reviews", minimum=0)
        require_int(self.external_change_check_ms, "external_change_check_ms", minimum=0)
        for name in ("forgetting_threshold", "consolidation_min_retention"):
            require_number(getattr(self, name), name, minimum=0, maximum=1)
        require_number(self.target_retention, "target_retention", minimum=0, maximum=1,
                       above_minimum=True, below_maximum=True)  # fmt: skip
        require_number(self.initial_stability_days, "initial_stability_days", minimum=0,
                       above_minimum=True)  # fmt: skip
        require_number(self.importance_stability_boost, "importance_stability_boost", minimum=0)
        require_bool(self.decay_semantic, "decay_semantic")
        require_choice(self.synchronous, "synchronous", ("NORMAL", "FULL"))
        require_callable(self.clock, "clock (returning epoch milliseconds)", allow_none=True)
        require_callable(self.trace, "trace", allow_none=True)
        require_choice(self.vector_index, "vector_index", ("ram", "cells"))
        if not isinstance(self.pool, PoolSettings):
            raise InvalidTypeError(f"pool must be a PoolSettings, got {type(self.pool).__name__}")
        if not (
            self.embedder is None
            or self.embedder == "default"
            or is_embedder(self.embedder)  # isinstance would load an OnnxEmbedder's model
        ):
            raise InvalidTypeError("embedder must be 'default', None, or an Embedder")
        require_bool(self.load_model_at_open, "load_model_at_open")
        require_bool(self.embed_in_background, "embed_in_background")
        require_int(self.embedding_cache_size, "embedding_cache_size", minimum=0)
        require_bool(self.reembed, "reembed")
        if not isinstance(self.recall, RecallSettings):
            raise InvalidTypeError("recall must be a RecallSettings")
        require_int(self.recall_review_quality, "recall_review_quality", allow_none=True,
                    minimum=0, maximum=5)  # fmt: skip
        require_int(self.recall_review_batch, "recall_review_batch", minimum=1)
        require_int(self.max_content_bytes, "max_content_bytes", minimum=1)
        if self.backup_dir is not None and not isinstance(self.backup_dir, str | os.PathLike):
            raise InvalidTypeError("backup_dir must be a path")
        require_callable(getattr(self.token_counter, "count", None), "token_counter.count")
        if not (
            self.extractor is None
            or self.extractor == "default"
            or isinstance(self.extractor, Extractor)
        ):
            raise InvalidTypeError("extractor must be 'default', None, or an Extractor")
        if self.extract_in_background is not None:
            require_bool(self.extract_in_background, "extract_in_background")
        require_bool(self.dedup, "dedup")
        if self.near_duplicate_threshold is not None:
            require_number(self.near_duplicate_threshold, "near_duplicate_threshold",
                           minimum=0, maximum=1)  # fmt: skip
        require_bool(self.redact, "redact")
        if self.tracer_provider is not None and not callable(
            getattr(self.tracer_provider, "get_tracer", None)
        ):
            raise InvalidTypeError(
                "tracer_provider must be an OpenTelemetry TracerProvider (with get_tracer), "
                f"got {type(self.tracer_provider).__name__}"
            )
        if self.capture_content is not None:
            require_bool(self.capture_content, "capture_content")
        if self.redactor is not None and not isinstance(self.redactor, Redactor):
            raise InvalidTypeError("redactor must have a redact(text) -> Redaction method")

    @property
    def active_redactor(self) -> Redactor | None:
        """The redactor writes go through, or ``None`` when redaction is off."""
        return self.redactor if self.redact else None

    @property
    def extracts_in_background(self) -> bool:
        """Whether a background thread extracts entities (by default: where one embeds)."""
        if self.extract_in_background is None:
            return self.embed_in_background and self.embedder is not None
        return self.extract_in_background


def _predicate_words(value: object) -> dict[str, tuple[str, ...]]:
    """``MemoryConfig.predicate_words`` checked: predicate -> a tuple of words."""
    if not isinstance(value, Mapping):
        raise InvalidTypeError(
            f"predicate_words must map a predicate to its words, got {type(value).__name__}"
        )
    checked: dict[str, tuple[str, ...]] = {}
    for predicate, words in value.items():
        [name] = check_predicates([predicate])
        if isinstance(words, str) or not isinstance(words, Sequence):
            raise InvalidTypeError(
                f"predicate_words[{predicate!r}] must be a sequence of words, "
                f"got {type(words).__name__}"
            )
        for word in words:
            if not isinstance(word, str) or not word.strip() or len(word.split()) != 1:
                raise InvalidInputError(
                    f"predicate_words[{predicate!r}] holds {word!r}: each must be one word"
                )
        checked[name] = tuple(dict.fromkeys(w.strip().lower() for w in words))
    return checked


def configured(config: MemoryConfig | None, overrides: Mapping[str, Any]) -> MemoryConfig:
    """``config`` (default: ``MemoryConfig()``) with ``overrides`` of its fields, checked."""
    base = config if config is not None else MemoryConfig()
    if not isinstance(base, MemoryConfig):
        raise InvalidInputError(f"config must be a MemoryConfig, got {type(base).__name__}")
    unknown = set(overrides) - {f.name for f in fields(MemoryConfig)}
    if unknown:
        raise InvalidInputError(f"unknown config option(s): {', '.join(sorted(unknown))}")
    return replace(base, **overrides) if overrides else base

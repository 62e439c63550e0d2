"""Recall: fuse keyword (FTS5 bm25) and vector (cosine) candidates into one ranked,
explained answer.

Scoring, for a memory found by some of the signals (the default, ``fusion="score"``)::

    fused  = keyword_share * bm25 / best bm25 of the query + (1 - keyword_share) * cosine
    score  = fused * importance_factor * retention_factor * recency_factor

    importance_factor = 1 + importance_weight * (importance - 0.5)
    retention_factor  = retention_floor + (1 - retention_floor) * retention
    recency_factor    = 1 + recency_weight * exp(-age_days / recency_days)

Every candidate's cosine similarity is computed, also for memories that only the
keywords found, and a memory that no keyword matches adds nothing on that side (FTS5's
bm25 is negative and lower is better; it is kept as it is, and shown as a share of the
query's best bm25, since its absolute values are tiny in small files). The factors only
reorder near-ties.

``RecallSettings(fusion="rrf")`` fuses ranks instead of raw values (weighted
reciprocal-rank fusion, the default before score fusion measured better on LoCoMo)::

    fused = sum over signals s that found it of  weight_s / (rrf_k + rank_s)
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from persistence import (
    InvalidInputError,
    Memory,
    MemoryFilter,
    MemoryStorage,
    StoreClosedError,
    Tier,
    parse_tier,
    require_choice,
    require_int,
    require_number,
    require_str,
    require_str_tuple,
    validate_filter,
)

if TYPE_CHECKING:
    from tiered_memory.embedding_queue import EmbeddingQueue
    from tiered_memory.rerank import Reranker

STOPWORDS = frozenset(
    " ".join(
        (
            "a about above after again against all am an and any are as at be because been",
            "before being below between both but by can could did do does doing down during",
            "each few for from further had has have having he her here hers herself him",
            "himself his how i if in into is it its itself just me more most my myself no nor",
            "not now of off on once only or other our ours ourselves out over own same she",
            "should so some such than that the their theirs them themselves then there these",
            "they this those through to too under until up very was we were what when where",
            "which while who whom why will with would you your yours yourself yourselves",
            "s t d ll m re ve",
        )
    ).split()
)
_WORD = re.compile(r"\w+", re.UNICODE)
FUSIONS = ("rrf", "score")


def keyword_query(text: str) -> str | None:
    """An FTS5 MATCH expression for free text: its words, each quoted, joined with OR.

    User text is never passed as FTS5 syntax: quotes, ``AND``/``OR``/``NOT``/``NEAR``,
    ``*``, ``-``, ``:`` and parentheses become plain words or disappear. Stopwords are
    dropped unless nothing else is left. ``None`` when the text has no words.
    """
    words = [w.lower() for w in _WORD.findall(text)]
    kept = [w for w in words if w not in STOPWORDS] or words
    unique = list(dict.fromkeys(kept))
    return " OR ".join(f'"{w}"' for w in unique) if unique else None


@dataclass(frozen=True, slots=True)
class RecallSettings:
    """Weights of the fusion. Defaults: 100 candidates from each signal, fused by their
    raw values (``fusion="score"``, see the module docstring): ``keyword_share`` of the
    normalised bm25 plus the rest of the cosine similarity. Keyword matches in the two
    memories before a memory in its session count ``context_weight`` as much as matches
    in its own words, in the two after it ``after_weight``.

    ``fusion="rrf"`` fuses ranks instead: keyword ranks weigh ``keyword_weight`` (twice
    the vector ranks: MiniLM is the weaker signal on conversations), RRF constant
    ``rrf_k``; these three play no part in score fusion.

    The graph signal (:mod:`tiered_memory.graph_recall`: memories about the entities the
    query names, and with ``graph_hops=1`` about their neighbours at ``graph_hop_decay``
    the weight) weighs ``graph_weight`` in rank fusion and adds ``graph_share`` of its
    normalised score in score fusion. Score fusion has it on at ``graph_share=0.05``
    (LoCoMo: recall@5 up on the tuning and the check conversations, recall@10 the same;
    README); rank fusion has it off (``graph_weight=0``: it lowered recall there).

    Conversation signals (:mod:`tiered_memory.conversation`): the memory after a
    question among the candidates gains ``adjacency_weight`` times the question's fused
    value; when the query names exactly one speaker, their memories gain
    ``speaker_boost``. A ``reranker`` (:mod:`tiered_memory.rerank`; none by default)
    scores the best ``rerank_depth`` fused candidates, adding ``rerank_weight`` times
    its score. The defaults were chosen on LoCoMo conv-26/30/41 and checked on
    conv-42/43 (README)."""

    fusion: str = "score"
    keyword_share: float = 0.35
    rrf_k: float = 20.0
    context_weight: float = 0.5
    after_weight: float = 0.5
    keyword_weight: float = 2.0
    vector_weight: float = 1.0
    depth: int = 100
    vector_depth: int = 100
    importance_weight: float = 0.2
    retention_floor: float = 0.8
    recency_weight: float = 0.1
    recency_days: float = 30.0
    adjacency_weight: float = 0.2
    speaker_boost: float = 0.05
    reranker: Reranker | None = field(default=None, compare=False)
    rerank_depth: int = 50
    rerank_weight: float = 0.4
    graph_weight: float = 0.0
    graph_share: float = 0.05
    graph_hops: int = 1
    graph_hop_decay: float = 0.5

    @property
    def graph_on(self) -> bool:
        """True when the graph signal takes part in this fusion."""
        return (self.graph_weight if self.fusion == "rrf" else self.graph_share) > 0

    def __post_init__(self) -> None:
        for name in ("depth", "vector_depth", "rerank_depth"):
            require_int(getattr(self, name), f"RecallSettings.{name}", minimum=1, maximum=10_000)
        require_choice(self.fusion, "RecallSettings.fusion", FUSIONS)
        ranges = {
            "keyword_share": (0.0, 1.0),
            "rrf_k": (0.0, math.inf),
            "context_weight": (0.0, 1.0),
            "after_weight": (0.0, 1.0),
            "keyword_weight": (0.0, math.inf),
            "vector_weight": (0.0, math.inf),
            "importance_weight": (0.0, 2.0),
            "retention_floor": (0.0, 1.0),
            "recency_weight": (0.0, math.inf),
            "adjacency_weight": (0.0, 1.0),
            "speaker_boost": (0.0, 1.0),
            "rerank_weight": (0.0, math.inf),
            "graph_weight": (0.0, math.inf),
            "graph_share": (0.0, 1.0),
            "graph_hop_decay": (0.0, 1.0),
        }
        for name, (low, high) in ranges.items():
            require_number(getattr(self, name), f"RecallSettings.{name}", minimum=low, maximum=high)
        require_number(self.recency_days, "RecallSettings.recency_days", minimum=0,
                       above_minimum=True)  # fmt: skip
        if self.reranker is not None:
            from tiered_memory.rerank import Reranker

            if not isinstance(self.reranker, Reranker):
                raise InvalidInputError(
                    "RecallSettings.reranker must have .name and .score(query, query_vector, "
                    f"candidates), got {type(self.reranker).__name__}"
                )
        if self.graph_hops not in (0, 1) or isinstance(self.graph_hops, bool):
            raise InvalidInputError("RecallSettings.graph_hops must be 0 or 1")


@dataclass(frozen=True, slots=True)
class SignalMatch:
    """One retrieval signal that found the memory: its rank among that signal's
    candidates (0: not among them; score fusion computed the raw value for this memory),
    the raw value, and what it added to the fused score. ``relative`` is the keyword
    signal's bm25 as a share of the query's best bm25 (1.0: the best keyword match).
    ``detail`` says in words what a conversation or rerank signal found ("answer to a
    matching question", "said by Caroline")."""

    signal: str
    rank: int
    raw: float
    raw_name: str
    contribution: float
    relative: float | None = None
    detail: str | None = None
    path: str | None = None
    """For the graph signal: the entity the query named and the relation followed."""

    @property
    def measure(self) -> str:
        """The raw value in readable form: bm25 against the query's best, cosine
        similarity, the graph path."""
        if self.path is not None:
            return self.path
        if self.raw_name == "cosine distance":
            return f"cosine {1.0 - self.raw:.2f}"
        if self.relative is not None:
            return f"{self.raw_name} {self.relative:.0%} of best"
        return f"{self.raw_name} {self.raw:.4g}"

    def __str__(self) -> str:
        if self.detail is not None:
            return f"{self.detail} {self.contribution:+.4f}"
        place = f"#{self.rank}" if self.rank else "(computed)"
        return f"{self.signal} {place}: {self.measure} {self.contribution:+.4f}"


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a memory came back: the signals, each factor, and the filters applied."""

    signals: tuple[SignalMatch, ...]
    fused: float
    importance: float
    importance_factor: float
    retention: float
    retention_factor: float
    age_days: float
    recency_factor: float
    filters: tuple[str, ...]
    score: float
    notes: tuple[str, ...] = ()

    def __str__(self) -> str:
        """One line, e.g. ``keyword #1: bm25 100% of best +0.0952 (67%), vector #3:
        cosine 0.41 +0.0435 (33%) -> fused 0.1387 x importance ... = 0.1502``: each
        signal's rank, readable value, contribution and share of the fused score."""
        shares = self.fused > 0 and len(self.signals) > 1
        found = ", ".join(
            f"{s} ({s.contribution / self.fused:.0%})" if shares else str(s) for s in self.signals
        )
        filters = f" [{', '.join(self.filters)}]" if self.filters else ""
        notes = f" ({'; '.join(self.notes)})" if self.notes else ""
        return (
            f"{found} -> fused {self.fused:.4f} x importance {self.importance_factor:.3f} "
            f"x retention {self.retention_factor:.3f} x recency {self.recency_factor:.3f} "
            f"= {self.score:.4f}{filters}{notes}"
        )


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One recalled memory with its score and explanation."""

    memory: Memory
    score: float
    explanation: Explanation


def fuse(
    ranked: dict[str, Sequence[tuple[str, float]]],
    weights: dict[str, float],
    rrf_k: float,
) -> dict[str, list[SignalMatch]]:
    """Weighted reciprocal-rank fusion: memory id -> the signals that found it."""
    raw_names = {"keyword": "bm25", "vector": "cosine distance", "graph": "graph score"}
    matches: dict[str, list[SignalMatch]] = {}
    for signal, results in ranked.items():
        best = min((raw for _, raw in results), default=0.0) if signal == "keyword" else 0.0
        for rank, (memory_id, raw) in enumerate(results, start=1):
            contribution = weights[signal] / (rrf_k + rank)
            relative = raw / best if best < 0 else None
            matches.setdefault(memory_id, []).append(
                SignalMatch(signal, rank, raw, raw_names.get(signal, "score"), contribution,
                            relative)
            )  # fmt: skip
    return matches


def fuse_scores(
    ranked: dict[str, Sequence[tuple[str, float]]],
    distances: dict[str, float],
    keyword_share: float,
    graph_share: float = 0.0,
) -> dict[str, list[SignalMatch]]:
    """Score fusion: memory id -> its signals, each contributing its share of the raw
    value. ``distances`` holds the cosine distance of every candidate that has a vector
    (the vector signal's own candidates and the others alike); the graph signal adds
    ``graph_share`` of its score relative to its best."""
    matches: dict[str, list[SignalMatch]] = {}
    graph = ranked.get("graph", ())
    if graph:
        top = max(score for _, score in graph) or 1.0
        for rank, (memory_id, score) in enumerate(graph, start=1):
            match = SignalMatch("graph", rank, score, "graph score", graph_share * score / top)
            matches.setdefault(memory_id, []).append(match)
    keyword = ranked.get("keyword", ())
    if keyword:
        best = min(bm25 for _, bm25 in keyword)
        for rank, (memory_id, bm25) in enumerate(keyword, start=1):
            relative = bm25 / best if best < 0 else 0.0
            share = keyword_share * relative
            matches.setdefault(memory_id, []).append(
                SignalMatch("keyword", rank, bm25, "bm25", share, relative)
            )
    ranks = {memory_id: rank for rank, (memory_id, _) in enumerate(ranked.get("vector", ()), 1)}
    for memory_id, distance in distances.items():
        share = (1.0 - keyword_share) * (1.0 - distance)
        match = SignalMatch("vector", ranks.get(memory_id, 0), distance, "cosine distance", share)
        matches.setdefault(memory_id, []).append(match)
    return matches


def with_paths(
    fused: dict[str, list[SignalMatch]], paths: dict[str, str]
) -> dict[str, list[SignalMatch]]:
    """Name the graph path in each graph match (for the explanation)."""
    for memory_id, signals in fused.items():
        path = paths.get(memory_id)
        if path is not None:
            fused[memory_id] = [
                replace(s, path=path) if s.signal == "graph" else s for s in signals
            ]
    return fused


def explain(
    memory: Memory,
    signals: Sequence[SignalMatch],
    now: int,
    settings: RecallSettings,
    filters: tuple[str, ...],
    notes: tuple[str, ...] = (),
) -> RecallHit:
    """Score one candidate and say why (``notes``: anything else the reader should know,
    such as a memory that has no vector yet)."""
    fused = sum(s.contribution for s in signals)
    importance_factor = 1.0 + settings.importance_weight * (memory.importance - 0.5)
    retention_factor = settings.retention_floor + (1 - settings.retention_floor) * memory.retention
    age_days = max(now - memory.created_at, 0) / 86_400_000
    recency_factor = 1.0 + settings.recency_weight * math.exp(-age_days / settings.recency_days)
    score = fused * importance_factor * retention_factor * recency_factor
    explanation = Explanation(
        signals=tuple(sorted(signals, key=lambda s: s.signal)),
        fused=fused,
        importance=memory.importance,
        importance_factor=importance_factor,
        retention=memory.retention,
        retention_factor=retention_factor,
        age_days=age_days,
        recency_factor=recency_factor,
        filters=filters,
        score=score,
        notes=notes,
    )
    return RecallHit(memory, score, explanation)


def best_score(fused: float, settings: RecallSettings) -> float:
    """The highest score a candidate with this fused value can reach through the three
    factors: one that cannot beat the k-th hit need not be fetched. (Score fusion can
    give a negative fused value, for which the smallest factors are the best case.)"""
    if fused >= 0:
        return fused * (1.0 + settings.importance_weight * 0.5) * (1.0 + settings.recency_weight)
    return fused * max(1.0 - settings.importance_weight * 0.5, 0.0) * settings.retention_floor


def check_k(k: object) -> int:
    """``k`` must be an int from 1 to 1000."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000:
        raise InvalidInputError(f"k must be an int from 1 to 1000, got {k!r}")
    return k


# --- orchestration ----------------------------------------------------------------------

_NO_VECTOR = ("no vector yet: ranked by keywords only",)


GraphSearch = Callable[[str, MemoryFilter], tuple[list[tuple[str, float]], dict[str, str]]]
"""``(query, filter) -> (ranked memory ids with graph scores, path per memory)``."""


class Recaller:
    """Recall for one manager, start to end: candidate search (keyword and vector, the
    filter applied inside each), fusion, explanation, early stop, and reinforcement
    (recalled memories that are due count as reviews, written in batches).

    ``get_many`` reads memories through the manager's RAM (scratchpad, cache);
    ``review`` and ``get`` are the manager's, used when queued reviews are written.
    """

    def __init__(
        self,
        store: MemoryStorage,
        embeddings: EmbeddingQueue,
        settings: RecallSettings,
        clock: Callable[[], int],
        *,
        get_many: Callable[[list[str]], dict[str, Memory]],
        get: Callable[[str], Memory | None],
        review: Callable[[str, int], object],
        review_quality: int | None,
        review_batch: int,
    ) -> None:
        self._store = store
        self._embeddings = embeddings
        self.settings = settings
        self._clock = clock
        self._get_many = get_many
        self._get = get
        self._review = review
        self._review_quality = review_quality
        self._review_batch = review_batch
        self._reviews: list[str] = []
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self.graph_search: GraphSearch | None = None
        """The graph signal's candidate search (set by the manager; see graph_recall)."""

    def recall(
        self,
        query: str,
        k: int,
        *,
        tier: Tier | str | None,
        session_id: str | None,
        agent_id: str | None,
        tags: Sequence[str],
        created_after: int | None,
        created_before: int | None,
        min_retention: float | None,
    ) -> list[RecallHit]:
        """The ``k`` best hits for ``query`` among the memories the filters accept."""
        require_str(query, "query")
        k = check_k(k)
        chosen = None if tier is None else parse_tier(tier)
        require_str_tuple(tags, "tags")
        where = MemoryFilter(chosen, session_id, agent_id, tuple(tags), created_after,
                             created_before, min_retention)  # fmt: skip
        validate_filter(where)
        match = keyword_query(query)
        if match is None:
            return []  # no words: nothing to look for
        store, settings = self._store, self.settings
        if not store.read_only:
            self._embeddings.flush(report=False)

        def nearest() -> tuple[np.ndarray, list[tuple[str, float]]] | None:
            vector = self._embeddings.embed_query(query)
            if vector is None:
                return None
            return vector, store.vector_search(vector, settings.vector_depth, where=where)

        # Off a transaction, the query embedding and vector search run beside the keyword
        # search (onnxruntime, numpy and SQLite all release the GIL).
        beside = not (store.is_memory or store.in_transaction)
        pending = self._recall_pool().submit(nearest) if beside else None
        ranked: dict[str, Sequence[tuple[str, float]]] = {
            "keyword": store.keyword_search(
                match, settings.depth, None, settings.context_weight, settings.after_weight,
                where=where,
            )
        }  # fmt: skip
        paths: dict[str, str] | None = None  # the third signal: entities the query names
        if settings.graph_on and self.graph_search is not None:
            ranked["graph"], paths = self.graph_search(query, where)
        found = pending.result() if pending is not None else nearest()
        if found is not None:
            ranked["vector"] = found[1]
        described, now = where.describe(), self._clock()
        if settings.fusion == "score":
            distances = dict(found[1]) if found is not None else {}
            if found is not None:
                others = [m for name in ("keyword", "graph") for m, _ in ranked.get(name, ())
                          if m not in distances]  # fmt: skip
                distances.update(store.vector_distances(found[0], list(dict.fromkeys(others))))
            fused = fuse_scores(ranked, distances, settings.keyword_share, settings.graph_share)
        else:
            weights = {"keyword": settings.keyword_weight, "vector": settings.vector_weight,
                       "graph": settings.graph_weight}  # fmt: skip
            fused = fuse(ranked, weights, settings.rrf_k)
        self._structure(fused, query, settings, found[0] if found is not None else None,
                        filtered=bool(described))  # fmt: skip
        if paths is not None:
            fused = with_paths(fused, paths)
        top = self._explained(fused, k, described, now, vectors=found is not None)
        self.queue_reviews([hit.memory.id for hit in top])
        return top

    def _structure(
        self,
        fused: dict[str, list[SignalMatch]],
        query: str,
        settings: RecallSettings,
        query_vector: np.ndarray | None,
        *,
        filtered: bool,
    ) -> None:
        """Add the conversation signals and the reranker's score to ``fused``
        (:mod:`tiered_memory.conversation`, :mod:`tiered_memory.rerank`; both import
        this module's records, hence imported here)."""
        from tiered_memory.conversation import add_conversation_signals
        from tiered_memory.rerank import rerank_candidates

        store = self._store
        distances = None
        if query_vector is not None and settings.fusion == "score":
            vector = query_vector

            def distances(ids: Sequence[str]) -> dict[str, float]:
                return store.vector_distances(vector, ids)

        add_conversation_signals(fused, query, settings, store.conversation_turns, distances,
                                 may_add=not filtered)  # fmt: skip
        rerank_candidates(fused, query, query_vector, settings, self._get_many,
                          partial(store.conversation_turns, before=True))  # fmt: skip

    def _explained(
        self,
        fused: dict[str, list[SignalMatch]],
        k: int,
        described: tuple[str, ...],
        now: int,
        *,
        vectors: bool,
    ) -> list[RecallHit]:
        """Fetch and explain candidates strongest first, a batch at a time, until none
        left can reach the top ``k`` (early stop)."""
        settings = self.settings
        strength = {m: sum(s.contribution for s in signals) for m, signals in fused.items()}
        order = sorted(strength, key=lambda m: (-strength[m], m))
        hits: list[RecallHit] = []
        batch = max(2 * k, 20)
        for start in range(0, len(order), batch):
            chunk = order[start : start + batch]
            memories = self._get_many(chunk)
            for memory_id in chunk:
                memory = memories.get(memory_id)
                if memory is not None:  # forgotten meanwhile
                    notes = _NO_VECTOR if vectors and memory.embedding is None else ()
                    hits.append(explain(memory, fused[memory_id], now, settings, described, notes))
            hits.sort(key=lambda h: (-h.score, h.memory.id))
            rest = order[start + batch : start + batch + 1]
            if (
                len(hits) >= k
                and rest
                and hits[k - 1].score > best_score(strength[rest[0]], settings)
            ):
                break  # no candidate left can reach the top k
        return hits[:k]

    def _recall_pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if not self._store.is_open:
                raise StoreClosedError("memory manager is closed (or was never initialized)")
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="tiered-memory-recall")
            return self._pool

    def stop(self) -> None:
        """Stop the thread that runs vector searches beside keyword searches."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def queue_reviews(self, memory_ids: list[str]) -> None:
        """Count these recalled memories as reviews, written ``review_batch`` at a time."""
        if self._review_quality is None or not memory_ids or self._store.read_only:
            return
        with self._lock:
            self._reviews += memory_ids
            due = len(self._reviews) >= self._review_batch
        if due:
            self.apply_reviews()

    def apply_reviews(self) -> None:
        """Write the queued reviews of memories that are due, in one transaction."""
        quality = self._review_quality
        with self._lock:
            pending, self._reviews = self._reviews, []
        if quality is None or not pending:
            return
        now = self._clock()
        with self._store.transaction():
            for memory_id in dict.fromkeys(pending):
                schedule = self._store.get_repetition_schedule(memory_id)
                due = schedule is None or schedule.next_review_at <= now
                if due and self._get(memory_id) is not None:
                    self._review(memory_id, quality)

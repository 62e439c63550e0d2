"""Fusion: signals' candidates into one fused value per memory, and that value into a
scored, explained hit (the formulas are in :mod:`tiered_memory.recall.recaller`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from persistence import InvalidInputError, Memory
from tiered_memory.recall.settings import RecallSettings
from tiered_memory.recall.types import Explanation, RecallHit, SignalMatch


def fuse(
    ranked: dict[str, Sequence[tuple[str, float]]],
    weights: dict[str, float],
    rrf_k: float,
) -> dict[str, list[SignalMatch]]:
    """Weighted reciprocal-rank fusion: memory id -> the signals that found it."""
    raw_names = {"keyword": "bm25", "vector": "cosine distance", "graph": "graph score",
                 "fact": "fact asked"}  # fmt: skip
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
    fact_share: float = 0.0,
) -> dict[str, list[SignalMatch]]:
    """Score fusion: memory id -> its signals, each contributing its share of the raw
    value. ``distances`` holds the cosine distance of every candidate that has a vector
    (the vector signal's own candidates and the others alike); the graph signal adds
    ``graph_share`` of its score relative to its best, the fact signal ``fact_share``."""
    matches: dict[str, list[SignalMatch]] = {}
    for rank, (memory_id, raw) in enumerate(ranked.get("fact", ()), start=1):
        match = SignalMatch("fact", rank, raw, "fact asked", fact_share * raw)
        matches.setdefault(memory_id, []).append(match)
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
    memory_id: str,
    signals: list[SignalMatch],
    paths: Sequence[tuple[Mapping[str, str], str]],
) -> list[SignalMatch]:
    """``signals`` of ``memory_id`` with the graph path (or the fact) named in each match
    of a signal, for the explanation (``paths``: ``(memory id -> path, signal)`` pairs;
    only the hits recall returns are explained)."""
    for named, signal in paths:
        path = named.get(memory_id)
        if path is not None:
            signals = [replace(s, path=path) if s.signal == signal else s for s in signals]
    return signals


def score(memory: Memory, signals: Sequence[SignalMatch], now: int,
          settings: RecallSettings) -> float:  # fmt: skip
    """The score :func:`explain` gives (without the explanation: recall ranks every
    candidate by it and explains only the hits it returns)."""
    return _factors(memory, signals, now, settings)[-1]


def _factors(
    memory: Memory, signals: Sequence[SignalMatch], now: int, settings: RecallSettings
) -> tuple[float, float, float, float, float, float]:
    """``(fused, importance factor, retention factor, age in days, recency factor,
    score)``."""
    fused = sum(s.contribution for s in signals)
    importance_factor = 1.0 + settings.importance_weight * (memory.importance - 0.5)
    retention_factor = settings.retention_floor + (1 - settings.retention_floor) * memory.retention
    age_days = max(now - memory.created_at, 0) / 86_400_000
    recency_factor = 1.0 + settings.recency_weight * math.exp(-age_days / settings.recency_days)
    score = fused * importance_factor * retention_factor * recency_factor
    return fused, importance_factor, retention_factor, age_days, recency_factor, score


def explain(
    memory: Memory,
    signals: Sequence[SignalMatch],
    now: int,
    settings: RecallSettings,
    filters: tuple[str, ...],
    notes: tuple[str, ...] = (),
    *,
    vector_pending: int = 0,
) -> RecallHit:
    """Score one candidate and say why (``notes``: anything else the reader should know,
    such as a memory that has no vector yet; ``vector_pending``: memories the vector
    search could not see)."""
    fused, importance_factor, retention_factor, age_days, recency_factor, score = _factors(
        memory, signals, now, settings
    )
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
        vector_pending=vector_pending,
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

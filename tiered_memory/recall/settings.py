"""Recall's settings: the fusion weights and switches (:class:`RecallSettings`), and how
free text becomes keywords (:func:`keywords`, :data:`STOPWORDS`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from persistence import (
    InvalidInputError,
    require_bool,
    require_choice,
    require_int,
    require_number,
)
from tiered_memory.recall.types import Reranker

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


def keywords(text: str) -> tuple[str, ...]:
    """The words of free text recall's keyword search looks for: lower-cased, each once,
    in order of first use; stopwords are dropped unless nothing else is left. Empty when
    the text has no words.

    Only word characters survive: quotes, ``AND``/``OR``/``NOT``/``NEAR``, ``*``, ``-``,
    ``:`` and parentheses become plain words or disappear, so no user text reaches a
    backend as query syntax (each backend builds its own full-text query from the words).
    """
    words = [w.lower() for w in _WORD.findall(text)]
    kept = [w for w in words if w not in STOPWORDS] or words
    return tuple(dict.fromkeys(kept))


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

    The graph signal (:mod:`tiered_memory.recall.graph_signal`: memories about the entities the
    query names, and with ``graph_hops=1`` about their neighbours at ``graph_hop_decay``
    the weight) weighs ``graph_weight`` in rank fusion and adds ``graph_share`` of its
    normalised score in score fusion. Score fusion has it on at ``graph_share=0.05``
    (LoCoMo: recall@5 up on the tuning and the check conversations, recall@10 the same;
    README); rank fusion has it off (``graph_weight=0``: it lowered recall there).

    The fact signal (:mod:`tiered_memory.recall.fact_signal`: a query naming an entity
    and one of its single-valued relations, "where does Ana live?", favours the memories
    asserting that relation as it holds) adds ``fact_share`` in score fusion and weighs
    ``fact_weight`` in rank fusion (off there, as the graph signal). A memory holding
    the fact by its words, not a relation ("Ana moved to Berlin" for "where does Ana
    live?"), gains ``fact_words`` of that (0 turns this part off); one holding it by its
    meaning (its vector nearest the predicate's: "Ana signed a contract with Acme" for
    "who employs Ana?") gains ``fact_vectors`` of it (0 turns that part off), and with
    ``fact_mutual`` only when no other memory about the subject is nearer that predicate
    (``False``: the widest margin alone, as before issue 43's guard). It acts
    only on a query whose words name such a predicate (``MemoryConfig.predicate_words``).

    Conversation signals (:mod:`tiered_memory.recall.conversation`): the memory after a
    question among the candidates gains ``adjacency_weight`` times the question's fused
    value; when the query names exactly one speaker, their memories gain
    ``speaker_boost``. A ``reranker`` (:mod:`tiered_memory.recall.rerank`; none by default)
    scores the best ``rerank_depth`` fused candidates, adding ``rerank_weight`` times
    its score. The defaults were chosen on LoCoMo conv-26/30/41 and checked on
    conv-42/43 (README).

    Sessions as units (:mod:`tiered_memory.recall.session_units`): each session among
    the candidates is scored by the mean of its best ``session_turns`` fused values; the
    ``session_top`` best lift their candidates by up to ``session_weight`` (off by
    default: it did not help the tuning half; 0.05 turns it on). Pseudo-relevance
    feedback (:mod:`tiered_memory.recall.feedback`, off: ``feedback_share=0``): the
    query vector moves (``feedback_beta``) towards the mean of the ``feedback_hits``
    best first-pass candidates within ``feedback_confidence`` of the best, and a second
    vector search adds ``feedback_share`` of the cosine with it.

    Neighbour evidence (:mod:`tiered_memory.recall.neighbours`, score fusion): each of
    the ``neighbour_depth`` strongest candidates whose turn before or after in its
    session is closer to the query vector than it is gains ``neighbour_weight`` times
    the difference of the two cosines (recall@5 up on both LoCoMo halves; 0 turns it
    off).

    ``min_score`` drops hits scoring below it, ``relative_cut`` those below that share
    of the best hit's score (0.5: half the best); recall's arguments of the same names
    override them for one call. Both off by default: recall returns ``k`` hits whenever
    ``k`` memories match."""

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
    speaker_boost: float = 0.1
    reranker: Reranker | None = field(default=None, compare=False)
    rerank_depth: int = 50
    rerank_weight: float = 0.4
    graph_weight: float = 0.0
    graph_share: float = 0.05
    graph_hops: int = 1
    graph_hop_decay: float = 0.5
    fact_share: float = 0.2
    fact_weight: float = 0.0
    fact_words: float = 0.5
    fact_vectors: float = 0.5
    fact_mutual: bool = True
    min_score: float | None = None
    relative_cut: float | None = None
    session_weight: float = 0.0
    session_top: int = 3
    session_turns: int = 2
    feedback_share: float = 0.0
    feedback_hits: int = 3
    feedback_confidence: float = 0.8
    feedback_beta: float = 1.0
    neighbour_weight: float = 0.3
    neighbour_depth: int = 50

    @property
    def graph_on(self) -> bool:
        """True when the graph signal takes part in this fusion."""
        return (self.graph_weight if self.fusion == "rrf" else self.graph_share) > 0

    @property
    def fact_on(self) -> bool:
        """True when the fact signal takes part in this fusion."""
        return (self.fact_weight if self.fusion == "rrf" else self.fact_share) > 0

    def __post_init__(self) -> None:
        for name in ("depth", "vector_depth", "rerank_depth", "session_top", "session_turns",
                     "feedback_hits", "neighbour_depth"):  # fmt: skip
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
            "fact_share": (0.0, 1.0),
            "fact_weight": (0.0, math.inf),
            "fact_words": (0.0, 1.0),
            "fact_vectors": (0.0, 1.0),
            "session_weight": (0.0, 1.0),
            "feedback_share": (0.0, 1.0),
            "feedback_confidence": (0.0, 1.0),
            "feedback_beta": (0.0, 10.0),
            "neighbour_weight": (0.0, 1.0),
        }
        for name, (low, high) in ranges.items():
            require_number(getattr(self, name), f"RecallSettings.{name}", minimum=low, maximum=high)
        require_number(self.recency_days, "RecallSettings.recency_days", minimum=0,
                       above_minimum=True)  # fmt: skip
        if self.reranker is not None and not isinstance(self.reranker, Reranker):
            raise InvalidInputError(
                "RecallSettings.reranker must have .name and .score(query, query_vector, "
                f"candidates), got {type(self.reranker).__name__}"
            )
        require_bool(self.fact_mutual, "RecallSettings.fact_mutual")
        check_cuts(self.min_score, self.relative_cut, "RecallSettings.")
        if self.graph_hops not in (0, 1) or isinstance(self.graph_hops, bool):
            raise InvalidInputError("RecallSettings.graph_hops must be 0 or 1")


def check_cuts(min_score: object, relative_cut: object, prefix: str = "") -> None:
    """``min_score`` a finite number, ``relative_cut`` one within [0, 1] (each or ``None``)."""
    if min_score is not None:
        require_number(min_score, f"{prefix}min_score")
    if relative_cut is not None:
        require_number(relative_cut, f"{prefix}relative_cut", minimum=0.0, maximum=1.0)


def cut(scores: list[float], min_score: float | None, relative_cut: float | None) -> int:
    """How many of ``scores`` (best first) pass both cuts."""
    floor = -math.inf if min_score is None else min_score
    if relative_cut is not None and scores and scores[0] > 0:
        floor = max(floor, relative_cut * scores[0])
    return sum(1 for s in scores if s >= floor)

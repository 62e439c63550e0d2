"""The records of recall, shared by its modules: what a hit is and how it is explained
(:class:`RecallHit`, :class:`Explanation`, :class:`SignalMatch`), and what a reranker is
given and must be (:class:`RerankCandidate`, the :class:`Reranker` protocol)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from persistence import Memory

Vector = npt.NDArray[np.float32]


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
    matched_in: tuple[str, ...] = ()
    """For the keyword signal of a returned hit: the parts of the memory's keyword
    window that hold a query word ("own words", "turns before", "turns after")."""

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
        # Named when a neighbour's words matched (own words alone: the usual case)
        where = (
            f" in {' + '.join(self.matched_in)}"
            if len(self.matched_in) > 1 or (self.matched_in and self.matched_in[0] != "own words")
            else ""
        )
        return f"{self.signal} {place}{where}: {self.measure} {self.contribution:+.4f}"


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
    vector_pending: int = 0
    """Memories still waiting for an embedding when this recall ran: its vector search
    could not see them (keywords could). 0 once the backlog is embedded."""

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
        if self.vector_pending:
            notes += (
                f" [vector search could not see {self.vector_pending} memories yet: "
                "embedding pending]"
            )
        return (
            f"{found} -> fused {self.fused:.4f} x importance {self.importance_factor:.3f} "
            f"x retention {self.retention_factor:.3f} x recency {self.recency_factor:.3f} "
            f"= {self.score:.4f}{filters}{notes}"
        )


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One recalled memory with its score and explanation (``kind == "memory"``; a
    note's hit, :class:`~tiered_memory.recall.NoteHit`, has ``kind == "note"``)."""

    kind: ClassVar[str] = "memory"
    memory: Memory
    score: float
    explanation: Explanation


@dataclass(frozen=True, slots=True)
class RerankCandidate:
    """One candidate as a reranker sees it: its text and vector (``None``: not embedded
    yet), and its session neighbours' (the memory before and the one after it, or
    ``None`` at a session's edge or outside sessions)."""

    memory_id: str
    content: str
    vector: Vector | None
    before: Vector | None = None
    after: Vector | None = None


@runtime_checkable
class Reranker(Protocol):
    """Scores candidates for a query; a higher score is a better answer."""

    @property
    def name(self) -> str: ...

    def score(
        self, query: str, query_vector: Vector | None, candidates: Sequence[RerankCandidate]
    ) -> Sequence[float]: ...


def fused_values(fused: Mapping[str, Sequence[SignalMatch]]) -> dict[str, float]:
    """Each candidate's fused value so far: the sum of its signals' contributions."""
    # A list, not a generator: the same sum in the same order, a third quicker.
    return {m: sum([s.contribution for s in signals]) for m, signals in fused.items()}

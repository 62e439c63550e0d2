"""``recall()`` of :class:`~tiered_memory.manager.AgentMemoryManager`, apart from the rest
of the manager: its typed overloads (memories only, or memories and notes) make it long.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, overload

from persistence import Tier
from tiered_memory.agent_scope import stamped
from tiered_memory.arguments import typed_arguments
from tiered_memory.recall.note_hits import NoteHit
from tiered_memory.recall.recaller import Recaller
from tiered_memory.recall.types import RecallHit
from tiered_memory.telemetry import (
    AGENT_ID,
    CONVERSATION_ID,
    RECALL_K,
    RECORD_COUNT,
    SEARCH_MEMORY,
    TIER,
    Telemetry,
)


@typed_arguments
class RecallCalls:
    """The manager's ``recall()``; the manager provides the recaller, the agent its
    handle is scoped to, and the open check."""

    agent_id: str | None
    _recall: Recaller
    _telemetry: Telemetry

    def _require_open(self) -> None:
        raise NotImplementedError  # the manager's

    @overload
    def recall(
        self,
        query: str,
        k: int = 5,
        *,
        tier: Tier | str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        tags: Sequence[str] = (),
        created_after: int | None = None,
        created_before: int | None = None,
        min_retention: float | None = None,
        min_score: float | None = None,
        relative_cut: float | None = None,
        notes: Literal[False] = False,
        include_superseded: bool = False,
        as_of: int | None = None,
    ) -> list[RecallHit]: ...

    @overload
    def recall(
        self,
        query: str,
        k: int = 5,
        *,
        tier: Tier | str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        tags: Sequence[str] = (),
        created_after: int | None = None,
        created_before: int | None = None,
        min_retention: float | None = None,
        min_score: float | None = None,
        relative_cut: float | None = None,
        notes: bool,
        include_superseded: bool = False,
        as_of: int | None = None,
    ) -> list[RecallHit | NoteHit]: ...

    def recall(
        self,
        query: str,
        k: int = 5,
        *,
        tier: Tier | str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        tags: Sequence[str] = (),
        created_after: int | None = None,
        created_before: int | None = None,
        min_retention: float | None = None,
        min_score: float | None = None,
        relative_cut: float | None = None,
        notes: bool = False,
        include_superseded: bool = False,
        as_of: int | None = None,
    ) -> list[RecallHit] | list[RecallHit | NoteHit]:
        """The ``k`` memories that best answer ``query``, each with its score and why.

        ``notes=True`` lets notes compete for the ``k`` places as hits of their own kind
        (:class:`~tiered_memory.recall.NoteHit`, ``hit.kind == "note"``); without it the
        hits are memories only (:class:`RecallHit`, ``hit.kind == "memory"``).

        Keyword (FTS5 bm25) and vector (MiniLM cosine) candidates are fused by their raw
        values (or by weighted reciprocal-rank fusion with ``RecallSettings(fusion=
        "rrf")``), then weighed by importance, retention and recency; see
        :mod:`tiered_memory.recall`. Recalled memories count as reviews (in batches).
        ``min_score`` drops hits scoring below it, ``relative_cut`` those under that
        share of the best hit's score (defaults: ``RecallSettings``, off). A hit whose
        keyword match came only from the turns around it says so in its explanation.

        Only current memories answer: one a newer memory superseded (``remember(...,
        supersedes=...)``) is left out inside each search, so the ``k`` are the best
        current ones. ``include_superseded=True`` lets them compete, each explained
        ("superseded by <id> on <date>"); ``as_of`` (epoch ms) answers as of that time:
        the memories that existed then and were not yet superseded. A hit that replaced
        others says so ("supersedes <ids>").
        """
        self._require_open()
        agent_id = stamped(self.agent_id, agent_id)
        attributes = {RECALL_K: k, TIER: None if tier is None else str(tier),
                      AGENT_ID: agent_id, CONVERSATION_ID: session_id}  # fmt: skip
        with self._telemetry.span(SEARCH_MEMORY, attributes) as span:
            span.query(query)
            hits = self._recall.recall(
                query, k, tier=tier, session_id=session_id, agent_id=agent_id, tags=tags,
                created_after=created_after, created_before=created_before,
                min_retention=min_retention, min_score=min_score, relative_cut=relative_cut,
                notes=notes, include_superseded=include_superseded, as_of=as_of,
            )  # fmt: skip
            span.set(RECORD_COUNT, len(hits))
            span.records(_hit_record(hit) for hit in hits)
            return hits


def _hit_record(hit: RecallHit | NoteHit) -> dict[str, object]:
    """A hit as the conventions' memory record: ``id``, ``content``, ``score`` (a note's
    ``metadata`` says it is a note)."""
    if isinstance(hit, NoteHit):
        return {"id": hit.note.id, "content": hit.note.content, "score": hit.score,
                "metadata": {"kind": "note", "title": hit.note.title}}  # fmt: skip
    return {"id": hit.memory.id, "content": hit.memory.content, "score": hit.score}

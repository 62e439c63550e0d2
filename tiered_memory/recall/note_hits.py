"""Notes as recall hits of their own kind (``recall(..., notes=True)``).

Notes are searched apart from memories, so memories' hits and scores are exactly what
they are without notes; the two lists are then merged by score. A note's score uses
the same score fusion as a memory's, over the notes' own keyword index::

    score = keyword_share * bm25 / best note bm25 of the query + (1 - keyword_share) * cosine

(the cosine between the query and the note's title and content, when an embedder is
configured). Notes are written on purpose: no importance, retention or recency factor
weighs them (each is 1). Only notes the keywords find are candidates. The filters that
concern memories alone (tier, session, minimum retention) leave notes out; tags and the
time range apply to a note's tags and creation time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from persistence import MemoryFilter, Note, NoteStorage
from tiered_memory.recall.settings import RecallSettings
from tiered_memory.recall.types import Explanation, SignalMatch

CANDIDATES = 20
"""How many of the notes' keyword candidates are scored."""
WRITTEN_ON_PURPOSE = "a note: written on purpose, not weighed by importance, retention or recency"
_DAY_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class NoteHit:
    """One recalled note with its score and explanation (``kind == "note"``; a memory's
    hit, :class:`~tiered_memory.recall.RecallHit`, has ``kind == "memory"``)."""

    kind: ClassVar[str] = "note"
    note: Note
    score: float
    explanation: Explanation


def _accepts(note: Note, where: MemoryFilter) -> bool:
    if where.tags and not set(where.tags) <= set(note.tags):
        return False
    if where.created_after is not None and note.created_at < where.created_after:
        return False
    return where.created_before is None or note.created_at < where.created_before


def notes_apply(where: MemoryFilter) -> bool:
    """False when a filter concerns memories alone (tier, session, retention)."""
    return where.tier is None and where.session_id is None and where.min_retention is None


def note_hits(
    notebook: NoteStorage,
    words: Sequence[str],
    where: MemoryFilter,
    settings: RecallSettings,
    now: int,
    query_vector: np.ndarray | None,
    embed: Callable[[str], np.ndarray | None],
) -> list[NoteHit]:
    """The notes that match ``words`` and ``where``, scored and explained, best first."""
    found = notebook.search_notes(words, CANDIDATES)
    if not found:
        return []
    best = found[0][1]
    share = settings.keyword_share
    described = where.describe()
    hits: list[NoteHit] = []
    for rank, (note_id, raw) in enumerate(found, start=1):
        note = notebook.get_note(note_id)
        if note is None or not _accepts(note, where):
            continue
        relative = raw / best if best < 0 else 1.0
        signals = [SignalMatch("keyword", rank, raw, "bm25", share * relative, relative)]
        if query_vector is not None:
            vector = embed(f"{note.title}\n{note.content}")
            if vector is not None:
                norms = float(np.linalg.norm(query_vector) * np.linalg.norm(vector)) or 1.0
                cosine = float(np.dot(query_vector, vector)) / norms
                signals.append(
                    SignalMatch(
                        "vector",
                        0,
                        1.0 - cosine,
                        "cosine distance",
                        (1.0 - share) * max(cosine, 0.0),
                    )  # fmt: skip
                )
        fused = sum(s.contribution for s in signals)
        explanation = Explanation(
            signals=tuple(signals), fused=fused, importance=0.5, importance_factor=1.0,
            retention=1.0, retention_factor=1.0, age_days=(now - note.created_at) / _DAY_MS,
            recency_factor=1.0, filters=described, score=fused, notes=(WRITTEN_ON_PURPOSE,),
        )  # fmt: skip
        hits.append(NoteHit(note, fused, explanation))
    hits.sort(key=lambda h: (-h.score, h.note.id))
    return hits

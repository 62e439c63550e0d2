"""What a recall hit says about supersession: a superseded memory names the memory that
replaced it and when; a current memory that replaced others names them (see
:mod:`tiered_memory.supersession`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime

from persistence import Memory
from tiered_memory.recall.types import RecallHit


def day(ms: int) -> str:
    """A time as its UTC date and minute, for explanations."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def chain_notes(memory: Memory, replaced: Sequence[str]) -> tuple[str, ...]:
    """``superseded by <id> on <date>`` for a superseded memory, ``supersedes <ids>`` for
    one that replaced others (both for a memory in the middle of a chain)."""
    notes: tuple[str, ...] = ()
    if memory.superseded_by is not None and memory.valid_to is not None:
        notes += (f"superseded by {memory.superseded_by} on {day(memory.valid_to)}",)
    if replaced:
        notes += (f"supersedes {', '.join(replaced)}",)
    return notes


def with_chain_notes(
    hits: Sequence[RecallHit], superseded_ids: Callable[[list[str]], dict[str, list[str]]]
) -> list[RecallHit]:
    """``hits`` with their :func:`chain_notes` added to the explanation's notes
    (``superseded_ids``: the store's, one look-up for all the hits)."""
    replaced = superseded_ids([hit.memory.id for hit in hits])
    noted = []
    for hit in hits:
        notes = chain_notes(hit.memory, replaced.get(hit.memory.id, ()))
        if notes:
            explanation = replace(hit.explanation, notes=hit.explanation.notes + notes)
            hit = replace(hit, explanation=explanation)
        noted.append(hit)
    return noted

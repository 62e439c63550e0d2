"""Where a keyword match lies in a memory's keyword window, for the explanation.

The keyword signal searches each memory's own words and the two memories before and
after it in its session (:class:`~tiered_memory.recall.settings.RecallSettings`'s
``context_weight`` and ``after_weight``). A memory found only through its neighbours'
words is a good answer as often as not (the reply to a question that names the
subject), but the reader should know: its explanation says so, from the backend's
:meth:`~persistence.storage.MemoryStorage.keyword_parts` of the hits returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from persistence import KeywordParts
from tiered_memory.recall.types import RecallHit

OWN, BEFORE, AFTER = "own words", "turns before", "turns after"


def parts_named(parts: KeywordParts) -> tuple[str, ...]:
    """The parts that hold a query word, in window order."""
    named = ((parts.own, OWN), (parts.before, BEFORE), (parts.after, AFTER))
    return tuple(name for held, name in named if held)


def neighbour_note(parts: KeywordParts) -> str:
    """The explanation's note for a match found only in neighbouring turns."""
    where = " and ".join(p.removeprefix("turns ") for p in parts_named(parts))
    return f"keyword match from a neighbouring turn ({where} it), not its own words"


def with_windows(hits: Sequence[RecallHit], parts: dict[str, KeywordParts]) -> list[RecallHit]:
    """``hits`` with each keyword signal naming the parts that matched, and a note on
    each hit whose keyword match came only from its neighbours."""
    out = []
    for hit in hits:
        found = parts.get(hit.memory.id)
        explanation = hit.explanation
        if found is None or not any(s.signal == "keyword" for s in explanation.signals):
            out.append(hit)
            continue
        signals = tuple(
            replace(s, matched_in=parts_named(found)) if s.signal == "keyword" else s
            for s in explanation.signals
        )
        notes = explanation.notes + ((neighbour_note(found),) if found.neighbours_only else ())
        out.append(replace(hit, explanation=replace(explanation, signals=signals, notes=notes)))
    return out

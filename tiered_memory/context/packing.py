"""Packing: the most evidence a token budget holds.

Candidates come best first (recall's rank). Each is added if the whole text, headers
and citations included, still fits the budget when rendered and counted with the
manager's ``TokenCounter`` (so ``tokens <= max_tokens`` holds for any counter, not
only for one that adds up); one that does not fit is counted in ``omitted`` and the
next, shorter one may still fit. The chosen memories are then shown in conversation
order (:mod:`tiered_memory.context.render`). A candidate's neighbouring turn (the
question it answers, the answer it gets) is added with it where both fit
(``neighbours="with"``), after every candidate was placed (``"after"``), or never
(``"none"``); ``benchmarks/eval_locomo.py --budgets`` measures which pays.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from persistence import Memory
from tiered_memory.context.render import render
from tiered_memory.dedup import normalised

NEIGHBOURS = ("with", "after", "none")


@dataclass(frozen=True, slots=True)
class Candidate:
    """A memory recall found, why, and its neighbouring turns worth showing with it."""

    memory: Memory
    reason: str
    neighbours: tuple[Memory, ...] = ()


@dataclass(frozen=True, slots=True)
class Packed:
    """What :func:`pack` chose: the text, ids in order, reasons, tokens, and misses."""

    text: str
    order: list[str]
    reasons: dict[str, str]
    tokens: int
    omitted: int


def distinct(candidates: Sequence[Candidate], threshold: float | None) -> list[Candidate]:
    """``candidates`` without near-duplicates of a better one: the same normalised
    content, or (with ``threshold``) vectors at least that cosine-similar."""
    kept: list[Candidate] = []
    texts: set[str] = set()
    vectors: list[np.ndarray] = []
    for candidate in candidates:
        text = normalised(candidate.memory.content)
        if text in texts:
            continue
        vector = candidate.memory.embedding
        if threshold is not None and vector is not None and vectors:
            unit = np.asarray(vector, dtype=np.float32)
            norms = np.linalg.norm(np.stack(vectors), axis=1) * (np.linalg.norm(unit) or 1.0)
            similar = np.stack(vectors) @ unit / np.where(norms == 0, 1.0, norms)
            if float(similar.max()) >= threshold:
                continue
        texts.add(text)
        if vector is not None:
            vectors.append(np.asarray(vector, dtype=np.float32))
        kept.append(candidate)
    return kept


def pack(
    scratchpad: Sequence[Memory],
    candidates: Sequence[Candidate],
    *,
    started: Callable[[str], int | None],
    after: Mapping[str, str | None],
    count: Callable[[str], int],
    max_tokens: int,
    neighbours: str = "with",
) -> Packed:
    """Fill ``max_tokens`` with the scratchpad's entries (most recently used first),
    then with ``candidates`` best first (see the module's docstring)."""
    pad: list[Memory] = []
    chosen: dict[str, Memory] = {}
    reasons: dict[str, str] = {}
    omitted = 0

    def fits(extra_pad: Sequence[Memory] = (), extra: Sequence[Memory] = ()) -> bool:
        kept = {m.id for m in pad} | {m.id for m in extra_pad}
        shown = [m for m in scratchpad if m.id in kept]
        text, _ = render(shown, [*chosen.values(), *extra], started, after)
        return count(text) <= max_tokens

    for entry in reversed(scratchpad):  # items() is least recently used first
        if fits(extra_pad=(entry,)):
            pad.append(entry)
            reasons[entry.id] = "scratchpad"
        else:
            omitted += 1
    for candidate in candidates:
        memory = candidate.memory
        if memory.id in chosen or memory.id in reasons:
            if reasons[memory.id].startswith("neighbour of "):
                reasons[memory.id] = candidate.reason  # found itself too: say how
            continue
        extra = [n for n in candidate.neighbours if n.id not in chosen and n.id not in reasons]
        if neighbours == "with" and extra and fits(extra=[memory, *extra]):
            _add(chosen, reasons, memory, candidate.reason, extra)
        elif fits(extra=[memory]):
            _add(chosen, reasons, memory, candidate.reason, [])
        else:
            omitted += 1
    if neighbours == "after":
        for candidate in candidates:
            if candidate.memory.id not in chosen:
                continue
            for n in candidate.neighbours:
                if n.id not in chosen and n.id not in reasons and fits(extra=[n]):
                    _add(chosen, reasons, n, "", [])
                    reasons[n.id] = f"neighbour of {candidate.memory.id}"
    kept = {m.id for m in pad}
    shown = [m for m in scratchpad if m.id in kept]
    text, order = render(shown, list(chosen.values()), started, after)
    return Packed(text, order, {i: reasons[i] for i in order}, count(text), omitted)


def _add(
    chosen: dict[str, Memory],
    reasons: dict[str, str],
    memory: Memory,
    reason: str,
    extra: Sequence[Memory],
) -> None:
    chosen[memory.id] = memory
    reasons[memory.id] = reason
    for n in extra:
        chosen[n.id] = n
        reasons[n.id] = f"neighbour of {memory.id}"

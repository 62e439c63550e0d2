"""Packing: the most evidence a token budget holds.

Candidates come best first (recall's rank). Each is added if the whole text, headers
and citations included, still fits the budget when rendered and counted with the
manager's ``TokenCounter`` (so ``tokens <= max_tokens`` holds for any counter, not
only for one that adds up); one that does not fit is counted in ``omitted`` and the
next, shorter one may still fit. The chosen memories are then shown in conversation
order (:mod:`tiered_memory.context.render`). A candidate's neighbouring turn (the
question it answers, the answer it gets) is added after every candidate was placed,
where it still fits (``neighbours="after"``, the default), with its candidate
(``"with"``), or never (``"none"``); ``benchmarks/eval_locomo.py --budgets`` measures
which pays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from persistence import Memory
from tiered_memory.context.render import Draft, render
from tiered_memory.dedup import normalised

POLICIES = ("with", "after", "none")


@dataclass(frozen=True, slots=True)
class Candidate:
    """A memory recall found (``rank``: its place in recall's order), and why: recall's
    explanation, made text only for the memories a context shows (:attr:`reason`)."""

    memory: Memory
    rank: int
    why: object

    @property
    def reason(self) -> str:
        """``recall #<rank>: <explanation>``."""
        return f"recall #{self.rank}: {self.why}"


class Links(Protocol):
    """The turn links and neighbouring turns of memories (``assemble.Neighbourhood``)."""

    after: dict[str, str | None]

    def load(self, memories: Sequence[Memory]) -> None: ...

    def of(self, memory: Memory) -> tuple[Memory, ...]: ...


@dataclass(frozen=True, slots=True)
class Packed:
    """What :func:`pack` chose: the text, ids in order, reasons (a candidate's: itself,
    made text by the caller), tokens, and misses."""

    text: str
    order: list[str]
    reasons: dict[str, Candidate | str]
    tokens: int
    omitted: int


def distinct(candidates: Sequence[Candidate], threshold: float | None) -> list[Candidate]:
    """``candidates`` without near-duplicates of a better one kept: the same normalised
    content, or (with ``threshold``) vectors at least that cosine-similar. Every pair is
    compared at once; only a candidate with a near-duplicate before it is
    looked at again (was that one kept?)."""
    earlier: dict[int, list[int]] = {}  # candidate -> the better ones it nearly repeats
    with_vectors = [i for i, c in enumerate(candidates) if c.memory.embedding is not None]
    if threshold is not None and len(with_vectors) > 1:
        vectors = np.stack(
            [np.asarray(candidates[i].memory.embedding, dtype=np.float32) for i in with_vectors]
        )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        units = vectors / np.where(norms == 0, 1.0, norms)
        # einsum, not ``@``: a product this small is quicker in one thread than through
        # a threaded BLAS, whose helper threads wait for a core on a busy machine (a
        # 100-candidate product took 16 ms at the median under load, einsum 0.6 ms).
        similar = np.einsum("ij,kj->ik", units, units)
        near = np.tril(similar >= threshold, k=-1)  # a row's better near-duplicates
        for row in np.flatnonzero(near.any(axis=1)):
            earlier[with_vectors[row]] = [with_vectors[j] for j in np.flatnonzero(near[row])]
    kept: list[Candidate] = []
    dropped: set[int] = set()
    texts: set[str] = set()
    for i, candidate in enumerate(candidates):
        text = normalised(candidate.memory.content)
        if text in texts or any(j not in dropped for j in earlier.get(i, ())):
            dropped.add(i)
            continue
        texts.add(text)
        kept.append(candidate)
    return kept


def pack(
    scratchpad: Sequence[Memory],
    candidates: Sequence[Candidate],
    *,
    started: Callable[[str], int | None],
    links: Links,
    count: Callable[[str], int],
    max_tokens: int,
    neighbours: str = "after",
) -> Packed:
    """Fill ``max_tokens`` with the scratchpad's entries (most recently used first),
    then with ``candidates`` best first (see the module's docstring).

    Each trial counts a :class:`~tiered_memory.context.render.Draft` of the text (the
    same lines and headers, in the order they were added); the text itself is then
    rendered and counted, and while a counter that does not add up puts it over the
    budget, the last addition is taken back."""
    chosen: dict[str, Memory] = {}
    reasons: dict[str, Candidate | str] = {}  # a candidate's reason is made text at the end
    steps: list[tuple[bool, list[str]]] = []  # (a candidate?, ids added), in order
    text_so_far = Draft()
    omitted = 0
    used = [0]  # tokens of the draft as it stands

    def fits(extra_pad: Sequence[Memory] = (), extra: Sequence[Memory] = ()) -> bool:
        # A line well over what is left cannot fit (2 tokens of slack: counts round)
        if extra and count(text_so_far.line(extra[0])) > max_tokens - used[0] + 2:
            return False
        tokens = count(text_so_far.text(extra_pad, extra))
        if tokens > max_tokens:
            return False
        used[0] = tokens  # the caller adds what fitted
        return True

    def add(memory: Memory, reason: Candidate | str, extra: Sequence[Memory], candidate: bool
            ) -> None:  # fmt: skip
        text_so_far.add([memory, *extra])
        chosen[memory.id] = memory
        reasons[memory.id] = reason
        for n in extra:
            chosen[n.id] = n
            reasons[n.id] = f"neighbour of {memory.id}"
        steps.append((candidate, [memory.id, *(n.id for n in extra)]))

    for entry in reversed(scratchpad):  # items() is least recently used first
        if fits(extra_pad=(entry,)):
            text_so_far.add_pad(entry)
            reasons[entry.id] = "scratchpad"
            steps.append((True, [entry.id]))
        else:
            omitted += 1
    for candidate in candidates:
        memory = candidate.memory
        if memory.id in reasons:
            said = reasons[memory.id]
            if isinstance(said, str) and said.startswith("neighbour of "):
                reasons[memory.id] = candidate  # found itself too: say how
            continue
        extra = [n for n in links.of(memory) if n.id not in reasons]
        if neighbours == "with" and extra and fits(extra=[memory, *extra]):
            add(memory, candidate, extra, True)
        elif fits(extra=[memory]):
            add(memory, candidate, [], True)
        else:
            omitted += 1
    links.load([c.memory for c in candidates if c.memory.id in chosen])  # their links
    if neighbours == "after":
        for candidate in candidates:
            if candidate.memory.id not in chosen:
                continue
            for n in links.of(candidate.memory):
                if n.id not in reasons and fits(extra=[n]):
                    add(n, f"neighbour of {candidate.memory.id}", [], False)
    while True:
        kept = [m for m in scratchpad if m.id in reasons]
        text, order = render(kept, list(chosen.values()), started, links.after)
        tokens = count(text)
        if tokens <= max_tokens or not steps:
            return Packed(text, order, {i: reasons[i] for i in order}, tokens, omitted)
        was_candidate, taken = steps.pop()  # over by the counter's rounding: take it back
        omitted += was_candidate
        for memory_id in taken:
            chosen.pop(memory_id, None)
            del reasons[memory_id]

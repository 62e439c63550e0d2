"""Neighbour evidence: a turn whose neighbour matches the query better than it does.

In a conversation the words of an answer are often in the turn beside it ("Which
instrument do you play?" / "The clarinet, since I was young"; "I joined a church last
week" / "So far it's been really welcoming"). Answer adjacency covers a question before
its answer; this signal covers the rest, both ways. For each of the ``depth`` strongest
candidates, its turn before and its turn after in its session are compared with the
query vector; when the closer one is closer than the candidate itself, the candidate
gains ``weight`` times the difference of the two cosines::

    lift = weight * max(0, max(cos(before, q), cos(after, q)) - cos(candidate, q))

A candidate that matches the query better than its neighbours gains nothing, so the
signal moves the turns of the exchange the query is about, not the best matches. The
neighbours only lend their similarity: they do not join the candidates (recall's
filters decide those). The hit says so: ``neighbour: the turn after it matches the
query better (cosine 0.52 against 0.31)``. Score fusion only (the candidate's cosine is
its vector signal's raw value), and alike on every backend (the store's
``conversation_turns`` and ``vector_distances``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from tiered_memory.recall.conversation import Turn
from tiered_memory.recall.types import SignalMatch, fused_values

NEIGHBOUR = "neighbour"


def neighbour_lifts(
    own: Mapping[str, float],
    turns: Mapping[str, Turn],
    similarity: Mapping[str, float],
    weight: float,
) -> dict[str, tuple[str, float, float]]:
    """Candidate id -> (``"before"`` or ``"after"``, the neighbour's cosine, the lift),
    for each candidate in ``own`` (its cosine with the query) whose closer neighbour in
    ``turns`` has a higher cosine in ``similarity``."""
    lifts: dict[str, tuple[str, float, float]] = {}
    for memory_id, cosine in own.items():
        turn = turns.get(memory_id)
        if turn is None:
            continue
        sides = [(side, similarity[n]) for side, n in (("before", turn[2]), ("after", turn[3]))
                 if n is not None and n in similarity]  # fmt: skip
        if not sides:
            continue
        side, best = max(sides, key=lambda s: s[1])
        if best > cosine:
            lifts[memory_id] = (side, best, weight * (best - cosine))
    return lifts


def add_neighbour_evidence(
    fused: dict[str, list[SignalMatch]],
    weight: float,
    depth: int,
    turns: Callable[[Sequence[str]], Mapping[str, Turn]],
    distances: Callable[[Sequence[str]], Mapping[str, float]],
) -> None:
    """Add the ``neighbour`` signal to the ``depth`` strongest candidates of ``fused``
    that have a vector (``turns``: the store's conversation facts with the turn before;
    ``distances``: cosine distances to the query vector)."""
    if weight <= 0 or not fused:
        return
    strength = fused_values(fused)
    top = sorted(strength, key=lambda m: (-strength[m], m))[:depth]
    own = {
        m: 1.0 - s.raw for m in top for s in fused[m] if s.signal == "vector"
    }  # every candidate with a vector has its cosine in score fusion
    if not own:
        return
    facts = turns(list(own))
    near = [n for t in facts.values() for n in (t[2], t[3]) if n is not None]
    similarity = {n: 1.0 - d for n, d in distances(list(dict.fromkeys(near))).items()}
    for memory_id, (side, best, lift) in neighbour_lifts(own, facts, similarity, weight).items():
        why = (f"neighbour: the turn {side} it matches the query better "
               f"(cosine {best:.2f} against {own[memory_id]:.2f})")  # fmt: skip
        fused[memory_id].append(SignalMatch(NEIGHBOUR, 0, best, "cosine", lift, detail=why))

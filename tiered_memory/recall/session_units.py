"""Sessions as units: a session whose best turns match the query lifts its other turns.

Evidence for a question is often spread over one conversation session (the turn that
names the topic and the turns that answer it). After fusion, each session among the
candidates is scored by its best ``session_turns`` fused values (their mean); the
``session_top`` best sessions lift every candidate of theirs by ``session_weight``
times their score as a share of the best session's, so the lift never exceeds
``session_weight`` and reorders turns within the strongest exchanges. The hit says so:
``lifted: session 'chat-7' ranks 1st by its best turns``. Memories outside sessions
take no part. A pure function of the fused values (no store access beyond the
candidates' session ids), so it works alike on every backend.
"""

from __future__ import annotations

from collections.abc import Mapping

from tiered_memory.recall.types import SignalMatch, fused_values

SESSION = "session"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def session_scores(
    strength: Mapping[str, float], session_of: Mapping[str, str | None], best_turns: int
) -> dict[str, float]:
    """Session id -> the mean of its ``best_turns`` highest positive fused values (a
    session with fewer candidates averages what it has, counting the missing as 0)."""
    values: dict[str, list[float]] = {}
    for memory_id, value in strength.items():
        session = session_of.get(memory_id)
        if session is not None and value > 0:
            values.setdefault(session, []).append(value)
    return {
        session: sum(sorted(found, reverse=True)[:best_turns]) / best_turns
        for session, found in values.items()
    }


def add_session_lift(
    fused: dict[str, list[SignalMatch]],
    session_of: Mapping[str, str | None],
    weight: float,
    top: int,
    best_turns: int,
) -> None:
    """Add the ``session`` signal to the candidates of the ``top`` best sessions."""
    if weight <= 0 or top <= 0 or not fused:
        return
    strength = fused_values(fused)
    scores = session_scores(strength, session_of, best_turns)
    if not scores:
        return
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    best = ranked[0][1]
    place = {session: (rank, score) for rank, (session, score) in enumerate(ranked, start=1)}
    for memory_id, signals in fused.items():
        session = session_of.get(memory_id)
        if session is None or session not in place:
            continue
        rank, score = place[session]
        why = f"lifted: session '{session}' ranks {_ordinal(rank)} by its best turns"
        signals.append(
            SignalMatch(SESSION, rank, score, "session score", weight * score / best, detail=why)
        )

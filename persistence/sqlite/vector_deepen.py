"""A filtered vector search, written once for both SQLite vector indexes (the RAM copy,
:class:`~persistence.sqlite.mirror_vectors.MirrorVectors`, and the cells,
:class:`~persistence.sqlite.cell_vectors.CellVectors`): each gives its first stage, this
module decides how deep it must go and when comparing exactly is cheaper.

A filter an index serves (a session, agent, tag or time range) that accepts at most
``exact_scan_max`` memories is compared exactly at once. Otherwise the first stage's
candidates that pass the filter count (checked in SQL, a few index probes each): when too
few do, the share that passed estimates how much of the file the filter accepts, and the
first stage is asked again, that much deeper (more candidates; the cells also probe that
many more cells), until enough pass, no deeper search can find more, or the filter
proves to accept few enough memories to compare them all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import apsw

from persistence.records import MemoryFilter, Tier
from persistence.sqlite import vector_reads
from persistence.sqlite.sql import index_sql

Candidates = list[tuple[str, Tier]]
Stage = Callable[[int, float], tuple[Candidates, Candidates, bool]]
"""The first stage: ``(count, share) -> (ranked, extras, exhausted)``: the ``count`` best
``(id, tier)`` candidates of a search as deep as a filter accepting ``share`` of the file
needs (the tier filter applied), best first; the memories it must compare exactly besides
(vectors its codes do not hold yet: a backlog, a transaction's own writes); and whether
no deeper search could find more."""
Rerank = Callable[[Candidates], list[tuple[str, float]]]
"""``candidates -> (id, cosine distance)`` of the ``limit`` nearest, exactly."""


def in_time_only(where: MemoryFilter) -> bool:
    """True if ``where`` keeps current memories (or those of a time, ``as_of``) and does
    nothing else, a tier aside: it accepts most of a file, and no index lists them."""
    return replace(where, tier=None, current=False, as_of=None) == MemoryFilter()


def tier_alone(where: MemoryFilter, short_tier: bool) -> bool:
    """True if ``where`` sets a tier and nothing else and the index's first stage may
    return fewer than asked of a tier (``short_tier``: cells hold few codes of a small
    tier; a RAM copy's first stage is by tier, so a tier alone does not narrow it)."""
    return short_tier and not where.narrows and where.tier is not None


def exact_if_few(
    conn: apsw.Connection, where: MemoryFilter, exact_scan_max: int, rerank: Rerank,
    *, short_tier: bool = False,
) -> list[tuple[str, float]] | None:  # fmt: skip
    """Every memory ``where`` accepts compared exactly, when an index lists them (or
    ``where`` is a tier alone, :func:`tier_alone`) and they are at most
    ``exact_scan_max``; else ``None`` (nothing compared)."""
    if not (index_sql.index_backed(where) or tier_alone(where, short_tier)):
        return None
    accepted = vector_reads.accepted_pairs(conn, where, exact_scan_max)
    return None if accepted is None else rerank(accepted)


def filtered_nearest(
    conn: apsw.Connection, where: MemoryFilter, stage: Stage, total: Callable[[], int],
    wanted: int,
    exact_scan_max: int, rerank: Rerank, *, start_share: float = 1.0,
    short_tier: bool = False,
) -> tuple[list[tuple[str, float]], float]:  # fmt: skip
    """The nearest memories ``where`` accepts, from ``stage``'s candidates re-ranked by
    ``rerank`` (module docstring), and the share of candidates that passed in the last
    round (1.0 without a filter; for a filter of current memories alone the next search
    starts from it, ``start_share``). ``total()``: how many vectors the index holds, read
    after each stage (a RAM copy holds none until its first stage loads it);
    ``wanted``: candidates re-ranked; ``short_tier``: the stage may return fewer than
    asked of a tier (cells hold few of a small tier), so a tier alone deepens too."""
    time_only = in_time_only(where)
    deepen_tier = tier_alone(where, short_tier)
    count = wanted
    if where.narrows and time_only:  # as deep as the last such search had to go
        count = min(int(1.2 * wanted / start_share) + 1, max(total(), wanted))
    share = 1.0
    ranked, extras, exhausted = stage(count, share)
    candidates = ranked + extras
    measured = 1.0
    while where.narrows or deepen_tier:
        passed = (
            only_tier(candidates, where.tier)
            if not where.narrows
            else vector_reads.accepted_among(conn, where, candidates)
        )
        if time_only and candidates:
            measured = max(len(passed) / len(candidates), 0.01)
        if len(passed) >= wanted or exhausted:  # as many ranked re-ranked as without a
            kept = set(passed)  # filter, and every extra that passed
            candidates = [p for p in ranked if p in kept][:wanted] + [
                p for p in extras if p in kept
            ]
            break
        share = max(len(passed), 1) / max(len(candidates), 1)  # of the file it accepts
        # Superseded memories aside (most of a file is current), search deeper: an exact
        # scan of what passes would read most vectors of the file.
        if not time_only and share * total() <= exact_scan_max:
            accepted = vector_reads.accepted_pairs(conn, where, exact_scan_max)
            if accepted is not None:
                return rerank(accepted), measured
        deeper = int(1.2 * wanted / share) if time_only else max(count * 4, int(2 * wanted / share))
        count = min(deeper, total())
        ranked, extras, exhausted = stage(count, share)
        candidates = ranked + extras
    return rerank(candidates), measured


def only_tier(candidates: Sequence[tuple[str, Tier]], tier: Tier | None) -> Candidates:
    """The ``candidates`` of ``tier`` (all of them without one)."""
    return [pair for pair in candidates if tier is None or pair[1] is tier]

"""The recall playground: a query box; each hit with its per-signal contributions drawn as
bars and its explanation in words, the same figures ``recall()`` returns; with ``notes``
ticked, notes compete as hits of their own kind (``recall(..., notes=True)``). The served
manager counts no recall as a review, so playing here changes nothing."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import BaseRoute

from persistence import Tier
from tiered_memory.inspector.context import (
    Inspector,
    NavItem,
    PageData,
    PageError,
    int_param,
    memory_row,
    page_routes,
)
from tiered_memory.inspector.pages.notes import note_row
from tiered_memory.recall import NoteHit, RecallHit

NAV = NavItem("Recall", "/recall")


def routes(inspector: Inspector) -> list[BaseRoute]:
    return list(page_routes(inspector, "/recall", playground))


def playground(inspector: Inspector, request: Request) -> tuple[str, PageData]:
    params = request.query_params
    query = (params.get("q") or "").strip()
    k = int_param(request, "k", 5, 1, 100)
    tier = params.get("tier") or None
    if tier is not None and tier not in {t.value for t in Tier}:
        raise PageError(400, f"tier must be one of {[t.value for t in Tier]}, got {tier!r}")
    session = params.get("session") or None
    notes = params.get("notes") not in (None, "", "0")
    hits = (
        inspector.memory.recall(query, k=k, tier=tier, session_id=session, notes=notes)
        if query
        else []
    )
    data: PageData = {
        "query": query or None, "k": k, "tier": tier, "session": session, "notes": notes,
        "hits": [_hit(h) for h in hits],
    }  # fmt: skip
    return "recall.html", data


def _hit(h: RecallHit | NoteHit) -> PageData:
    """A hit (``kind``: memory or note) with every figure of its explanation, and
    ``bars``: each signal's contribution to the fused score, then each factor's change
    (factor - 1)."""
    e = h.explanation
    signals = [
        {"signal": s.signal, "rank": s.rank, "raw": s.raw, "raw_name": s.raw_name,
         "measure": s.measure, "contribution": s.contribution, "relative": s.relative,
         "detail": s.detail, "path": s.path}
        for s in e.signals
    ]  # fmt: skip
    factors = {"importance": e.importance_factor, "retention": e.retention_factor,
               "recency": e.recency_factor}  # fmt: skip
    bars = [(f"{s.signal}{f' #{s.rank}' if s.rank else ''} · {s.measure}", s.contribution)
            for s in e.signals]  # fmt: skip
    bars += [(f"× {name} {value:.3f}", value - 1.0) for name, value in factors.items()]
    row: PageData = {
        "kind": h.kind, "score": h.score, "explanation": str(e), "signals": signals,
        "fused": e.fused, "factors": factors, "importance": e.importance,
        "retention": e.retention, "age_days": e.age_days, "filters": list(e.filters),
        "notes": list(e.notes), "bars": bars,
    }  # fmt: skip
    if isinstance(h, NoteHit):
        row["note"] = note_row(h.note)
    else:
        row["memory"] = memory_row(h.memory)
    return row

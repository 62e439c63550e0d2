"""Memories: the list (facets, sorting, paging, keyword search) and one memory's page
(content, metadata, links, promotion audit, schedule, forgetting curve, graph facts, the
contents it had before ``update()`` changed it, the notes linked to it)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from starlette.requests import Request
from starlette.routing import BaseRoute

from persistence import Memory, MemoryFilter, Tier
from tiered_memory.forgetting import DAY_MS, initial_stability, retention
from tiered_memory.inspector.context import (
    Inspector,
    NavItem,
    PageData,
    PageError,
    int_param,
    memory_row,
    page_routes,
)
from tiered_memory.recall.settings import keywords

NAV = NavItem("Memories", "/memories")
SORTS = ("created_at", "updated_at", "importance", "retention", "last_accessed_at")
SCAN = 5000
"""At most this many matches are read for the facet counts and paging."""
FACETS = ("tier", "session_id", "agent_id", "tags", "speaker")
CURVE_POINTS = 160


def routes(inspector: Inspector) -> list[BaseRoute]:
    return [
        *page_routes(inspector, "/memories", memory_list),
        *page_routes(inspector, "/memories/{memory_id}", memory_page),
    ]


def memory_list(inspector: Inspector, request: Request) -> tuple[str, PageData]:
    memory, params = inspector.memory, request.query_params
    tier = params.get("tier") or None
    if tier is not None and tier not in {t.value for t in Tier}:
        raise PageError(400, f"tier must be one of {[t.value for t in Tier]}, got {tier!r}")
    sort = params.get("sort") or "created_at"
    if sort not in SORTS:
        raise PageError(400, f"sort must be one of {list(SORTS)}, got {sort!r}")
    descending = params.get("order", "desc") != "asc"
    per_page = int_param(request, "per_page", 25, 1, 500)
    page = int_param(request, "page", 1, 1, 1_000_000)
    filters: dict[str, Any] = {
        "session_id": params.get("session") or None,
        "agent_id": params.get("agent") or None,
        "tags": tuple(t for t in params.getlist("tag") if t),
    }
    speaker = params.get("speaker") or None
    query = (params.get("q") or "").strip()
    if query:
        words = keywords(query)
        where = MemoryFilter(tier=None if tier is None else Tier(tier), **filters)
        ranked = memory.store.indexes.keyword_search(
            words, SCAN, None if tier is None else Tier(tier), where=where
        )
        found = _in_order(memory, [memory_id for memory_id, _ in ranked])
        if "sort" in params:
            found.sort(key=lambda m: _sort_key(m, sort), reverse=descending)
    else:
        found = memory.query(tier, **filters, order_by=sort, descending=descending, limit=SCAN,
                             include_superseded=True)  # fmt: skip
    if speaker is not None:
        found = [m for m in found if m.speaker == speaker]
    start = (page - 1) * per_page
    data: PageData = {
        "filters": {"tier": tier, "session": filters["session_id"], "agent": filters["agent_id"],
                    "tag": list(filters["tags"]), "speaker": speaker, "q": query or None},
        "sort": sort, "order": "desc" if descending else "asc",
        "page": page, "per_page": per_page,
        "total": len(found), "capped": len(found) >= SCAN, "scan_limit": SCAN,
        "facets": facets(found),
        "memories": [memory_row(m) for m in found[start : start + per_page]],
    }  # fmt: skip
    return "memories.html", data


def _in_order(memory: Any, ids: list[str]) -> list[Memory]:
    found = [memory.get(i) for i in ids]
    return [m for m in found if m is not None]


def _sort_key(memory: Memory, sort: str) -> tuple[bool, Any, str]:
    value = getattr(memory, sort)
    return (value is not None, value if value is not None else 0, memory.id)


def facets(found: list[Memory]) -> dict[str, list[tuple[str, int]]]:
    """Counts of each value of each facet among the matches, most frequent first."""
    counts: dict[str, Counter[str]] = {name: Counter() for name in FACETS}
    for m in found:
        counts["tier"][m.tier.value] += 1
        counts["tags"].update(m.tags)
        for name in ("session_id", "agent_id", "speaker"):
            value = getattr(m, name)
            if value is not None:
                counts[name][value] += 1
    return {name: c.most_common(20) for name, c in counts.items()}


def memory_page(inspector: Inspector, request: Request) -> tuple[str, PageData]:
    memory = inspector.memory
    memory_id = request.path_params["memory_id"]
    found = memory.get(memory_id)
    if found is None:
        gone = memory.forgetting_log(memory_id)
        if gone:
            last = gone[-1]
            raise PageError(404, f"memory {memory_id} was forgotten at {last.forgotten_at} "
                                 f"(epoch ms): {last.reason}")  # fmt: skip
        raise PageError(404, f"no memory {memory_id}")
    schedule = memory.schedule(memory_id)
    entities, relations = memory.graph.facts_of(memory_id)
    names = {e.id: e.name for e in entities}
    missing = {r.subject_id for r in relations} | {r.object_id for r in relations}
    names |= {
        i: e.name for i, e in memory.graph.records.entities(sorted(missing - set(names))).items()
    }
    asserted = memory.graph.asserted_by(relations)
    data: PageData = {
        "memory": memory_row(found),
        "promotions": [
            {"from_tier": p.from_tier.value, "to_tier": p.to_tier.value,
             "promoted_at": p.promoted_at, "reason": p.reason}
            for p in memory.promotion_history(memory_id)
        ],
        "schedule": None if schedule is None else {
            "next_review_at": schedule.next_review_at, "interval_days":
            schedule.interval_ms / DAY_MS, "review_count": schedule.review_count,
            "ease_factor": schedule.ease_factor, "stability_days": schedule.stability_days,
            "last_reviewed_at": schedule.last_reviewed_at,
        },
        "curve": curve(inspector, found, schedule),
        "linked": [{"id": m.id, "content": m.content, "tier": m.tier.value}
                   for m in memory.linked(memory_id)],
        "entities": [{"id": e.id, "name": e.name, "type": e.type} for e in entities],
        "relations": [
            {"id": r.id, "subject_id": r.subject_id, "subject": names.get(r.subject_id),
             "predicate": r.predicate, "object_id": r.object_id, "object": names.get(r.object_id),
             "confidence": r.confidence, "valid_from": r.valid_from, "valid_to": r.valid_to,
             "asserted_by": asserted.get(r.id, [])}
            for r in relations
        ],
        "versions": [{"version": v.version, "content": v.content, "author": v.author,
                      "at": v.at} for v in memory.history(memory_id)],
        "notes": [{"id": n.id, "title": n.title} for n in memory.notes.about(memory=memory_id)],
        "timeline": [
            {"id": e.memory_id, "content": e.content, "valid_from": e.valid_from,
             "valid_to": e.valid_to, "superseded_by": e.superseded_by, "reason": e.reason,
             "supersedes": list(e.supersedes), "this": e.memory_id == memory_id}
            for e in memory.timeline(memory_id)
        ],
    }  # fmt: skip
    return "memory.html", data


def curve(inspector: Inspector, memory: Memory, schedule: Any) -> PageData:
    """The memory's forgetting curve from its creation: retention against days, with the
    (last) review, now, the next review and the threshold ``decay()`` forgets under.

    The file keeps the time of the last review only, so the curve runs on the initial
    stability until then and on the current stability after it."""
    m = inspector.memory
    now = m.clock()
    s0 = initial_stability(memory.importance, m.curve)
    last = None if schedule is None else schedule.last_reviewed_at
    stability = s0 if schedule is None or last is None else schedule.stability_days
    next_review = None if schedule is None else schedule.next_review_at
    start = memory.created_at
    end = max(now, next_review or now, start + DAY_MS)
    end = start + int((end - start) * 1.25)
    times = {start + (end - start) * i // CURVE_POINTS for i in range(CURVE_POINTS + 1)}
    if last is not None:
        times.add(last)  # the review itself: the curve jumps back up there
    points = []
    for at in sorted(times):
        if last is not None and at == last:
            points.append(((at - start) / DAY_MS, retention(at - start, s0)))
        if last is not None and at >= last:
            value = retention(at - last, stability)
        else:
            value = retention(at - start, s0)
        points.append(((at - start) / DAY_MS, value))

    def day(at: int | None) -> float | None:
        return None if at is None else (at - start) / DAY_MS

    return {
        "points": points, "threshold": m.config.forgetting_threshold,
        "initial_stability_days": s0, "stability_days": stability,
        "created_at": start, "now_day": day(now),
        "review_days": [] if last is None else [day(last)],
        "next_review_day": day(next_review),
    }  # fmt: skip

"""Overview: tiers with counts, sessions, file size, the embedding backlog, what
``decay()`` would forget next, recent promotions, the notes edited last."""

from __future__ import annotations

import math
from typing import Any

from starlette.requests import Request
from starlette.routing import BaseRoute

from persistence import Tier
from tiered_memory.forgetting import DAY_MS, initial_stability
from tiered_memory.inspector.context import Inspector, NavItem, PageData, memory_row, page_routes

NAV = NavItem("Overview", "/")
NEXT_FORGOTTEN = 10
RECENT_PROMOTIONS = 10
RECENT_NOTES = 5
PROMOTION_SCAN = 200


def routes(inspector: Inspector) -> list[BaseRoute]:
    return list(page_routes(inspector, "/", overview))


def overview(inspector: Inspector, request: Request) -> tuple[str, PageData]:
    memory = inspector.memory
    stats = memory.statistics()
    s = stats.storage
    data: PageData = {
        "location": memory.location,
        "backend": s.backend,
        "read_only": memory.read_only,
        "schema_version": s.schema_version,
        "size_bytes": s.size_bytes,
        "backend_details": dict(s.backend_details),
        "tiers": {"scratchpad": s.scratchpad_count, "episodic": s.episodic_count,
                  "semantic": s.semantic_count},
        "sessions": {"total": s.session_count, "active": s.active_session_count,
                     "transcript_entries": s.transcript_count},
        "embedding_backlog": s.unembedded_count,
        "embedding_errors": s.embedding_errors,
        "forgotten": s.forgotten_count,
        "superseded": memory.store.memories.superseded_count(),
        "promotions": s.promotion_count,
        "graph": {"entities": stats.graph.entities, "relations": stats.graph.relations,
                  "current_relations": stats.graph.current_relations},
        "next_forgotten": next_forgotten(inspector),
        "recent_promotions": recent_promotions(inspector),
        "notes": {"total": memory.notes.count(),
                  "recent": [{"id": n.id, "title": n.title, "updated_at": n.updated_at,
                              "updated_by": n.updated_by, "version": n.version}
                             for n in memory.notes.list(limit=RECENT_NOTES)]},
    }  # fmt: skip
    return "overview.html", data


def next_forgotten(inspector: Inspector) -> PageData:
    """The memories ``decay()`` would forget first: the weakest now, with when each falls
    under the threshold. Computed from the curve; nothing is written."""
    memory = inspector.memory
    cfg, curve, now = memory.config, memory.curve, memory.clock()
    tiers = (Tier.EPISODIC, Tier.SEMANTIC) if cfg.decay_semantic else (Tier.EPISODIC,)
    rows: list[tuple[float, str, int]] = []
    for tier in tiers:
        after = ""
        while batch := memory.store.schedules.retention_batch(tier, after, 1000):
            for row in batch:
                strength = curve.retention_of(row, now)
                stability = row.stability_days or initial_stability(row.importance, curve)
                since = row.last_reviewed_at if row.last_reviewed_at is not None else row.created_at
                crossing = since + int(-math.log(cfg.forgetting_threshold) * stability * DAY_MS)
                rows.append((strength, row.memory_id, crossing))
            after = batch[-1].memory_id
    rows.sort()
    weakest = rows[:NEXT_FORGOTTEN]
    found = {m.id: m for mid in (r[1] for r in weakest) if (m := memory.get(mid)) is not None}
    return {
        "threshold": cfg.forgetting_threshold,
        "tiers": [t.value for t in tiers],
        "below_threshold_now": sum(1 for r in rows if r[0] < cfg.forgetting_threshold),
        "memories": [
            {"retention_now": strength, "forgotten_from": crossing,
             "memory": memory_row(found[mid])}
            for strength, mid, crossing in weakest if mid in found
        ],
    }  # fmt: skip


def recent_promotions(inspector: Inspector) -> list[PageData]:
    """The latest promotions among the most recently updated semantic memories."""
    memory = inspector.memory
    recent = memory.query(
        Tier.SEMANTIC, order_by="updated_at", limit=PROMOTION_SCAN, include_superseded=True
    )
    found: list[dict[str, Any]] = []
    for m in recent:
        for record in memory.promotion_history(m.id):
            found.append({"memory_id": m.id, "content": m.content,
                          "from_tier": record.from_tier.value, "to_tier": record.to_tier.value,
                          "promoted_at": record.promoted_at, "reason": record.reason})  # fmt: skip
    found.sort(key=lambda r: -int(r["promoted_at"]))
    return found[:RECENT_PROMOTIONS]

"""The knowledge graph: entities, and an entity's page with its aliases, its relations
(validity, confidence, the memories that assert them), its neighbourhood drawn and the
notes linked to it.

An entity with hundreds of relations costs a handful of queries: its relations, the
names at their other ends, and their provenance, each read in one batch."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import BaseRoute

from tiered_memory.inspector.context import (
    Inspector,
    NavItem,
    PageData,
    PageError,
    int_param,
    page_routes,
)

NAV = NavItem("Graph", "/graph")
DRAWN = 60
"""At most this many neighbours are drawn (the table lists every relation)."""
SNIPPETS = 1000


def routes(inspector: Inspector) -> list[BaseRoute]:
    return [
        *page_routes(inspector, "/graph", entity_list),
        *page_routes(inspector, "/graph/{entity_id}", entity_page),
    ]


def entity_list(inspector: Inspector, request: Request) -> tuple[str, PageData]:
    graph = inspector.memory.graph
    params = request.query_params
    type_ = params.get("type") or None
    limit = int_param(request, "limit", 500, 1, 10_000)
    name = (params.get("q") or "").strip()
    match = graph.entity(name) if name else None
    data: PageData = {
        "type": type_, "q": name or None,
        "match": None if match is None else {"id": match.id, "name": match.name,
                                             "type": match.type},
        "statistics": {"entities": graph.statistics().entities,
                       "relations": graph.statistics().relations},
        "entities": [{"id": e.id, "name": e.name, "type": e.type, "aliases": list(e.aliases)}
                     for e in graph.entities(type_, limit=limit)],
    }  # fmt: skip
    return "graph.html", data


def entity_page(inspector: Inspector, request: Request) -> tuple[str, PageData]:
    memory = inspector.memory
    graph = memory.graph
    entity = graph.entity(request.path_params["entity_id"])
    if entity is None:
        raise PageError(404, f"no entity {request.path_params['entity_id']!r}")
    relations = graph.relations(entity)
    ends = {r.subject_id for r in relations} | {r.object_id for r in relations}
    names = graph.records.entities(sorted(ends))
    asserted = graph.asserted_by(relations)
    wanted = sorted({mid for ids in asserted.values() for mid in ids})[:SNIPPETS]
    snippets = {mid: m.content for mid in wanted if (m := memory.get(mid)) is not None}
    now = memory.clock()
    rows = []
    for r in relations:
        outgoing = r.subject_id == entity.id
        other = names.get(r.object_id if outgoing else r.subject_id)
        current = (r.valid_from is None or r.valid_from <= now) and (
            r.valid_to is None or r.valid_to > now
        )
        rows.append({
            "id": r.id, "direction": "out" if outgoing else "in", "predicate": r.predicate,
            "other_id": None if other is None else other.id,
            "other": None if other is None else other.name,
            "other_type": None if other is None else other.type,
            "confidence": r.confidence, "weight": r.weight, "valid_from": r.valid_from,
            "valid_to": r.valid_to, "current": current, "direct": r.direct,
            "asserted_by": [{"id": mid, "content": snippets.get(mid)}
                            for mid in asserted.get(r.id, [])],
        })  # fmt: skip
    near = graph.neighbors(entity, depth=2, limit=DRAWN)
    drawn = [
        (n.entity.name, f"/graph/{n.entity.id}", n.depth, " / ".join(v.predicate for v in n.via))
        for n in near
    ]
    data: PageData = {
        "entity": {"id": entity.id, "name": entity.name, "type": entity.type,
                   "description": entity.description, "aliases": list(entity.aliases),
                   "direct": entity.direct, "created_at": entity.created_at},
        "memories_naming": len(graph.memories_about(entity, limit=10_000)),
        "relations": rows,
        "neighbours": [{"id": n.entity.id, "name": n.entity.name, "depth": n.depth,
                        "via": [v.predicate for v in n.via]} for n in near],
        "drawing": {"nodes": drawn, "more": len(ends - {entity.id} - {n.entity.id for n in near})},
        "notes": [{"id": n.id, "title": n.title} for n in memory.notes.about(entity=entity.id)],
    }  # fmt: skip
    return "entity.html", data

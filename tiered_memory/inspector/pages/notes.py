"""Notes: the list (tags facet, keyword search, sorting, paging) and one note's page (title,
content, tags, the memories and entities it is linked to, and every version: who, when,
what changed). The edits are in :mod:`~tiered_memory.inspector.pages.note_edits`."""

from __future__ import annotations

import difflib
from collections import Counter
from typing import Any

from starlette.requests import Request
from starlette.routing import BaseRoute

from persistence import Note, NoteVersion
from tiered_memory.inspector.context import (
    Inspector,
    NavItem,
    PageData,
    PageError,
    int_param,
    page_routes,
)
from tiered_memory.recall.settings import keywords

NAV = NavItem("Notes", "/notes")
SORTS = ("updated_at", "created_at", "title")
SCAN = 5000
"""At most this many matches are read for the facet counts and paging."""


def routes(inspector: Inspector) -> list[BaseRoute]:
    return [
        *page_routes(inspector, "/notes", note_list),
        *page_routes(inspector, "/notes/{note_id}", note_page),
    ]


def note_row(note: Note) -> PageData:
    """A note as the pages show it (tags and links as lists)."""
    return {
        "id": note.id, "title": note.title, "content": note.content, "tags": list(note.tags),
        "version": note.version, "created_at": note.created_at, "updated_at": note.updated_at,
        "created_by": note.created_by, "updated_by": note.updated_by, "agent_id": note.agent_id,
        "links": [{"kind": link.kind, "target": link.target} for link in note.links],
    }  # fmt: skip


def note_list(inspector: Inspector, request: Request) -> tuple[str, PageData]:
    notes, params = inspector.memory.notes, request.query_params
    sort = params.get("sort") or "updated_at"
    if sort not in SORTS:
        raise PageError(400, f"sort must be one of {list(SORTS)}, got {sort!r}")
    descending = params.get("order", "asc" if sort == "title" else "desc") != "asc"
    per_page = int_param(request, "per_page", 25, 1, 500)
    page = int_param(request, "page", 1, 1, 1_000_000)
    tags = [t for t in params.getlist("tag") if t]
    query = (params.get("q") or "").strip()
    if query:
        ranked = notes.notebook.search_notes(keywords(query), SCAN)
        found = [n for note_id, _ in ranked if (n := notes.get(note_id)) is not None]
        if "sort" in params:
            found.sort(key=lambda n: _sort_key(n, sort), reverse=descending)
    else:
        found = notes.list(tag=tags[0] if tags else None, limit=SCAN)
        if sort != "updated_at" or not descending:
            found.sort(key=lambda n: _sort_key(n, sort), reverse=descending)
    found = [n for n in found if set(tags) <= set(n.tags)]
    start = (page - 1) * per_page
    data: PageData = {
        "filters": {"tag": tags, "q": query or None},
        "sort": sort, "order": "desc" if descending else "asc",
        "page": page, "per_page": per_page,
        "total": len(found), "capped": len(found) >= SCAN, "scan_limit": SCAN,
        "facets": {"tags": Counter(t for n in found for t in n.tags).most_common(30)},
        "notes": [note_row(n) for n in found[start : start + per_page]],
    }  # fmt: skip
    return "notes.html", data


def _sort_key(note: Note, sort: str) -> tuple[Any, str]:
    value = note.title.casefold() if sort == "title" else getattr(note, sort)
    return (value, note.id)


def note_page(inspector: Inspector, request: Request) -> tuple[str, PageData]:
    memory = inspector.memory
    note_id = request.path_params["note_id"]
    note = memory.notes.get(note_id)
    if note is None:
        raise PageError(404, f"no note {note_id} (a deleted note leaves nothing behind)")
    memories, entities = [], []
    for link in note.links:
        if link.kind == "memory":
            found = memory.get(link.target)
            memories.append({"id": link.target,
                             "content": None if found is None else found.content,
                             "tier": None if found is None else found.tier.value})  # fmt: skip
    wanted = [link.target for link in note.links if link.kind == "entity"]
    known = memory.graph.records.entities(wanted)
    for entity_id in wanted:
        e = known.get(entity_id)
        entities.append({"id": entity_id, "name": None if e is None else e.name,
                         "type": None if e is None else e.type})  # fmt: skip
    versions = memory.notes.history(note_id)
    before: list[NoteVersion | None] = [None, *versions[:-1]]
    data: PageData = {
        "note": note_row(note),
        "memories": memories,
        "entities": entities,
        "history": [version_row(v, b) for v, b in zip(versions, before, strict=True)],
    }
    return "note.html", data


def version_row(version: NoteVersion, before: NoteVersion | None) -> PageData:
    """One version: who wrote it, when, which fields it changed and how (the title and
    tags before and after, the content as the hunks of a unified diff against the version
    before)."""
    row: PageData = {
        "version": version.version, "author": version.author, "at": version.at,
        "changed": list(version.changed), "title": version.title, "tags": list(version.tags),
        "content": version.content,
    }  # fmt: skip
    if before is None:
        row["diff"] = None
        return row
    diff: PageData = {}
    if "title" in version.changed:
        diff["title"] = {"before": before.title, "after": version.title}
    if "tags" in version.changed:
        diff["tags"] = {"added": [t for t in version.tags if t not in before.tags],
                        "removed": [t for t in before.tags if t not in version.tags]}  # fmt: skip
    if "content" in version.changed:
        lines = difflib.unified_diff(
            before.content.splitlines(), version.content.splitlines(), lineterm="", n=2
        )
        diff["content"] = list(lines)[2:]  # the hunks, without the two file-name lines
    row["diff"] = diff
    return row

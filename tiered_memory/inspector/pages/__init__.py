"""The inspector's pages, one module each. Every module has ``NAV`` (its navigation
entry, or ``None``) and ``routes(inspector)`` (its pages with their JSON twins, and its
POST actions); :data:`MODULES` lists them in navigation order. A new page is one more
module added here."""

from __future__ import annotations

from tiered_memory.inspector.pages import (
    edits,
    graph,
    memories,
    note_edits,
    notes,
    overview,
    recall,
    sessions,
)

MODULES = (overview, memories, notes, recall, sessions, graph, edits, note_edits)

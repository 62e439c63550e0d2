"""The file formats every backend reads and writes: the versioned JSON export
(:mod:`~persistence.formats.json_export`), its validating import
(:mod:`~persistence.formats.json_import`) and the knowledge graph's part of both
(:mod:`~persistence.formats.graph_io`)."""

from persistence.formats.json_export import memory_to_json
from persistence.formats.json_import import ImportDocument

__all__ = ["ImportDocument", "memory_to_json"]

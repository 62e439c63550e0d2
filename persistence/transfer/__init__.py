"""The file formats every backend reads and writes: the versioned JSON export
(:mod:`~persistence.transfer.json_export`), the reading and validation of a document
(:mod:`~persistence.transfer.json_read`), its import (:mod:`~persistence.transfer.json_import`),
the knowledge graph's part of both (:mod:`~persistence.transfer.graph_io`) and the copy of
a whole store into an empty one, backend to backend (:mod:`~persistence.transfer.copy`).

Nothing here knows an engine: a backend hands an export its tables as an
:class:`ExportSource` (pages of records from one snapshot) and takes an import as an
:class:`ImportSink` (one write transaction); SQLite's are in :mod:`persistence.sqlite.json_io`.
"""

from persistence.transfer.copy import CopyResult, copy_store, read_source
from persistence.transfer.json_export import (
    ExportHeader,
    ExportSource,
    export_document,
    memory_to_json,
)
from persistence.transfer.json_import import ImportDocument, ImportSink, OpenSink, import_document

__all__ = [
    "CopyResult",
    "ExportHeader",
    "ExportSource",
    "ImportDocument",
    "ImportSink",
    "OpenSink",
    "copy_store",
    "export_document",
    "import_document",
    "memory_to_json",
    "read_source",
]

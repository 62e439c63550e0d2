"""Notes in JSON exports and imports.

An export lists four more tables after the knowledge graph's: ``notes``,
``note_versions``, ``note_links`` and ``memory_versions`` (memories' content history),
each in a stable order, so an export imported into an empty store exports the same
document again. Documents without them (older exports) import as before, with no notes.

Replace mode takes the document's notes as they are. Merge mode replaces a note the store
holds under the same id with the document's, versions and links with it; memory
versions join by (memory, version).

This module holds the notes' part of the document (tables, fields, checks); a backend
reads and writes the rows (SQLite: :mod:`persistence.sqlite.sql.notes_sql`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from persistence.codecs import decode_json, encode_json
from persistence.errors import InvalidImportError
from persistence.note_records import LINK_KINDS, NOTE_FIELDS

NOTE_TABLES = ("notes", "note_versions", "note_links", "memory_versions")
NOTE_TABLE_FIELDS: dict[str, tuple[str, ...]] = {
    "notes": ("id", "title", "content", "tags", "version", "created_at", "updated_at",
              "created_by", "updated_by", "agent_id"),
    "note_versions": ("note_id", "version", "title", "content", "tags", "author", "at",
                      "changed"),
    "note_links": ("note_id", "kind", "target", "made_at"),
    "memory_versions": ("memory_id", "version", "content", "author", "at"),
}  # fmt: skip
"""Each table's fields, in the order of an export row and of a backend's row tuple."""
_LISTS = frozenset({("notes", "tags"), ("note_versions", "tags"), ("note_versions", "changed")})
"""Fields that are JSON text in a row and a list of strings in the document."""
_NULLABLE = frozenset({"created_by", "updated_by", "agent_id", "author"})
_INTS = frozenset({"version", "created_at", "updated_at", "at", "made_at"})
_KEYS = {
    "notes": ("id",),
    "note_versions": ("note_id", "version"),
    "note_links": ("note_id", "kind", "target"),
    "memory_versions": ("memory_id", "version"),
}


def row_to_json(table: str, values: Sequence[Any]) -> dict[str, Any]:
    """One row (values in :data:`NOTE_TABLE_FIELDS` order) as an export object."""
    out = dict(zip(NOTE_TABLE_FIELDS[table], values, strict=True))
    for t, name in _LISTS:
        if t == table:
            out[name] = list(decode_json(out[name]))
    return out


def json_to_row(table: str, row: Mapping[str, Any]) -> tuple[Any, ...]:
    """An export object (checked) as a backend's row tuple."""
    return tuple(
        encode_json(list(row[name]), name) if (table, name) in _LISTS else row[name]
        for name in NOTE_TABLE_FIELDS[table]
    )


@dataclass
class NoteDocument:
    """The note tables of a document, checked, as row tuples; ``present`` is False for
    documents without them."""

    present: bool = False
    rows: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)

    @property
    def row_count(self) -> int:
        return sum(len(r) for r in self.rows.values())


def _fail(where: str, problem: str) -> InvalidImportError:
    return InvalidImportError(where, problem)


def _check_value(table: str, name: str, value: Any, where: str) -> None:
    if value is None and name in _NULLABLE:
        return
    if (table, name) in _LISTS:
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise _fail(where, f"must be a list of non-empty strings, got {value!r}")
        if name == "changed" and not set(value) <= set(NOTE_FIELDS):
            raise _fail(where, f"names fields other than {list(NOTE_FIELDS)}")
    elif name in _INTS:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
            raise _fail(where, f"must be an integer >= 0, got {value!r}")
    elif name == "content":
        if not isinstance(value, str):
            raise _fail(where, f"must be a string, got {value!r}")
    elif not isinstance(value, str) or not value:
        raise _fail(where, f"must be a non-empty string, got {value!r}")
    if name == "kind" and value not in LINK_KINDS:
        raise _fail(where, f"must be one of {list(LINK_KINDS)}, got {value!r}")


def read_notes(tables: Mapping[str, Any], memory_ids: set[str]) -> NoteDocument:
    """Check the note tables of a document (all or none must be there)."""
    present = [t for t in NOTE_TABLES if t in tables]
    if not present:
        return NoteDocument()
    if len(present) != len(NOTE_TABLES):
        missing = sorted(set(NOTE_TABLES) - set(present))
        raise _fail("$.tables", f"has part of the notes: {missing} missing")
    doc = NoteDocument(present=True)
    notes: set[str] = set()
    for table in NOTE_TABLES:
        if not isinstance(tables[table], list):
            raise _fail(f"tables.{table}", "must be a list")
        keys: set[tuple[Any, ...]] = set()
        checked = []
        for n, row in enumerate(tables[table]):
            where = f"tables.{table}[{n}]"
            fields = NOTE_TABLE_FIELDS[table]
            if not isinstance(row, dict) or set(row) != set(fields):
                raise _fail(where, f"must be an object with exactly {list(fields)}")
            for name in fields:
                _check_value(table, name, row[name], f"{where}.{name}")
            key = tuple(row[k] for k in _KEYS[table])
            if key in keys:
                raise _fail(where, f"repeats {'/'.join(_KEYS[table])} {key!r}")
            keys.add(key)
            if table == "notes":
                notes.add(row["id"])
            elif table == "memory_versions":
                if row["memory_id"] not in memory_ids:
                    raise _fail(f"{where}.memory_id", f"names memory {row['memory_id']!r}, "
                                "not there")  # fmt: skip
            elif row["note_id"] not in notes:
                raise _fail(f"{where}.note_id", f"names note {row['note_id']!r}, not there")
            checked.append(json_to_row(table, row))
        doc.rows[table] = checked
    return doc

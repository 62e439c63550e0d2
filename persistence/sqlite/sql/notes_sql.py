"""SQL of notes (``notes``, ``note_versions``, ``note_links``, ``notes_fts``) and of
memories' content history (``memory_versions``): the statements
:class:`~persistence.stores.notes.NoteStore` runs (see :mod:`persistence.statements`) and
the decoders of the rows they return.

A statement that reads or removes notes carries the handle's
:class:`~persistence.stores.scope.Scope` (the notes' ``agent_id``): a scoped handle reads
and removes only the notes its agent wrote. A note's keywords are kept by hand: the
statements that write or delete a note come with those that keep ``notes_fts`` (a
contentless FTS5 table keyed by the note's rowid) in step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from persistence.codecs import decode_json
from persistence.note_records import MemoryVersion, Note, NoteLink, NoteVersion
from persistence.sqlite.row_checks import INT, NULL_TEXT, TEXT, check_row, json_texts
from persistence.sqlite.sql.index_sql import fts5_match
from persistence.sqlite.sql.memory_sql import scoped_ids
from persistence.statements import Batch, Row, Statement
from persistence.stores.rows import note_row, note_version_row
from persistence.stores.scope import WHOLE, Scope

_COLUMNS = (
    "id, title, content, tags, version, created_at, updated_at, created_by, updated_by, agent_id"
)
_VERSION_COLUMNS = "note_id, version, title, content, tags, author, at, changed"
NOTE_TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "notes": tuple(c.strip() for c in _COLUMNS.split(",")),
    "note_versions": tuple(c.strip() for c in _VERSION_COLUMNS.split(",")),
    "note_links": ("note_id", "kind", "target", "made_at"),
    "memory_versions": ("memory_id", "version", "content", "author", "at"),
}
"""Each table's columns, in the order of an export row (see ``persistence.transfer.note_io``)."""
_ORDER = {
    "notes": "id",
    "note_versions": "note_id, version",
    "note_links": "note_id, made_at, kind, target",
    "memory_versions": "memory_id, version",
}


_LIVE = (
    "(kind <> 'memory' OR EXISTS (SELECT 1 FROM episodic WHERE id = target) "
    "OR EXISTS (SELECT 1 FROM semantic WHERE id = target) "
    "OR EXISTS (SELECT 1 FROM scratchpad WHERE id = target))"
)
"""A link counts while its memory exists (a forgotten memory's links are skipped on
reading; the rows stay, holding an id and no content, and travel with exports)."""


def _scoped(scope: Scope, column: str = "agent_id") -> tuple[str, tuple[str, ...]]:
    """The scope's condition on a note's owner, to append after ``WHERE ...``."""
    return scope.and_(column)


_KINDS = {
    "notes": (TEXT, TEXT, TEXT, TEXT, INT, INT, INT, NULL_TEXT, NULL_TEXT, NULL_TEXT),
    "note_versions": (TEXT, INT, TEXT, TEXT, TEXT, NULL_TEXT, INT, TEXT),
    "note_links": (TEXT, TEXT),
    "memory_versions": (TEXT, INT, TEXT, NULL_TEXT, INT),
}
"""Each table's column types, in :data:`NOTE_TABLE_COLUMNS`' order (``note_links``: the
two columns a note's links are read from)."""


def _checked(table: str, row: Sequence[Any]) -> Sequence[Any]:
    columns = ("kind", "target") if table == "note_links" else NOTE_TABLE_COLUMNS[table]
    return check_row(table, columns, _KINDS[table], row)


# --- decoders ---------------------------------------------------------------------------


def to_note(row: Row, links: Sequence[Row] = ()) -> Note:
    """The note a row of :func:`fetch` or :func:`recent` holds, with the rows of its
    :func:`links` (damage if a column's type is not its own)."""
    held = tuple(NoteLink(*_checked("note_links", link)) for link in links)
    _checked("notes", row)
    tags = json_texts("notes", "tags", decode_json(row[3]))
    return Note(row[0], row[1], row[2], tags, row[4], row[5], row[6], row[7], row[8], row[9],
                held)  # fmt: skip


def to_version(row: Row) -> NoteVersion:
    """The note version a row of :func:`versions` holds (damage if a column's type is
    not its own)."""
    _checked("note_versions", row)
    tags = json_texts("note_versions", "tags", decode_json(row[4]))
    changed = json_texts("note_versions", "changed", decode_json(row[7]))
    return NoteVersion(row[0], row[1], row[2], row[3], tags, row[5], row[6], changed)


def to_memory_version(row: Row) -> MemoryVersion:
    """The memory version a row of :func:`memory_versions` holds."""
    return MemoryVersion(*_checked("memory_versions", row))


# --- notes ------------------------------------------------------------------------------


def links(note_id: str) -> Statement:
    """The note's live links (``kind, target``), oldest first."""
    return Statement(
        f"SELECT kind, target FROM note_links WHERE note_id = ? AND {_LIVE} "
        "ORDER BY made_at, kind, target",
        (note_id,),
    )


def fetch(note_id: str, scope: Scope = WHOLE) -> Statement:
    """The note with that id (if in ``scope``)."""
    mine, agent = _scoped(scope)
    return Statement(f"SELECT {_COLUMNS} FROM notes WHERE id = ?{mine}", (note_id, *agent))


_UNINDEX = "DELETE FROM notes_fts WHERE rowid = (SELECT rowid FROM notes WHERE id = ?{mine})"
_INDEX = (
    "INSERT INTO notes_fts (rowid, title, content, tags) "
    "SELECT rowid, ?, ?, ? FROM notes WHERE id = ?"
)


def _index(note: Note) -> tuple[Any, ...]:
    """The parameters of :data:`_INDEX`: the note's words, under the note's rowid."""
    return (note.title, note.content, " ".join(note.tags), note.id)


_SAVE_NOTE = (
    "ON CONFLICT (id) DO UPDATE SET title = excluded.title, content = excluded.content, "
    "tags = excluded.tags, version = excluded.version, updated_at = excluded.updated_at, "
    "updated_by = excluded.updated_by"
)


def save(note: Note, version: NoteVersion) -> list[Statement]:
    """Write ``note`` as it is now and its new ``version``, and replace its keywords."""
    return [
        Statement(
            f"INSERT INTO notes ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) {_SAVE_NOTE}",
            note_row(note),
        ),
        Statement(
            f"INSERT INTO note_versions ({_VERSION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            note_version_row(version),
        ),
        Statement(_UNINDEX.format(mine=""), (note.id,)),
        Statement(_INDEX, _index(note)),
    ]


def versions(note_id: str, scope: Scope = WHOLE) -> Statement:
    """Every version of the note, oldest first (none if out of ``scope``)."""
    mine, agent = _scoped(scope)
    return Statement(
        f"SELECT {_VERSION_COLUMNS} FROM note_versions WHERE note_id = ? AND note_id IN "
        f"(SELECT id FROM notes WHERE id = ?{mine}) ORDER BY version",
        (note_id, note_id, *agent),
    )


def recent(tag: str | None, limit: int | None, scope: Scope = WHOLE) -> Statement:
    """Notes in ``scope``, most recently updated first (with ``tag``: only those
    carrying it)."""
    mine, agent = scope.condition()
    sql = f"SELECT {_COLUMNS} FROM notes WHERE {mine}"
    params: tuple[Any, ...] = agent
    if tag is not None:
        sql += " AND EXISTS (SELECT 1 FROM json_each(notes.tags) WHERE value = ?)"
        params = (*params, tag)
    sql += " ORDER BY updated_at DESC, id"
    if limit is not None:
        sql += " LIMIT ?"
        params = (*params, limit)
    return Statement(sql, params)


def unindex(note_id: str, scope: Scope = WHOLE) -> list[Statement]:
    """Before :func:`delete`: remove the note's (in ``scope``) keywords. The pages freed
    hold none of its text (``secure_delete``, on for every connection that writes)."""
    mine, agent = _scoped(scope)
    return [Statement(_UNINDEX.format(mine=mine), (note_id, *agent))]


def delete(note_id: str, scope: Scope = WHOLE) -> Statement:
    """Delete the note (in ``scope``) with every version and link (cascade); returns its
    id if it existed."""
    mine, agent = _scoped(scope)
    return Statement(f"DELETE FROM notes WHERE id = ?{mine} RETURNING id", (note_id, *agent))


def link(note_id: str, kind: str, target: str, at: int) -> Statement:
    """Link the note to ``target``; returns a row unless it was linked already."""
    return Statement(
        "INSERT INTO note_links (note_id, kind, target, made_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT DO NOTHING RETURNING note_id",
        (note_id, kind, target, at),
    )


def unlink(note_id: str, kind: str, target: str) -> Statement:
    """Remove a link; returns a row if there was one."""
    return Statement(
        "DELETE FROM note_links WHERE note_id = ? AND kind = ? AND target = ? RETURNING note_id",
        (note_id, kind, target),
    )


def linked_to(kind: str, target: str, scope: Scope = WHOLE) -> Statement:
    """Ids of the notes (in ``scope``) linked to ``target``, oldest link first."""
    mine, agent = _scoped(scope, "n.agent_id")
    return Statement(
        "SELECT l.note_id FROM note_links l JOIN notes n ON n.id = l.note_id "
        f"WHERE l.kind = ? AND l.target = ? AND {_LIVE}{mine} "
        "ORDER BY l.made_at, n.id",
        (kind, target, *agent),
    )


def search(words: Sequence[str], limit: int, scope: Scope = WHOLE) -> Statement:
    """``(note id, bm25)`` of the notes (in ``scope``) holding any of ``words`` (an FTS5
    query), best (lowest) first."""
    mine, agent = _scoped(scope, "n.agent_id")
    return Statement(
        "SELECT n.id, bm25(notes_fts) AS score FROM notes_fts JOIN notes n ON n.rowid = "
        f"notes_fts.rowid WHERE notes_fts MATCH ?{mine} "
        "ORDER BY score, n.id LIMIT ?",
        (fts5_match(words), *agent, limit),
    )


def count(scope: Scope = WHOLE) -> Statement:
    """How many notes ``scope`` holds."""
    mine, agent = scope.condition()
    return Statement(f"SELECT count(*) FROM notes WHERE {mine}", agent)


# --- memories' content history ------------------------------------------------------------


def memory_versions(memory_id: str) -> Statement:
    """A memory's contents, oldest first."""
    return Statement(
        "SELECT memory_id, version, content, author, at FROM memory_versions "
        "WHERE memory_id = ? ORDER BY version",
        (memory_id,),
    )


def add_memory_version(version: MemoryVersion) -> Statement:
    """Keep one content of a memory."""
    return Statement(
        "INSERT INTO memory_versions (memory_id, version, content, author, at) "
        "VALUES (?, ?, ?, ?, ?)",
        (version.memory_id, version.version, version.content, version.author, version.at),
    )


FORGET_MEMORY_VERSIONS = (
    "DELETE FROM memory_versions WHERE memory_id NOT IN (SELECT id FROM episodic "
    "UNION ALL SELECT id FROM semantic UNION ALL SELECT id FROM scratchpad)"
)
"""Remove the history of memories that no longer exist (run before a commit)."""


# --- export and import ------------------------------------------------------------------


def table_rows(table: str, scope: Scope = WHOLE) -> Statement:
    """Every row of one table in export order (a scoped handle: its agent's notes and
    its memories' content history)."""
    columns = ", ".join(NOTE_TABLE_COLUMNS[table])
    mine, params = scope.condition()
    if table == "memory_versions":  # the content history of its memories
        held, params = scoped_ids(scope)
        where = f"memory_id IN ({held})" if scope.scoped else "1 = 1"
        return Statement(
            f"SELECT {columns} FROM memory_versions WHERE {where} ORDER BY {_ORDER[table]}",
            params if scope.scoped else (),
        )
    if table == "notes":
        return Statement(f"SELECT {columns} FROM notes WHERE {mine} ORDER BY id", params)
    return Statement(
        f"SELECT {columns} FROM {table} WHERE note_id IN (SELECT id FROM notes WHERE {mine}) "
        f"ORDER BY {_ORDER[table]}",
        params,
    )


def insert_rows(table: str, rows: Sequence[Sequence[Any]]) -> list[Batch]:
    """Insert export rows (values in :data:`NOTE_TABLE_COLUMNS` order), replacing rows
    with the same key; a note the file holds under the id of a ``notes`` row is deleted
    first (a merge: the document's note replaces it), and ``notes`` rows get their
    keywords."""
    columns = NOTE_TABLE_COLUMNS[table]
    marks = ", ".join("?" * len(columns))
    insert = Batch(f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)
    if table != "notes":
        return [insert]
    ids = [(row[0],) for row in rows]
    return [
        Batch(_UNINDEX.format(mine=""), ids),
        Batch("DELETE FROM notes WHERE id = ?", ids),  # versions, links: cascade
        insert,
        Batch(_UNINDEX.format(mine=""), ids),
        Batch(_INDEX, [_index(to_note(tuple(row))) for row in rows]),
    ]


def clear() -> list[Statement]:
    """Delete every note (and with them versions, links, keywords) and memory history."""
    return [
        Statement("DELETE FROM notes_fts"),
        Statement("DELETE FROM notes"),
        Statement("DELETE FROM memory_versions"),
    ]


def has_notes() -> Statement:
    """Whether the file has the note tables (schema 13 on): one true or false value."""
    return Statement("SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = 'notes')")


def row_count() -> Statement:
    """Rows the note tables hold (an export's share; run only if :func:`has_notes`)."""
    return Statement(
        "SELECT " + " + ".join(f"(SELECT count(*) FROM {t})" for t in NOTE_TABLE_COLUMNS)
    )

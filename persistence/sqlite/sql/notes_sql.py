"""SQL of notes (``notes``, ``note_versions``, ``note_links``, ``notes_fts``) and of
memories' content history (``memory_versions``).

A statement that reads or removes notes carries the handle's
:class:`~persistence.stores.scope.Scope` (the notes' ``agent_id``): a scoped handle reads
and removes only the notes its agent wrote.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from persistence.codecs import decode_json
from persistence.note_records import MemoryVersion, Note, NoteLink, NoteVersion
from persistence.sqlite.connection import query_all, query_one, query_value
from persistence.sqlite.row_checks import INT, NULL_TEXT, TEXT, check_row, json_texts
from persistence.sqlite.sql.index_sql import fts5_match
from persistence.sqlite.sql.memory_sql import scoped_ids
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


def _to_note(row: Sequence[Any], links: tuple[NoteLink, ...] = ()) -> Note:
    """The note a row holds (damage if a column's type is not its own)."""
    _checked("notes", row)
    tags = json_texts("notes", "tags", decode_json(row[3]))
    return Note(row[0], row[1], row[2], tags, row[4], row[5], row[6], row[7], row[8], row[9],
                links)  # fmt: skip


def _to_version(row: Sequence[Any]) -> NoteVersion:
    """The note version a row holds (damage if a column's type is not its own)."""
    _checked("note_versions", row)
    tags = json_texts("note_versions", "tags", decode_json(row[4]))
    changed = json_texts("note_versions", "changed", decode_json(row[7]))
    return NoteVersion(row[0], row[1], row[2], row[3], tags, row[5], row[6], changed)


def _links(conn: apsw.Connection, note_id: str) -> tuple[NoteLink, ...]:
    rows = query_all(
        conn,
        f"SELECT kind, target FROM note_links WHERE note_id = ? AND {_LIVE} "
        "ORDER BY made_at, kind, target",
        (note_id,),
    )
    return tuple(NoteLink(*_checked("note_links", row)) for row in rows)


def fetch(conn: apsw.Connection, note_id: str, scope: Scope = WHOLE) -> Note | None:
    """The note with that id (if in ``scope``), with its links."""
    mine, agent = _scoped(scope)
    row = query_one(conn, f"SELECT {_COLUMNS} FROM notes WHERE id = ?{mine}", (note_id, *agent))
    return None if row is None else _to_note(row, _links(conn, note_id))


def _index(conn: apsw.Connection, note: Note) -> None:
    """Put the note's words in ``notes_fts`` under the note's rowid (replacing them)."""
    rowid = query_value(conn, "SELECT rowid FROM notes WHERE id = ?", (note.id,))
    conn.execute("DELETE FROM notes_fts WHERE rowid = ?", (rowid,))
    conn.execute(
        "INSERT INTO notes_fts (rowid, title, content, tags) VALUES (?, ?, ?, ?)",
        (rowid, note.title, note.content, " ".join(note.tags)),
    )


_SAVE_NOTE = (
    "ON CONFLICT (id) DO UPDATE SET title = excluded.title, content = excluded.content, "
    "tags = excluded.tags, version = excluded.version, updated_at = excluded.updated_at, "
    "updated_by = excluded.updated_by"
)


def save(conn: apsw.Connection, note: Note, version: NoteVersion) -> None:
    """Write ``note`` as it is now and its new ``version`` (and refresh its keywords)."""
    conn.execute(
        f"INSERT INTO notes ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) {_SAVE_NOTE}",
        note_row(note),
    )
    conn.execute(
        f"INSERT INTO note_versions ({_VERSION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        note_version_row(version),
    )
    _index(conn, note)


def versions(conn: apsw.Connection, note_id: str, scope: Scope = WHOLE) -> list[NoteVersion]:
    """Every version of the note, oldest first (none if out of ``scope``)."""
    mine, agent = _scoped(scope)
    rows = query_all(
        conn,
        f"SELECT {_VERSION_COLUMNS} FROM note_versions WHERE note_id = ? AND note_id IN "
        f"(SELECT id FROM notes WHERE id = ?{mine}) ORDER BY version",
        (note_id, note_id, *agent),
    )
    return [_to_version(r) for r in rows]


def recent(
    conn: apsw.Connection, tag: str | None, limit: int | None, scope: Scope = WHOLE
) -> list[Note]:
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
    return [_to_note(r, _links(conn, r[0])) for r in query_all(conn, sql, params)]


def delete(conn: apsw.Connection, note_id: str, scope: Scope = WHOLE) -> bool:
    """Delete the note (in ``scope``), its keywords, every version and link; True if it
    existed. Runs with ``secure_delete`` on: the pages it freed hold none of its text."""
    mine, agent = _scoped(scope)
    rowid = query_value(conn, f"SELECT rowid FROM notes WHERE id = ?{mine}", (note_id, *agent))
    if rowid is None:
        return False
    before = conn.pragma("secure_delete")
    conn.pragma("secure_delete", 1)
    try:
        conn.execute("DELETE FROM notes_fts WHERE rowid = ?", (rowid,))
        conn.execute("DELETE FROM notes WHERE rowid = ?", (rowid,))  # versions, links: cascade
    finally:
        conn.pragma("secure_delete", before)
    return True


def link(conn: apsw.Connection, note_id: str, kind: str, target: str, at: int) -> bool:
    """Link the note to ``target``; False if it was linked already."""
    conn.execute(
        "INSERT INTO note_links (note_id, kind, target, made_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT DO NOTHING",
        (note_id, kind, target, at),
    )
    return bool(conn.changes())


def unlink(conn: apsw.Connection, note_id: str, kind: str, target: str) -> bool:
    """Remove a link; True if there was one."""
    conn.execute(
        "DELETE FROM note_links WHERE note_id = ? AND kind = ? AND target = ?",
        (note_id, kind, target),
    )
    return bool(conn.changes())


def linked_to(
    conn: apsw.Connection, kind: str, target: str, scope: Scope = WHOLE
) -> list[str]:
    """Ids of the notes (in ``scope``) linked to ``target``, oldest link first."""
    mine, agent = _scoped(scope, "n.agent_id")
    rows = query_all(
        conn,
        "SELECT l.note_id FROM note_links l JOIN notes n ON n.id = l.note_id "
        f"WHERE l.kind = ? AND l.target = ? AND {_LIVE}{mine} "
        "ORDER BY l.made_at, n.id",
        (kind, target, *agent),
    )
    return [r[0] for r in rows]


def search(
    conn: apsw.Connection, words: Sequence[str], limit: int, scope: Scope = WHOLE
) -> list[tuple[str, float]]:
    """``(note id, bm25)`` of the notes (in ``scope``) holding any of ``words`` (an FTS5
    query), best (lowest) first."""
    mine, agent = _scoped(scope, "n.agent_id")
    rows = query_all(
        conn,
        "SELECT n.id, bm25(notes_fts) AS score FROM notes_fts JOIN notes n ON n.rowid = "
        f"notes_fts.rowid WHERE notes_fts MATCH ?{mine} "
        "ORDER BY score, n.id LIMIT ?",
        (fts5_match(words), *agent, limit),
    )
    return [(r[0], float(r[1])) for r in rows]


def count(conn: apsw.Connection, scope: Scope = WHOLE) -> int:
    """How many notes ``scope`` holds."""
    mine, agent = scope.condition()
    return int(query_value(conn, f"SELECT count(*) FROM notes WHERE {mine}", agent))


# --- memories' content history ------------------------------------------------------------


def memory_versions(conn: apsw.Connection, memory_id: str) -> list[MemoryVersion]:
    """A memory's contents, oldest first."""
    rows = query_all(
        conn,
        "SELECT memory_id, version, content, author, at FROM memory_versions "
        "WHERE memory_id = ? ORDER BY version",
        (memory_id,),
    )
    return [MemoryVersion(*_checked("memory_versions", r)) for r in rows]


def add_memory_version(conn: apsw.Connection, version: MemoryVersion) -> None:
    """Keep one content of a memory."""
    conn.execute(
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


def table_rows(conn: apsw.Connection, table: str, agent: str | None) -> list[tuple[Any, ...]]:
    """Every row of one table in export order (a scoped handle: its agent's notes)."""
    columns = ", ".join(NOTE_TABLE_COLUMNS[table])
    scope = Scope.of(agent)
    mine, params = scope.condition()
    if table == "memory_versions":  # the content history of its memories
        held, params = scoped_ids(scope)
        where = f"memory_id IN ({held})" if scope.scoped else "1 = 1"
        return query_all(
            conn, f"SELECT {columns} FROM memory_versions WHERE {where} ORDER BY {_ORDER[table]}",
            params if scope.scoped else (),
        )  # fmt: skip
    if table == "notes":
        return query_all(conn, f"SELECT {columns} FROM notes WHERE {mine} ORDER BY id", params)
    return query_all(
        conn,
        f"SELECT {columns} FROM {table} WHERE note_id IN (SELECT id FROM notes WHERE {mine}) "
        f"ORDER BY {_ORDER[table]}",
        params,
    )


def insert_rows(conn: apsw.Connection, table: str, rows: Sequence[Sequence[Any]]) -> None:
    """Insert export rows (values in :data:`NOTE_TABLE_COLUMNS` order), replacing rows
    with the same key; ``notes`` rows get their keywords."""
    columns = NOTE_TABLE_COLUMNS[table]
    marks = ", ".join("?" * len(columns))
    if table == "notes":
        for row in rows:
            delete(conn, row[0])  # a merge: the document's note replaces this one
    conn.executemany(
        f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows
    )
    if table == "notes":
        for row in rows:
            _index(conn, _to_note(row))


def clear(conn: apsw.Connection) -> None:
    """Delete every note (and with them versions, links, keywords) and memory history."""
    conn.execute("DELETE FROM notes_fts")
    conn.execute("DELETE FROM notes")
    conn.execute("DELETE FROM memory_versions")


def has_notes(conn: apsw.Connection) -> bool:
    """True if the file has the note tables (schema 13 on)."""
    return query_one(conn, "SELECT 1 FROM sqlite_schema WHERE name = 'notes'") is not None


def row_count(conn: apsw.Connection) -> int:
    """Rows the note tables hold (an export's share), 0 before schema 13."""
    if not has_notes(conn):
        return 0
    return sum(int(query_value(conn, f"SELECT count(*) FROM {t}")) for t in NOTE_TABLE_COLUMNS)

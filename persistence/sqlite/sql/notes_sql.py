"""SQL of notes (``notes``, ``note_versions``, ``note_links``, ``notes_fts``) and of
memories' content history (``memory_versions``).

``agent`` is the agent a scoped handle is for (``None``: the whole store, every note):
a scoped handle reads and writes only the notes its agent wrote.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from persistence.codecs import decode_json
from persistence.note_records import MemoryVersion, Note, NoteLink, NoteVersion
from persistence.sqlite.connection import query_all, query_one, query_value
from persistence.sqlite.row_checks import INT, NULL_TEXT, TEXT, check_row, json_texts
from persistence.stores.rows import note_row, note_version_row

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


def _mine(agent: str | None, column: str = "agent_id") -> str:
    return "" if agent is None else f" AND {column} = ?"


def _with(params: tuple[Any, ...], agent: str | None) -> tuple[Any, ...]:
    return params if agent is None else (*params, agent)


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


def fetch(conn: apsw.Connection, note_id: str, agent: str | None) -> Note | None:
    """The note with that id (if ``agent`` may see it), with its links."""
    row = query_one(
        conn, f"SELECT {_COLUMNS} FROM notes WHERE id = ?{_mine(agent)}", _with((note_id,), agent)
    )
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


def versions(conn: apsw.Connection, note_id: str, agent: str | None) -> list[NoteVersion]:
    """Every version of the note, oldest first (none if ``agent`` may not see it)."""
    rows = query_all(
        conn,
        f"SELECT {_VERSION_COLUMNS} FROM note_versions WHERE note_id = ? AND note_id IN "
        f"(SELECT id FROM notes WHERE id = ?{_mine(agent)}) ORDER BY version",
        _with((note_id, note_id), agent),
    )
    return [_to_version(r) for r in rows]


def recent(
    conn: apsw.Connection, agent: str | None, tag: str | None, limit: int | None
) -> list[Note]:
    """Notes, most recently updated first (with ``tag``: only those carrying it)."""
    sql = f"SELECT {_COLUMNS} FROM notes WHERE 1 = 1{_mine(agent)}"
    params: tuple[Any, ...] = _with((), agent)
    if tag is not None:
        sql += " AND EXISTS (SELECT 1 FROM json_each(notes.tags) WHERE value = ?)"
        params = (*params, tag)
    sql += " ORDER BY updated_at DESC, id"
    if limit is not None:
        sql += " LIMIT ?"
        params = (*params, limit)
    return [_to_note(r, _links(conn, r[0])) for r in query_all(conn, sql, params)]


def delete(conn: apsw.Connection, note_id: str, agent: str | None) -> bool:
    """Delete the note, its keywords, every version and link; True if it existed."""
    rowid = query_value(
        conn, f"SELECT rowid FROM notes WHERE id = ?{_mine(agent)}", _with((note_id,), agent)
    )
    if rowid is None:
        return False
    conn.execute("DELETE FROM notes_fts WHERE rowid = ?", (rowid,))
    conn.execute("DELETE FROM notes WHERE rowid = ?", (rowid,))  # versions, links: cascade
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


def linked_to(conn: apsw.Connection, kind: str, target: str, agent: str | None) -> list[str]:
    """Ids of the notes linked to ``target``, oldest link first."""
    rows = query_all(
        conn,
        "SELECT l.note_id FROM note_links l JOIN notes n ON n.id = l.note_id "
        f"WHERE l.kind = ? AND l.target = ? AND {_LIVE}{_mine(agent, 'n.agent_id')} "
        "ORDER BY l.made_at, n.id",
        _with((kind, target), agent),
    )
    return [r[0] for r in rows]


def search(
    conn: apsw.Connection, match: str, limit: int, agent: str | None
) -> list[tuple[str, float]]:
    """``(note id, bm25)`` of the notes matching the FTS5 expression, best (lowest) first."""
    rows = query_all(
        conn,
        "SELECT n.id, bm25(notes_fts) AS score FROM notes_fts JOIN notes n ON n.rowid = "
        f"notes_fts.rowid WHERE notes_fts MATCH ?{_mine(agent, 'n.agent_id')} "
        "ORDER BY score, n.id LIMIT ?",
        (*_with((match,), agent), limit),
    )
    return [(r[0], float(r[1])) for r in rows]


def count(conn: apsw.Connection, agent: str | None) -> int:
    """How many notes ``agent`` sees."""
    return int(query_value(conn, f"SELECT count(*) FROM notes WHERE 1 = 1{_mine(agent)}",
                           _with((), agent)))  # fmt: skip


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
    if table == "memory_versions":
        return query_all(conn, f"SELECT {columns} FROM memory_versions ORDER BY {_ORDER[table]}")
    if table == "notes":
        return query_all(
            conn,
            f"SELECT {columns} FROM notes WHERE 1 = 1{_mine(agent)} ORDER BY id",
            _with((), agent),
        )
    return query_all(
        conn,
        f"SELECT {columns} FROM {table} WHERE note_id IN (SELECT id FROM notes WHERE 1 = 1"
        f"{_mine(agent)}) ORDER BY {_ORDER[table]}",
        _with((), agent),
    )


def insert_rows(conn: apsw.Connection, table: str, rows: Sequence[Sequence[Any]]) -> None:
    """Insert export rows (values in :data:`NOTE_TABLE_COLUMNS` order), replacing rows
    with the same key; ``notes`` rows get their keywords."""
    columns = NOTE_TABLE_COLUMNS[table]
    marks = ", ".join("?" * len(columns))
    if table == "notes":
        for row in rows:
            delete(conn, row[0], None)  # a merge: the document's note replaces this one
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

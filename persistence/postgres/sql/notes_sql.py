"""SQL of notes (``tm_notes``, ``tm_note_versions``, ``tm_note_links``) and of memories'
content history (``tm_memory_versions``).

A statement that reads or removes notes carries the handle's
:class:`~persistence.stores.scope.Scope` as ``scope = %s``; row-level security scopes
every statement to the connection's agent again (migration v9). A note's keywords are
``tm_notes.kw``, a generated column over title, content and tags.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from persistence.codecs import decode_json
from persistence.note_records import MemoryVersion, Note, NoteLink, NoteVersion
from persistence.postgres.sql.keyword_sql import tsquery_text
from persistence.stores.rows import note_row, note_version_row
from persistence.stores.scope import WHOLE, Scope

Connection = psycopg.Connection[Any]

NOTE_TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "notes": ("id", "title", "content", "tags", "version", "created_at", "updated_at",
              "created_by", "updated_by", "agent_id"),
    "note_versions": ("note_id", "version", "title", "content", "tags", "author", "at",
                      "changed"),
    "note_links": ("note_id", "kind", "target", "made_at"),
    "memory_versions": ("memory_id", "version", "content", "author", "at"),
}  # fmt: skip
"""Each table's columns, in the order of an export row (the file's, too)."""
_TABLE = {
    "notes": "tm_notes",
    "note_versions": "tm_note_versions",
    "note_links": "tm_note_links",
    "memory_versions": "tm_memory_versions",
}
_ORDER = {
    "notes": 'id COLLATE "C"',
    "note_versions": 'note_id COLLATE "C", version',
    "note_links": 'note_id COLLATE "C", made_at, kind COLLATE "C", target COLLATE "C"',
    "memory_versions": 'memory_id COLLATE "C", version',
}
_COLUMNS = ", ".join(NOTE_TABLE_COLUMNS["notes"])
_VERSION_COLUMNS = ", ".join(NOTE_TABLE_COLUMNS["note_versions"])


_LIVE = "(kind <> 'memory' OR EXISTS (SELECT 1 FROM tm_memories WHERE id = target))"
"""A link counts while its memory exists (see the file's ``notes_sql``)."""


def _to_note(row: Sequence[Any], links: tuple[NoteLink, ...] = ()) -> Note:
    return Note(row[0], row[1], row[2], tuple(decode_json(row[3])), row[4], row[5], row[6],
                row[7], row[8], row[9], links)  # fmt: skip


def _to_version(row: Sequence[Any]) -> NoteVersion:
    return NoteVersion(row[0], row[1], row[2], row[3], tuple(decode_json(row[4])), row[5],
                       row[6], tuple(decode_json(row[7])))  # fmt: skip


def _links(conn: Connection, note_id: str) -> tuple[NoteLink, ...]:
    rows = conn.execute(
        f"SELECT kind, target FROM tm_note_links WHERE note_id = %s AND {_LIVE} "
        'ORDER BY made_at, kind COLLATE "C", target COLLATE "C"',
        (note_id,),
    ).fetchall()
    return tuple(NoteLink(kind, target) for kind, target in rows)


def _mine(scope: Scope, table: str = "") -> tuple[str, tuple[str, ...]]:
    """The scope's condition on a row's ``scope`` column (``1 = 1`` unscoped)."""
    return scope.condition(f"{table}scope", "%s")


def fetch(conn: Connection, note_id: str, scope: Scope = WHOLE) -> Note | None:
    """The note with that id (in ``scope``), with its links."""
    mine, agent = _mine(scope)
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM tm_notes WHERE id = %s AND {mine}", (note_id, *agent)
    ).fetchone()
    return None if row is None else _to_note(row, _links(conn, note_id))


def save(conn: Connection, note: Note, version: NoteVersion) -> None:
    """Write ``note`` as it is now and its new ``version``."""
    conn.execute(
        f"INSERT INTO tm_notes ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (id) DO UPDATE SET title = excluded.title, content = excluded.content, "
        "tags = excluded.tags, version = excluded.version, updated_at = excluded.updated_at, "
        "updated_by = excluded.updated_by",
        note_row(note),
    )
    conn.execute(
        f"INSERT INTO tm_note_versions ({_VERSION_COLUMNS}) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        note_version_row(version),
    )


def versions(conn: Connection, note_id: str, scope: Scope = WHOLE) -> list[NoteVersion]:
    """Every version of the note (in ``scope``), oldest first."""
    mine, agent = _mine(scope)
    rows = conn.execute(
        f"SELECT {_VERSION_COLUMNS} FROM tm_note_versions WHERE note_id = %s AND {mine} "
        "ORDER BY version",
        (note_id, *agent),
    ).fetchall()
    return [_to_version(r) for r in rows]


def recent(
    conn: Connection, tag: str | None, limit: int | None, scope: Scope = WHOLE
) -> list[Note]:
    """Notes in ``scope``, most recently updated first (with ``tag``: only those
    carrying it)."""
    mine, agent = _mine(scope)
    sql = f"SELECT {_COLUMNS} FROM tm_notes WHERE {mine}"
    params: list[Any] = list(agent)
    if tag is not None:
        sql += " AND tags::jsonb ? %s"
        params.append(tag)
    sql += ' ORDER BY updated_at DESC, id COLLATE "C"'
    if limit is not None:
        sql += " LIMIT %s"
        params.append(limit)
    return [_to_note(r, _links(conn, r[0])) for r in conn.execute(sql, params).fetchall()]


def delete(conn: Connection, note_id: str, scope: Scope = WHOLE) -> bool:
    """Delete the note (in ``scope``) with every version and link (cascade); True if it
    existed."""
    mine, agent = _mine(scope)
    sql = f"DELETE FROM tm_notes WHERE id = %s AND {mine}"
    return conn.execute(sql, (note_id, *agent)).rowcount > 0


def link(conn: Connection, note_id: str, kind: str, target: str, at: int) -> bool:
    """Link the note to ``target``; False if it was linked already."""
    cur = conn.execute(
        "INSERT INTO tm_note_links (note_id, kind, target, made_at) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT DO NOTHING",
        (note_id, kind, target, at),
    )
    return cur.rowcount > 0


def unlink(conn: Connection, note_id: str, kind: str, target: str) -> bool:
    """Remove a link; True if there was one."""
    cur = conn.execute(
        "DELETE FROM tm_note_links WHERE note_id = %s AND kind = %s AND target = %s",
        (note_id, kind, target),
    )
    return cur.rowcount > 0


def linked_to(conn: Connection, kind: str, target: str, scope: Scope = WHOLE) -> list[str]:
    """Ids of the notes (in ``scope``) linked to ``target``, oldest link first."""
    mine, agent = _mine(scope)
    rows = conn.execute(
        f"SELECT note_id FROM tm_note_links WHERE kind = %s AND target = %s AND {_LIVE} "
        f'AND {mine} ORDER BY made_at, note_id COLLATE "C"',
        (kind, target, *agent),
    ).fetchall()
    return [r[0] for r in rows]


def search(
    conn: Connection, words: Sequence[str], limit: int, scope: Scope = WHOLE
) -> list[tuple[str, float]]:
    """``(note id, score)`` of the notes (in ``scope``) holding any of ``words``, best
    (lowest) first; the score is minus ``ts_rank``."""
    mine, agent = _mine(scope)
    query = tsquery_text(words)
    if not query:
        return []
    rows = conn.execute(
        "SELECT id, -ts_rank(kw, q) AS score FROM tm_notes, to_tsquery('tm_english', %s) q "
        f'WHERE kw @@ q AND {mine} ORDER BY score, id COLLATE "C" LIMIT %s',
        (query, *agent, limit),
    ).fetchall()
    return [(r[0], float(r[1])) for r in rows]


def count(conn: Connection, scope: Scope = WHOLE) -> int:
    """How many notes ``scope`` holds."""
    mine, agent = _mine(scope)
    row = conn.execute(f"SELECT count(*) FROM tm_notes WHERE {mine}", agent).fetchone()
    return int(row[0]) if row else 0


def memory_versions(conn: Connection, memory_id: str) -> list[MemoryVersion]:
    """A memory's contents, oldest first."""
    rows = conn.execute(
        "SELECT memory_id, version, content, author, at FROM tm_memory_versions "
        "WHERE memory_id = %s ORDER BY version",
        (memory_id,),
    ).fetchall()
    return [MemoryVersion(*r) for r in rows]


def add_memory_version(conn: Connection, version: MemoryVersion) -> None:
    """Keep one content of a memory."""
    conn.execute(
        "INSERT INTO tm_memory_versions (memory_id, version, content, author, at) "
        "VALUES (%s, %s, %s, %s, %s)",
        (version.memory_id, version.version, version.content, version.author, version.at),
    )


# --- export and import ------------------------------------------------------------------


def has_notes(conn: Connection) -> bool:
    """True if the database has the note tables (schema 9 on)."""
    row = conn.execute("SELECT to_regclass('tm_notes') IS NOT NULL").fetchone()
    return bool(row and row[0])


def table_rows(conn: Connection, table: str, scope: Scope = WHOLE) -> list[tuple[Any, ...]]:
    """Every row of one table (of ``scope``) the connection sees, in export order."""
    columns = ", ".join(NOTE_TABLE_COLUMNS[table])
    mine, agent = scope.condition("scope", "%s")
    return conn.execute(
        f"SELECT {columns} FROM {_TABLE[table]} WHERE {mine} ORDER BY {_ORDER[table]}", agent
    ).fetchall()


def insert_rows(conn: Connection, table: str, rows: Sequence[Sequence[Any]]) -> None:
    """Insert export rows; a note already there is replaced with the document's (its
    versions and links go with it)."""
    if not rows:
        return
    columns = NOTE_TABLE_COLUMNS[table]
    if table == "notes":
        conn.execute("DELETE FROM tm_notes WHERE id = ANY(%s)", ([r[0] for r in rows],))
    marks = ", ".join(["%s"] * len(columns))
    conflict = " ON CONFLICT DO NOTHING" if table != "notes" else ""
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {_TABLE[table]} ({', '.join(columns)}) VALUES ({marks}){conflict}",
            [tuple(r) for r in rows],
        )


def clear(conn: Connection) -> None:
    """Delete every note the connection sees (versions, links with them) and memory
    history."""
    conn.execute("DELETE FROM tm_notes")
    conn.execute("DELETE FROM tm_memory_versions")


def row_count(conn: Connection) -> int:
    """Rows the note tables hold that the connection sees (an export's share)."""
    if not has_notes(conn):
        return 0
    total = 0
    for table in _TABLE.values():
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        total += int(row[0]) if row else 0
    return total

"""SQL of notes (``tm_notes``, ``tm_note_versions``, ``tm_note_links``) and of memories'
content history (``tm_memory_versions``): the statements
:class:`~persistence.stores.notes.NoteStore` runs (see :mod:`persistence.statements`) and
the decoders of the rows they return.

A statement that reads or removes notes carries the handle's
:class:`~persistence.stores.scope.Scope` as ``scope = %s``; row-level security scopes
every statement to the connection's agent again (migration v9). A note's keywords are
``tm_notes.kw``, a generated column over title, content and tags.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from persistence.codecs import decode_json
from persistence.note_records import MemoryVersion, Note, NoteLink, NoteVersion
from persistence.postgres.sql.keyword_sql import tsquery_text
from persistence.statements import Batch, Row, Statement
from persistence.stores.rows import note_row, note_version_row
from persistence.stores.scope import WHOLE, Scope

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


def _mine(scope: Scope, table: str = "") -> tuple[str, tuple[str, ...]]:
    """The scope's condition on a row's ``scope`` column (``1 = 1`` unscoped)."""
    return scope.condition(f"{table}scope", "%s")


# --- decoders ---------------------------------------------------------------------------


def to_note(row: Row, links: Sequence[Row] = ()) -> Note:
    """The note a row of :func:`fetch` or :func:`recent` holds, with the rows of its
    :func:`links`."""
    held = tuple(NoteLink(kind, target) for kind, target in links)
    return Note(row[0], row[1], row[2], tuple(decode_json(row[3])), row[4], row[5], row[6],
                row[7], row[8], row[9], held)  # fmt: skip


def to_version(row: Row) -> NoteVersion:
    """The note version a row of :func:`versions` holds."""
    return NoteVersion(row[0], row[1], row[2], row[3], tuple(decode_json(row[4])), row[5],
                       row[6], tuple(decode_json(row[7])))  # fmt: skip


def to_memory_version(row: Row) -> MemoryVersion:
    """The memory version a row of :func:`memory_versions` holds."""
    return MemoryVersion(*row)


# --- notes ------------------------------------------------------------------------------


def links(note_id: str) -> Statement:
    """The note's live links (``kind, target``), oldest first."""
    return Statement(
        f"SELECT kind, target FROM tm_note_links WHERE note_id = %s AND {_LIVE} "
        'ORDER BY made_at, kind COLLATE "C", target COLLATE "C"',
        (note_id,),
    )


def fetch(note_id: str, scope: Scope = WHOLE) -> Statement:
    """The note with that id (in ``scope``)."""
    mine, agent = _mine(scope)
    return Statement(f"SELECT {_COLUMNS} FROM tm_notes WHERE id = %s AND {mine}", (note_id, *agent))


def save(note: Note, version: NoteVersion) -> list[Statement]:
    """Write ``note`` as it is now and its new ``version`` (its keywords follow: a
    generated column)."""
    return [
        Statement(
            f"INSERT INTO tm_notes ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (id) DO UPDATE SET title = excluded.title, content = excluded.content, "
            "tags = excluded.tags, version = excluded.version, updated_at = excluded.updated_at, "
            "updated_by = excluded.updated_by",
            note_row(note),
        ),
        Statement(
            f"INSERT INTO tm_note_versions ({_VERSION_COLUMNS}) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            note_version_row(version),
        ),
    ]


def versions(note_id: str, scope: Scope = WHOLE) -> Statement:
    """Every version of the note (in ``scope``), oldest first."""
    mine, agent = _mine(scope)
    return Statement(
        f"SELECT {_VERSION_COLUMNS} FROM tm_note_versions WHERE note_id = %s AND {mine} "
        "ORDER BY version",
        (note_id, *agent),
    )


def recent(tag: str | None, limit: int | None, scope: Scope = WHOLE) -> Statement:
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
    return Statement(sql, params)


def unindex(note_id: str, scope: Scope = WHOLE) -> list[Statement]:
    """Nothing before :func:`delete`: a note's keywords are a column of its row."""
    return []


def delete(note_id: str, scope: Scope = WHOLE) -> Statement:
    """Delete the note (in ``scope``) with every version and link (cascade); returns its
    id if it existed."""
    mine, agent = _mine(scope)
    return Statement(
        f"DELETE FROM tm_notes WHERE id = %s AND {mine} RETURNING id", (note_id, *agent)
    )


def link(note_id: str, kind: str, target: str, at: int) -> Statement:
    """Link the note to ``target``; returns a row unless it was linked already."""
    return Statement(
        "INSERT INTO tm_note_links (note_id, kind, target, made_at) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT DO NOTHING RETURNING note_id",
        (note_id, kind, target, at),
    )


def unlink(note_id: str, kind: str, target: str) -> Statement:
    """Remove a link: a row back for the link it removed (none if there was none)."""
    return Statement(
        "DELETE FROM tm_note_links WHERE note_id = %s AND kind = %s AND target = %s "
        "RETURNING note_id",
        (note_id, kind, target),
    )


def linked_to(kind: str, target: str, scope: Scope = WHOLE) -> Statement:
    """Ids of the notes (in ``scope``) linked to ``target``, oldest link first."""
    mine, agent = _mine(scope)
    return Statement(
        f"SELECT note_id FROM tm_note_links WHERE kind = %s AND target = %s AND {_LIVE} "
        f'AND {mine} ORDER BY made_at, note_id COLLATE "C"',
        (kind, target, *agent),
    )


def search(words: Sequence[str], limit: int, scope: Scope = WHOLE) -> Statement | None:
    """``(note id, score)`` of the notes (in ``scope``) holding any of ``words``, best
    (lowest) first; the score is minus ``ts_rank``. ``None`` if no word has a token
    (nothing to look for)."""
    mine, agent = _mine(scope)
    query = tsquery_text(words)
    if not query:
        return None
    return Statement(
        "SELECT id, -ts_rank(kw, q) AS score FROM tm_notes, to_tsquery('tm_english', %s) q "
        f'WHERE kw @@ q AND {mine} ORDER BY score, id COLLATE "C" LIMIT %s',
        (query, *agent, limit),
    )


def count(scope: Scope = WHOLE) -> Statement:
    """How many notes ``scope`` holds."""
    mine, agent = _mine(scope)
    return Statement(f"SELECT count(*) FROM tm_notes WHERE {mine}", agent)


def memory_versions(memory_id: str) -> Statement:
    """A memory's contents, oldest first."""
    return Statement(
        "SELECT memory_id, version, content, author, at FROM tm_memory_versions "
        "WHERE memory_id = %s ORDER BY version",
        (memory_id,),
    )


def add_memory_version(version: MemoryVersion) -> Statement:
    """Keep one content of a memory (a row of ``tm_memory_versions``)."""
    return Statement(
        "INSERT INTO tm_memory_versions (memory_id, version, content, author, at) "
        "VALUES (%s, %s, %s, %s, %s)",
        (version.memory_id, version.version, version.content, version.author, version.at),
    )


# --- export and import ------------------------------------------------------------------


def has_notes() -> Statement:
    """Whether the database has the note tables (schema 9 on): one true or false value."""
    return Statement("SELECT to_regclass('tm_notes') IS NOT NULL")


def table_rows(table: str, scope: Scope = WHOLE) -> Statement:
    """Every row of one table (of ``scope``) the connection sees, in export order."""
    columns = ", ".join(NOTE_TABLE_COLUMNS[table])
    mine, agent = scope.condition("scope", "%s")
    return Statement(
        f"SELECT {columns} FROM {_TABLE[table]} WHERE {mine} ORDER BY {_ORDER[table]}", agent
    )


def insert_rows(table: str, rows: Sequence[Sequence[Any]]) -> list[Batch]:
    """Insert export rows; a note already there is replaced with the document's (its
    versions and links go with it: one delete for all the ids comes first)."""
    if not rows:
        return []
    columns = NOTE_TABLE_COLUMNS[table]
    marks = ", ".join(["%s"] * len(columns))
    conflict = " ON CONFLICT DO NOTHING" if table != "notes" else ""
    insert = Batch(
        f"INSERT INTO {_TABLE[table]} ({', '.join(columns)}) VALUES ({marks}){conflict}",
        [tuple(r) for r in rows],
    )
    if table != "notes":
        return [insert]
    return [Batch("DELETE FROM tm_notes WHERE id = ANY(%s)", [([r[0] for r in rows],)]), insert]


def clear() -> list[Statement]:
    """Delete every note the connection sees (versions, links with them) and memory
    history."""
    return [Statement("DELETE FROM tm_notes"), Statement("DELETE FROM tm_memory_versions")]


def row_count() -> Statement:
    """Rows the note tables hold that the connection sees (an export's share; run only
    if :func:`has_notes`)."""
    return Statement("SELECT " + " + ".join(f"(SELECT count(*) FROM {t})" for t in _TABLE.values()))

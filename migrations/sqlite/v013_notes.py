"""Version 13: notes, their versions and links, and memories' content history.

- ``notes``: one row per note as it is now (tags a JSON list; ``agent_id``: the agent
  whose scoped handle wrote it, ``NULL`` for the whole store's).
- ``note_versions``: every write of a note (what it held after it, who, when, the fields
  it changed); deleted with the note (cascade), so deleting a note leaves no version.
- ``note_links``: a note's links to memories and entities (cascade with the note).
- ``notes_fts``: the notes' keyword index (title, content, tags), contentless, keyed by
  the note's rowid, with FTS5's ``secure-delete`` so a deleted note's words leave the
  index too.
- ``memory_versions``: the contents a memory had, oldest first, written when
  ``update()`` changes its content; removed with the memory (see the store's commit
  work).
"""

from __future__ import annotations

import apsw

VERSION = 13
DESCRIPTION = "notes with versions, links and a keyword index; memories' content history"

STATEMENTS = [
    """CREATE TABLE notes (
        id TEXT PRIMARY KEY,
        agent_id TEXT,
        title TEXT NOT NULL,
        content TEXT NOT NULL,
        tags TEXT NOT NULL DEFAULT '[]',
        version INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        created_by TEXT,
        updated_by TEXT
    )""",
    "CREATE INDEX idx_notes_updated ON notes(agent_id, updated_at)",
    """CREATE TABLE note_versions (
        note_id TEXT NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
        version INTEGER NOT NULL,
        title TEXT NOT NULL,
        content TEXT NOT NULL,
        tags TEXT NOT NULL,
        author TEXT,
        at INTEGER NOT NULL,
        changed TEXT NOT NULL,
        PRIMARY KEY (note_id, version)
    ) WITHOUT ROWID""",
    """CREATE TABLE note_links (
        note_id TEXT NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
        kind TEXT NOT NULL CHECK (kind IN ('memory', 'entity')),
        target TEXT NOT NULL,
        made_at INTEGER NOT NULL,
        PRIMARY KEY (note_id, kind, target)
    ) WITHOUT ROWID""",
    "CREATE INDEX idx_note_links_target ON note_links(kind, target)",
    "CREATE VIRTUAL TABLE notes_fts USING fts5(title, content, tags, content='', "
    "contentless_delete=1, tokenize='porter unicode61')",
    "INSERT INTO notes_fts(notes_fts, rank) VALUES ('secure-delete', 1)",
    """CREATE TABLE memory_versions (
        memory_id TEXT NOT NULL,
        version INTEGER NOT NULL,
        content TEXT NOT NULL,
        author TEXT,
        at INTEGER NOT NULL,
        PRIMARY KEY (memory_id, version)
    ) WITHOUT ROWID""",
]


def up(conn: apsw.Connection) -> None:
    """Create the tables."""
    for statement in STATEMENTS:
        conn.execute(statement)

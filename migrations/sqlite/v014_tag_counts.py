"""Version 14: memories per namespace tag (``tag_counts``), kept by triggers.

A namespace tag has the form ``family:ns:a.b`` (the LangGraph store tags each item with
one per prefix of its namespace). Listing the namespaces under a prefix read every item
carrying such a tag; ``tag_counts`` holds, per namespace tag, how many memories carry
it, so a listing reads one row per namespace instead. Triggers on ``memory_tags`` keep
it exact in the transaction of every write, deletion, forget, sweep and import (a tag
row is only ever inserted or deleted, never updated); a tag whose count falls to zero
loses its row. Existing files are filled from ``memory_tags`` here.
"""

from __future__ import annotations

import apsw

VERSION = 14
DESCRIPTION = "memories per namespace tag (tag_counts), kept by triggers on memory_tags"

COUNTED = "'*:ns:*'"
"""The GLOB that names the counted tags."""

STATEMENTS = [
    """CREATE TABLE tag_counts (
        tag TEXT PRIMARY KEY,
        memories INTEGER NOT NULL
    ) WITHOUT ROWID""",
    f"""INSERT INTO tag_counts (tag, memories)
        SELECT tag, count(*) FROM memory_tags WHERE tag GLOB {COUNTED} GROUP BY tag""",
    f"""CREATE TRIGGER memory_tags_count_insert AFTER INSERT ON memory_tags
        WHEN NEW.tag GLOB {COUNTED} BEGIN
        INSERT INTO tag_counts (tag, memories) VALUES (NEW.tag, 1)
            ON CONFLICT (tag) DO UPDATE SET memories = memories + 1;
    END""",
    f"""CREATE TRIGGER memory_tags_count_delete AFTER DELETE ON memory_tags
        WHEN OLD.tag GLOB {COUNTED} BEGIN
        UPDATE tag_counts SET memories = memories - 1 WHERE tag = OLD.tag;
        DELETE FROM tag_counts WHERE tag = OLD.tag AND memories <= 0;
    END""",
]


def up(conn: apsw.Connection) -> None:
    """Create the table, fill it, add the triggers."""
    for statement in STATEMENTS:
        conn.execute(statement)

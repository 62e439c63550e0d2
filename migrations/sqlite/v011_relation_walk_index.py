"""Version 11: the relation indexes a graph walk reads cover every column of a relation.

A walk asks each entity for its best supported relations valid at a time (of some
predicates), both ways (:func:`persistence.graph_sql.hop_sql`). The version-10 indexes
gave them in that order, but each row they named was then read from the table: a page
of its own for nearly every relation, since relations are stored in insertion order.
These indexes carry the row, so a hub's best fifty are a few adjacent index pages.
Same names, same leading columns and order, so every other use plans as before.
"""

from __future__ import annotations

import apsw

VERSION = 11
DESCRIPTION = "graph walk: covering relation indexes"

_REST = "id, predicate, valid_from, valid_to, direct, created_at"

INDEXES = [
    "DROP INDEX IF EXISTS idx_relations_subject",
    "DROP INDEX IF EXISTS idx_relations_object",
    f"""CREATE INDEX idx_relations_subject
        ON relations(subject_id, weight DESC, confidence DESC, {_REST}, object_id)""",
    f"""CREATE INDEX idx_relations_object
        ON relations(object_id, weight DESC, confidence DESC, {_REST}, subject_id)""",
]


def up(conn: apsw.Connection) -> None:
    """Rebuild the two walk indexes wider."""
    for statement in INDEXES:
        conn.execute(statement)

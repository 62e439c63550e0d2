"""SQL for conversation structure: who said a memory, whether it asks something, and
the memories just before and after it in its session (insertion order ``seq``, within
its tier, as the keyword window counts them; the ``tm_memories_window`` index)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from persistence.records import Turn


def _near(compare: str, order: str) -> str:
    return (
        f"(SELECT n.id FROM tm_memories n WHERE n.tier = t.tier "
        f"AND n.session_id = t.session_id AND n.scope = t.scope "
        f"AND n.seq {compare} t.seq ORDER BY n.seq {order} LIMIT 1)"
    )


_TURNS = {
    before: (
        "SELECT t.id, t.speaker, strpos(t.content, '?') > 0, "
        f"{_near('<', 'DESC') if before else 'NULL'}, {_near('>', 'ASC')} "
        "FROM tm_memories t WHERE t.id = ANY(%s)"
    )
    for before in (False, True)
}


def turns(
    conn: psycopg.Connection[Any], memory_ids: Sequence[str], before: bool = False
) -> dict[str, Turn]:
    """Memory id -> its :data:`Turn`, for those of ``memory_ids`` that exist (the id
    before each only with ``before``)."""
    if not memory_ids:
        return {}
    rows = conn.execute(_TURNS[before], (list(memory_ids),))
    return {r[0]: (r[1], bool(r[2]), r[3], r[4]) for r in rows}

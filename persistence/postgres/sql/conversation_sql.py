"""SQL for conversation structure: who said a memory, whether it asks something, and
the memories just before and after it in its session (insertion order ``seq``, within
its tier, as the keyword window counts them; the ``tm_memories_window`` index). Builds
the statement; the index store runs it."""

from __future__ import annotations

from collections.abc import Sequence

from persistence.statements import Statement


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


def turns(memory_ids: Sequence[str], before: bool = False) -> Statement:
    """The turns of those of ``memory_ids`` (not empty) that exist: rows of ``(id,
    speaker, asks, id before (only with ``before``), id after)``."""
    return Statement(_TURNS[before], (list(memory_ids),))

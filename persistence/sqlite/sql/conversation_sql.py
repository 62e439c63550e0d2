"""SQL for conversation structure: who said a memory, whether it asks something, and
the memories just before and after it in its session (rowid order, per tier, as the
keyword window counts them; indexed by each tier's ``session_id`` index). Builds the
statement; the index store runs it."""

from __future__ import annotations

from collections.abc import Sequence

from persistence.codecs import encode_json
from persistence.statements import Statement

TIERS = ("scratchpad", "episodic", "semantic")


def _turns_sql(tier: str, before: bool) -> str:
    def near(compare: str, order: str) -> str:
        return (
            f"(SELECT n.id FROM {tier} AS n WHERE n.session_id = t.session_id "
            f"AND n.rowid {compare} t.rowid ORDER BY n.rowid {order} LIMIT 1)"
        )

    return (
        f"SELECT t.id, t.speaker, instr(t.content, '?') > 0, "
        f"{near('<', 'DESC') if before else 'NULL'}, "
        f"{near('>', 'ASC')} FROM {tier} AS t WHERE t.id IN (SELECT value FROM json_each(?))"
    )


_TURNS = {b: " UNION ALL ".join(_turns_sql(tier, b) for tier in TIERS) for b in (False, True)}


def turns(memory_ids: Sequence[str], before: bool = False) -> Statement:
    """The turns of those of ``memory_ids`` (not empty) that exist: rows of ``(id,
    speaker, asks, id before (only with ``before``: a third cheaper without), id after)``."""
    ids = encode_json(list(memory_ids), "memory_ids")
    return Statement(_TURNS[before], (ids, ids, ids))

"""SQL for conversation structure: who said a memory, whether it asks something, and
the memories just before and after it in its session (rowid order, per tier, as the
keyword window counts them; indexed by each tier's ``session_id`` index)."""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from persistence.codecs import encode_json
from persistence.records import Turn
from persistence.sqlite.connection import query_all

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


def turns(
    conn: apsw.Connection, memory_ids: Sequence[str], before: bool = False
) -> dict[str, Turn]:
    """Memory id -> its :data:`Turn`, for those of ``memory_ids`` that exist (the id
    before each only with ``before``: a third cheaper without)."""
    if not memory_ids:
        return {}
    ids = encode_json(list(memory_ids), "memory_ids")
    rows = query_all(conn, _TURNS[before], (ids, ids, ids))
    return {r[0]: (r[1], bool(r[2]), r[3], r[4]) for r in rows}

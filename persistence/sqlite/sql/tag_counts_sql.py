"""SQL for the namespace tags' counts (``tag_counts``, schema version 14).

The table and the triggers that keep it live in ``migrations/v014_tag_counts``; here are
the reads: one range of the primary key for the whole store, and for an agent-scoped
view the same range of the tag index joined to the agent's memories.
"""

from __future__ import annotations

import apsw

from persistence.sqlite.connection import query_all
from persistence.sqlite.sql.memory_sql import TABLE
from persistence.tag_counts import COUNTED_GLOB, tag_range


def counts(conn: apsw.Connection, prefix: str) -> dict[str, int]:
    """Memories per namespace tag starting with ``prefix``."""
    where, params = _range("tag", prefix)
    rows = query_all(conn, f"SELECT tag, memories FROM tag_counts WHERE {where}", params)
    return {str(tag): int(n) for tag, n in rows}


def agent_counts(conn: apsw.Connection, prefix: str, agent_id: str) -> dict[str, int]:
    """:func:`counts` over the memories of agent ``agent_id`` only."""
    where, params = _range("g.tag", prefix)
    mine = " UNION ALL ".join(f"SELECT id FROM {t} WHERE agent_id = ?" for t in TABLE.values())
    rows = query_all(
        conn,
        f"SELECT g.tag, count(*) FROM memory_tags AS g WHERE {where} AND g.tag GLOB ? "
        f"AND g.memory_id IN ({mine}) GROUP BY g.tag",
        [*params, COUNTED_GLOB, *[agent_id] * len(TABLE)],
    )
    return {str(tag): int(n) for tag, n in rows}


def _range(column: str, prefix: str) -> tuple[str, list[str]]:
    low, high = tag_range(prefix)
    if high is None:
        return f"{column} >= ?", [low]
    return f"{column} >= ? AND {column} < ?", [low, high]

"""SQL for the namespace tags' counts (``tag_counts``, schema version 14).

The table and the triggers that keep it live in ``migrations/v014_tag_counts``; here are
the reads: one range of the primary key for the whole store, and for an agent-scoped
view the same range of the tag index joined to the agent's memories.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from persistence.sqlite.sql.memory_sql import TABLE
from persistence.statements import Statement
from persistence.tag_counts import COUNTED_GLOB, tag_range

_MINE = " UNION ALL ".join(f"SELECT id FROM {t} WHERE agent_id = ?" for t in TABLE.values())


def counts(prefix: str, agent_id: str | None = None) -> Statement:
    """Memories per namespace tag starting with ``prefix`` (of agent ``agent_id`` only,
    if given): rows :func:`to_counts` decodes."""
    if agent_id is None:
        where, params = _range("tag", prefix)
        return Statement(f"SELECT tag, memories FROM tag_counts WHERE {where}", params)
    where, params = _range("g.tag", prefix)
    return Statement(
        f"SELECT g.tag, count(*) FROM memory_tags AS g WHERE {where} AND g.tag GLOB ? "
        f"AND g.memory_id IN ({_MINE}) GROUP BY g.tag",
        [*params, COUNTED_GLOB, *[agent_id] * len(TABLE)],
    )


def to_counts(rows: Sequence[Sequence[Any]]) -> dict[str, int]:
    """Tag -> memories of :func:`counts`'s rows."""
    return {str(tag): int(n) for tag, n in rows}


def _range(column: str, prefix: str) -> tuple[str, list[str]]:
    low, high = tag_range(prefix)
    if high is None:
        return f"{column} >= ?", [low]
    return f"{column} >= ? AND {column} < ?", [low, high]

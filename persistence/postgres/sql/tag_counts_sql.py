"""SQL for the namespace tags' counts (``tm_tag_counts``, schema version 10).

The table and the trigger that keeps it live in ``migrations/postgres/v010_tag_counts``;
here is the read: a range of its tag index (byte order), summed over the scopes the
connection sees (row-level security: a scoped handle sees its own agent's rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from persistence.statements import Statement
from persistence.tag_counts import tag_range

_BOUNDED = "SELECT tag, sum(memories) FROM tm_tag_counts WHERE tag >= %s AND tag < %s GROUP BY tag"
_OPEN = "SELECT tag, sum(memories) FROM tm_tag_counts WHERE tag >= %s GROUP BY tag"


_AGENT = (
    "SELECT tag, count(*) FROM tm_memories AS t, unnest(t.tags) AS tag "
    "WHERE t.agent_id = %s AND strpos(tag, ':ns:') > 0 AND tag COLLATE \"C\" >= %s"
)
"""One agent's counts, from its memories' tags (the namespace tags the totals count)."""


def counts(prefix: str, agent_id: str | None = None) -> Statement:
    """Memories per namespace tag starting with ``prefix`` (of agent ``agent_id`` only, if
    given: counted from the memories' tags, not the running totals): rows
    :func:`to_counts` decodes."""
    low, high = tag_range(prefix)
    if agent_id is not None:
        sql, params = _AGENT, [agent_id, low]
        if high is not None:
            sql, params = sql + ' AND tag COLLATE "C" < %s', [*params, high]
        return Statement(sql + " GROUP BY tag", params)
    return Statement(_OPEN, (low,)) if high is None else Statement(_BOUNDED, (low, high))


def to_counts(rows: Sequence[Sequence[Any]]) -> dict[str, int]:
    """Tag -> memories of :func:`counts`'s rows (a tag no memory carries left out)."""
    return {str(tag): int(n) for tag, n in rows if n > 0}

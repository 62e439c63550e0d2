"""SQL for the namespace tags' counts (``tm_tag_counts``, schema version 10).

The table and the trigger that keeps it live in ``migrations/postgres/v010_tag_counts``;
here is the read: a range of its tag index (byte order), summed over the scopes the
connection sees (row-level security: a scoped handle sees its own agent's rows).
"""

from __future__ import annotations

from typing import Any

import psycopg

from persistence.tag_counts import tag_range

_BOUNDED = "SELECT tag, sum(memories) FROM tm_tag_counts WHERE tag >= %s AND tag < %s GROUP BY tag"
_OPEN = "SELECT tag, sum(memories) FROM tm_tag_counts WHERE tag >= %s GROUP BY tag"


def counts(conn: psycopg.Connection[Any], prefix: str) -> dict[str, int]:
    """Memories per namespace tag starting with ``prefix``."""
    low, high = tag_range(prefix)
    rows = conn.execute(_OPEN, (low,)) if high is None else conn.execute(_BOUNDED, (low, high))
    return {str(tag): int(n) for tag, n in rows.fetchall() if n > 0}

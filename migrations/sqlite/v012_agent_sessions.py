"""Version 12: sessions and forgetting-log rows name their agent.

An agent-scoped handle on a file (``open(file, agent_id="a")``) reads and writes only
agent ``a``'s sessions, their transcripts (which follow their session) and the audit
rows of ``a``'s forgotten memories. ``sessions.agent_id`` is the agent whose scoped
handle started the session (``NULL``: started by an unscoped handle, store-wide, seen
only by unscoped handles); ``forgetting_log.agent_id`` is the forgotten memory's agent,
filled for rows written from now on. Rows already in the file stay ``NULL``: store-wide,
for the operator.
"""

from __future__ import annotations

import apsw

VERSION = 12
DESCRIPTION = "agent-scoped handles: sessions and forgetting-log rows name their agent"

STATEMENTS = [
    "ALTER TABLE sessions ADD COLUMN agent_id TEXT",
    "CREATE INDEX idx_sessions_agent ON sessions(agent_id, last_active_at)",
    "ALTER TABLE forgetting_log ADD COLUMN agent_id TEXT",
    "CREATE INDEX idx_forgetting_agent ON forgetting_log(agent_id, id)",
]


def up(conn: apsw.Connection) -> None:
    """Add the two columns and their indexes."""
    for statement in STATEMENTS:
        conn.execute(statement)

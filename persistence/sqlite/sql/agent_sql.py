"""SQL for an agent-scoped export of a file: which memories and audit rows are an agent's."""

from __future__ import annotations

import apsw

from persistence.records import Tier
from persistence.sqlite.connection import query_all
from persistence.sqlite.sql.memory_sql import TABLE


def memory_ids(conn: apsw.Connection, agent_id: str) -> set[str]:
    """Ids of the agent's live memories, every tier."""
    union = " UNION ALL ".join(f"SELECT id FROM {TABLE[t]} WHERE agent_id = ?" for t in Tier)
    return {r[0] for r in query_all(conn, union, tuple(agent_id for _ in Tier))}


def forgotten_ids(conn: apsw.Connection, agent_id: str) -> set[str]:
    """Ids of the agent's forgotten memories (audit rows naming the agent)."""
    rows = query_all(conn, "SELECT memory_id FROM forgetting_log WHERE agent_id = ?", (agent_id,))
    return {r[0] for r in rows}

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


def _mine(agent_id: str) -> tuple[str, tuple[str, ...]]:
    """A subquery of the agent's live memory ids, and its parameters."""
    union = " UNION ALL ".join(f"SELECT id FROM {TABLE[t]} WHERE agent_id = ?" for t in Tier)
    return union, tuple(agent_id for _ in Tier)


def graph_view(conn: apsw.Connection, agent_id: str) -> tuple[set[str], set[str]]:
    """``(entity ids, relation ids)`` the agent's memories assert: relations with its
    provenance, and entities it names or those relations join."""
    mine, params = _mine(agent_id)
    relations = {
        r[0]
        for r in query_all(
            conn, f"SELECT relation_id FROM memory_relations WHERE memory_id IN ({mine})", params
        )
    }
    entities = {
        r[0]
        for r in query_all(
            conn, f"SELECT entity_id FROM memory_entities WHERE memory_id IN ({mine})", params
        )
    }
    ends = query_all(
        conn,
        "SELECT subject_id, object_id FROM relations WHERE id IN "
        f"(SELECT relation_id FROM memory_relations WHERE memory_id IN ({mine}))",
        params,
    )
    for subject, obj in ends:
        entities.update((subject, obj))
    return entities, relations


def provenance_count(conn: apsw.Connection, agent_id: str) -> int:
    """How many provenance rows the agent's memories have."""
    mine, params = _mine(agent_id)
    rows = query_all(
        conn,
        f"SELECT (SELECT count(*) FROM memory_entities WHERE memory_id IN ({mine})) + "
        f"(SELECT count(*) FROM memory_relations WHERE memory_id IN ({mine}))",
        params + params,
    )
    return int(rows[0][0])


def counts(conn: apsw.Connection, agent_id: str) -> dict[str, int]:
    """The agent's share of :data:`persistence.sqlite.sql.stats_sql.COUNTS` and its
    memories per tier (``PersistenceStatistics`` field -> count)."""
    mine, params = _mine(agent_id)
    owned_sessions = "SELECT session_id FROM sessions WHERE agent_id = ?"
    statements: dict[str, tuple[str, tuple[str, ...]]] = {
        f"{t.value}_count": (f"SELECT count(*) FROM {TABLE[t]} WHERE agent_id = ?", (agent_id,))
        for t in Tier
    }
    statements |= {
        "session_count": ("SELECT count(*) FROM sessions WHERE agent_id = ?", (agent_id,)),
        "active_session_count": (
            "SELECT count(*) FROM sessions WHERE agent_id = ? AND is_active = 1",
            (agent_id,),
        ),
        "transcript_count": (
            f"SELECT count(*) FROM session_transcripts WHERE session_id IN ({owned_sessions})",
            (agent_id,),
        ),
        "schedule_count": (
            f"SELECT count(*) FROM repetition_schedules WHERE memory_id IN ({mine})",
            params,
        ),
        "promotion_count": (
            f"SELECT count(*) FROM promotion_log WHERE memory_id IN ({mine}) OR memory_id IN "
            "(SELECT memory_id FROM forgetting_log WHERE agent_id = ?)",
            (*params, agent_id),
        ),
        "forgotten_count": ("SELECT count(*) FROM forgetting_log WHERE agent_id = ?", (agent_id,)),
        "unembedded_count": (
            " + ".join(
                f"(SELECT count(*) FROM {TABLE[t]} WHERE agent_id = ? AND embedding IS NULL)"
                for t in Tier
            ).join(("SELECT ", "")),
            tuple(agent_id for _ in Tier),
        ),
    }
    return {name: int(query_all(conn, sql, p)[0][0]) for name, (sql, p) in statements.items()}

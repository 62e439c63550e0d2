"""SQL for an agent-scoped graph view of a file: which graph rows are an agent's (the
scope's subquery is :func:`memory_sql.scoped_ids`)."""

from __future__ import annotations

import apsw

from persistence.sqlite.connection import query_all
from persistence.sqlite.sql.memory_sql import scoped_ids
from persistence.stores.scope import Scope


def _mine(agent_id: str) -> tuple[str, tuple[str, ...]]:
    """A subquery of the agent's live memory ids, and its parameters."""
    return scoped_ids(Scope(agent_id))


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

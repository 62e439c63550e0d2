"""SQL for ``check_integrity`` on PostgreSQL: the library's invariants.

The server guarantees what its constraints declare (primary and foreign keys, one tier
per memory, the tier names); these checks cover what the library keeps by its own
code and triggers. Each returns human-readable problem descriptions (an empty list
means it passed), at most :data:`LIMIT` per check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

from migrations.postgres import LATEST_VERSION, read_schema_version
from persistence.meta_keys import EMBEDDING_DIM_KEY
from persistence.postgres import vector_column
from persistence.postgres.sql import meta_sql
from persistence.statements import value

Connection = psycopg.Connection[Any]
LIMIT = 50


def _rows(conn: Connection, query: str, params: Any = ()) -> list[tuple[Any, ...]]:
    return list(conn.execute(f"{query} LIMIT {LIMIT}", params).fetchall())


def schema(conn: Connection) -> list[str]:
    """The schema is this code's, and the change-tracking row of the scope exists."""
    problems = []
    version = read_schema_version(conn)
    if version != LATEST_VERSION:
        problems.append(f"the schema is at version {version}, this code's is {LATEST_VERSION}")
    row = conn.execute("SELECT 1 FROM tm_version WHERE scope = tm_scope()").fetchone()
    if row is None:
        problems.append("the change-tracking row (tm_version) of this scope is missing")
    return problems


def _orphans(table: str) -> Callable[[Connection], list[str]]:
    def check(conn: Connection) -> list[str]:
        rows = _rows(
            conn,
            f"SELECT DISTINCT x.memory_id FROM {table} AS x WHERE NOT EXISTS "
            "(SELECT 1 FROM tm_memories AS t WHERE t.id = x.memory_id)",
        )
        return [f"{table} names memory {r[0]}, which does not exist" for r in rows]

    check.__doc__ = f"Every {table} row points at a live memory."
    return check


def promotion_log_points_at_memories(conn: Connection) -> list[str]:
    """Every promotion-log row names a memory that exists or was forgotten."""
    rows = _rows(
        conn,
        "SELECT DISTINCT p.memory_id FROM tm_promotion_log AS p WHERE NOT EXISTS "
        "(SELECT 1 FROM tm_memories AS t WHERE t.id = p.memory_id) AND NOT EXISTS "
        "(SELECT 1 FROM tm_forgetting_log AS f WHERE f.memory_id = p.memory_id)",
    )
    return [
        f"promotion_log names memory {r[0]}, which neither exists nor was forgotten" for r in rows
    ]


def promotion_log_agrees(conn: Connection) -> list[str]:
    """A live memory sits in the tier its last promotion moved it to (promotions logged
    before it was last forgotten belong to an earlier memory of the same id)."""
    rows = _rows(
        conn,
        "SELECT p.memory_id, p.to_tier, t.tier FROM tm_promotion_log AS p "
        "JOIN tm_memories AS t ON t.id = p.memory_id "
        "WHERE p.id = (SELECT max(id) FROM tm_promotion_log WHERE memory_id = p.memory_id) "
        "AND p.to_tier <> t.tier AND NOT EXISTS (SELECT 1 FROM tm_forgetting_log AS f "
        "WHERE f.memory_id = p.memory_id AND f.forgotten_at >= p.promoted_at)",
    )
    return [f"memory {i} was last promoted to {to} but is in {tier}" for i, to, tier in rows]


def embedding_sizes(conn: Connection) -> list[str]:
    """Every vector has the store's fixed dimension, and the vector column is typed
    with it (the HNSW index needs it)."""
    dim = value(conn, meta_sql.read(EMBEDDING_DIM_KEY))
    if dim is None:
        rows = _rows(conn, "SELECT memory_id FROM tm_vectors")
        return [f"memory {r[0]} has a vector but the store has no dimension" for r in rows]
    rows = _rows(
        conn,
        "SELECT memory_id, vector_dims(embedding) FROM tm_vectors "
        "WHERE vector_dims(embedding) <> %s",
        (int(dim),),
    )
    problems = [f"memory {i} has a {n}-dim embedding, not {dim}" for i, n in rows]
    typed = vector_column.column_dimension(conn)
    if typed is not None and typed != int(dim):
        problems.append(f"the vector column holds {typed}-dim vectors, the store {dim}")
    return problems


def keyword_index_matches(conn: Connection) -> list[str]:
    """Every memory has its keyword row, at its own place (tier, session, order), and
    the keyword statistics count what the rows hold; no index work is left over."""
    rows = _rows(
        conn,
        "SELECT t.id, t.tier, k.tier FROM tm_memories AS t "
        "LEFT JOIN tm_keywords AS k ON k.memory_id = t.id WHERE k.memory_id IS NULL "
        "OR k.tier <> t.tier OR k.seq <> t.seq OR k.session_id IS DISTINCT FROM t.session_id",
    )
    problems = [
        f"memory {i} ({tier}) has no keyword row" if indexed is None
        else f"memory {i} ({tier}) is indexed as {indexed}"
        for i, tier, indexed in rows
    ]  # fmt: skip
    stats = _rows(
        conn,
        "SELECT k.scope, k.n, k.tokens, s.n, s.tokens FROM (SELECT scope, count(*) AS n, "
        "coalesce(sum(kw_len), 0) AS tokens FROM tm_keywords GROUP BY scope) AS k "
        "FULL JOIN tm_kw_stats AS s ON s.scope = k.scope "
        "WHERE coalesce(k.n, 0) <> coalesce(s.n, 0) OR coalesce(k.tokens, 0) <> "
        "coalesce(s.tokens, 0)",
    )
    problems += [
        f"keyword statistics of scope {scope!r} say {sn} rows / {st} words, the rows "
        f"hold {n} / {tokens}"
        for scope, n, tokens, sn, st in stats
    ]
    left = conn.execute("SELECT (SELECT count(*) FROM tm_kw_dirty)").fetchone()
    if left and left[0]:
        problems.append(f"{left[0]} keyword-window changes were never worked off")
    return problems


def graph_invariants(conn: Connection, *, committed: bool = True) -> list[str]:
    """Provenance points at live memories, no derived entity or relation is left
    unsupported, every entity has an alias; with ``committed``, no deleted memory waits
    for collection (inside a transaction that happens at COMMIT)."""
    problems = [
        f"{what} provenance points at missing memory {memory_id}"
        for what, memory_id in _rows(
            conn,
            "SELECT 'entity', m.memory_id FROM tm_memory_entities AS m WHERE NOT EXISTS "
            "(SELECT 1 FROM tm_memories AS t WHERE t.id = m.memory_id) UNION ALL "
            "SELECT 'relation', m.memory_id FROM tm_memory_relations AS m WHERE NOT EXISTS "
            "(SELECT 1 FROM tm_memories AS t WHERE t.id = m.memory_id)",
        )
        if committed or not _dirty(conn, memory_id)
    ]
    problems += [
        f"derived relation {r[0]} is supported by no memory"
        for r in _rows(
            conn,
            "SELECT id FROM tm_relations AS r WHERE NOT direct AND NOT EXISTS "
            "(SELECT 1 FROM tm_memory_relations AS m WHERE m.relation_id = r.id)",
        )
    ]
    problems += [
        f"derived entity {r[0]} is supported by no memory or relation"
        for r in _rows(
            conn,
            "SELECT id FROM tm_entities AS e WHERE NOT direct AND NOT EXISTS "
            "(SELECT 1 FROM tm_memory_entities AS m WHERE m.entity_id = e.id "
            "AND m.scope = e.scope) AND NOT EXISTS (SELECT 1 FROM tm_relations AS r "
            "WHERE (r.subject_id = e.id OR r.object_id = e.id) AND r.scope = e.scope)",
        )
    ]
    problems += [
        f"entity {r[0]} has no alias"
        for r in _rows(
            conn,
            "SELECT id FROM tm_entities AS e WHERE NOT EXISTS (SELECT 1 FROM "
            "tm_entity_aliases AS a WHERE a.entity_id = e.id AND a.scope = e.scope)",
        )
    ]
    problems += [
        f"graph_queue names memory {r[0]}, which does not exist"
        for r in _rows(
            conn,
            "SELECT q.memory_id FROM tm_graph_queue AS q WHERE NOT EXISTS "
            "(SELECT 1 FROM tm_memories AS t WHERE t.id = q.memory_id)",
        )
        if committed or not _dirty(conn, r[0])
    ]
    if committed:
        row = conn.execute("SELECT count(*) FROM tm_graph_dirty").fetchone()
        if row and row[0]:
            problems.append(f"{row[0]} deleted memories still wait for graph collection")
    return problems


def _dirty(conn: Connection, memory_id: str) -> bool:
    """True if ``memory_id`` was deleted in the open transaction (collected at COMMIT)."""
    row = conn.execute("SELECT 1 FROM tm_graph_dirty WHERE memory_id = %s", (memory_id,))
    return row.fetchone() is not None


def _in_transaction(conn: Connection) -> list[str]:
    return graph_invariants(conn, committed=False)


CHECKS: dict[str, Callable[[Connection], list[str]]] = {
    "schema": schema,
    "schedules_point_at_memories": _orphans("tm_schedules"),
    "content_keys_point_at_memories": _orphans("tm_content_keys"),
    "promotion_log_points_at_memories": promotion_log_points_at_memories,
    "promotion_log_agrees_with_tiers": promotion_log_agrees,
    "embedding_sizes": embedding_sizes,
    "keyword_index_matches": keyword_index_matches,
    "graph_invariants": graph_invariants,
}
"""Check name -> the check (run outside a write transaction)."""

IMPORT_CHECKS: dict[str, Callable[[Connection], list[str]]] = {
    "schedules_point_at_memories": _orphans("tm_schedules"),
    "promotion_log_points_at_memories": promotion_log_points_at_memories,
    "promotion_log_agrees_with_tiers": promotion_log_agrees,
    "embedding_sizes": embedding_sizes,
    "graph_invariants": _in_transaction,
}
"""The checks an import runs inside its transaction, before it commits (the keyword
window and the graph's collection are done at COMMIT by deferred triggers)."""

"""SQL for ``check_integrity``: SQLite's own checks and the library's invariants.

Each check returns human-readable problem descriptions (an empty list means it passed).
"""

from __future__ import annotations

from collections.abc import Callable

import apsw

from persistence.sqlite import graph_steps
from persistence.sqlite.connection import query_all, read_snapshot
from persistence.sqlite.sql import meta_sql
from persistence.sqlite.sql.meta_sql import EMBEDDING_DIM_KEY
from persistence.statements import value

_ALL_IDS = (
    "SELECT id, 'scratchpad' AS tier FROM scratchpad UNION ALL "
    "SELECT id, 'episodic' FROM episodic UNION ALL SELECT id, 'semantic' FROM semantic"
)


def reload_fts_structures(conn: apsw.Connection) -> None:
    """Make every FTS5 table of ``conn`` reload its index structure from the file.

    FTS5 caches a table's structure per connection, and its integrity check (run by
    ``PRAGMA integrity_check``) reads that cache without looking for commits made since by
    other connections: on a long-lived connection it reports damage that is not there.
    Any query reading the index reloads the cache when the file has changed.
    """
    tables = query_all(
        conn,
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'"
        " AND lower(sql) LIKE '%using fts5%'",
    )
    for (name,) in tables:
        quoted = '"' + name.replace('"', '""') + '"'
        query_all(conn, f"SELECT rowid FROM {quoted} WHERE {quoted} MATCH ? LIMIT 1", ("reload",))


def sqlite_integrity(conn: apsw.Connection) -> list[str]:
    """``PRAGMA integrity_check``: pages, b-trees and indexes (a raise counts as damage).

    FTS5 structures are reloaded first, in the same read snapshot as the check.
    """
    try:
        with read_snapshot(conn):
            reload_fts_structures(conn)
            rows = [r[0] for r in query_all(conn, "PRAGMA integrity_check")]
    except (apsw.CorruptError, apsw.NotADBError) as exc:
        return [f"SQLite reports the file is damaged: {exc}"]
    return [] if rows == ["ok"] else rows


def foreign_keys(conn: apsw.Connection) -> list[str]:
    """``PRAGMA foreign_key_check``: transcripts whose session is gone."""
    return [
        f"{table} row {rowid} points at a missing {parent} row"
        for table, rowid, parent, _ in query_all(conn, "PRAGMA foreign_key_check")
    ]


def one_tier_each(conn: apsw.Connection) -> list[str]:
    """Each memory id lives in exactly one tier."""
    rows = query_all(
        conn,
        f"SELECT id, group_concat(tier, ', ') FROM ({_ALL_IDS}) GROUP BY id HAVING count(*) > 1",
    )
    return [f"memory {memory_id} is in several tiers: {tiers}" for memory_id, tiers in rows]


def _orphans(table: str) -> Callable[[apsw.Connection], list[str]]:
    def check(conn: apsw.Connection) -> list[str]:
        rows = query_all(
            conn,
            f"SELECT DISTINCT memory_id FROM {table} "
            f"WHERE memory_id NOT IN (SELECT id FROM ({_ALL_IDS}))",
        )
        return [f"{table} names memory {r[0]}, which does not exist" for r in rows]

    check.__doc__ = f"Every {table} row points at a real memory."
    return check


def promotion_log_points_at_memories(conn: apsw.Connection) -> list[str]:
    """Every promotion-log row names a memory that exists, or one that was forgotten
    (forgetting keeps the audit: the forgetting log says where the memory went)."""
    rows = query_all(
        conn,
        "SELECT DISTINCT memory_id FROM promotion_log "
        f"WHERE memory_id NOT IN (SELECT id FROM ({_ALL_IDS})) "
        "AND memory_id NOT IN (SELECT memory_id FROM forgetting_log)",
    )
    return [
        f"promotion_log names memory {r[0]}, which neither exists nor was forgotten" for r in rows
    ]


def promotion_log_agrees(conn: apsw.Connection) -> list[str]:
    """A live memory sits in the tier its last promotion moved it to (promotions logged
    before it was last forgotten belong to an earlier memory of the same id)."""
    rows = query_all(
        conn,
        "SELECT p.memory_id, p.to_tier, m.tier FROM promotion_log AS p "
        f"JOIN ({_ALL_IDS}) AS m ON m.id = p.memory_id "
        "WHERE p.id = (SELECT max(id) FROM promotion_log WHERE memory_id = p.memory_id) "
        "AND p.to_tier <> m.tier AND NOT EXISTS (SELECT 1 FROM forgetting_log AS f "
        "WHERE f.memory_id = p.memory_id AND f.forgotten_at >= p.promoted_at)",
    )
    return [f"memory {i} was last promoted to {to} but is in {tier}" for i, to, tier in rows]


def embedding_sizes(conn: apsw.Connection) -> list[str]:
    """Every embedding has the dimension the file records."""
    dim = value(conn, meta_sql.read(EMBEDDING_DIM_KEY))
    if dim is None:
        return []
    problems = []
    for table in ("scratchpad", "episodic", "semantic"):
        rows = query_all(
            conn,
            f"SELECT id, length(embedding) / 4 FROM {table} "
            "WHERE embedding IS NOT NULL AND length(embedding) <> ?",
            (int(dim) * 4,),
        )
        problems += [f"{table} memory {i} has a {n}-dim embedding, not {dim}" for i, n in rows]
    return problems


def keyword_index_matches(conn: apsw.Connection) -> list[str]:
    """Every memory has one keyword-index row in its own tier, and no index row is stray."""
    rows = query_all(
        conn,
        f"SELECT m.id, m.tier, i.tier FROM ({_ALL_IDS}) AS m "
        "LEFT JOIN memory_index AS i ON i.memory_id = m.id "
        "WHERE i.tier IS NULL OR i.tier <> m.tier",
    )
    problems = [f"memory {i} ({tier}) is indexed as {indexed}" for i, tier, indexed in rows]
    stray = query_all(
        conn,
        f"SELECT memory_id FROM memory_index WHERE memory_id NOT IN (SELECT id FROM ({_ALL_IDS}))",
    )
    problems += [f"memory_index names memory {r[0]}, which does not exist" for r in stray]
    indexed = query_all(conn, "SELECT count(*) FROM memory_index")[0][0]
    in_fts = query_all(conn, "SELECT count(*) FROM memory_fts_docsize")[0][0]
    if indexed != in_fts:
        problems.append(f"memory_fts holds {in_fts} documents for {indexed} indexed memories")
    return problems


CHECKS: dict[str, Callable[[apsw.Connection], list[str]]] = {
    "integrity_check": sqlite_integrity,
    "foreign_key_check": foreign_keys,
    "one_tier_per_memory": one_tier_each,
    "schedules_point_at_memories": _orphans("repetition_schedules"),
    "tags_point_at_memories": _orphans("memory_tags"),
    "promotion_log_points_at_memories": promotion_log_points_at_memories,
    "promotion_log_agrees_with_tiers": promotion_log_agrees,
    "embedding_sizes": embedding_sizes,
    "keyword_index_matches": keyword_index_matches,
    "graph_invariants": graph_steps.check,
}

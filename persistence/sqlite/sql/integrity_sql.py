"""SQL for ``check_integrity`` on a file: SQLite's own checks and the library's invariants.

Built and decoded here (:class:`~persistence.stores.integrity.IntegritySql` and SQLite's
own checks); run by :mod:`persistence.sqlite.integrity`. A :data:`Query` is a statement
whose every row is a problem, with the words of that problem.
"""

from __future__ import annotations

from collections.abc import Sequence

from persistence.sqlite.sql import meta_sql
from persistence.sqlite.sql.meta_sql import EMBEDDING_DIM_KEY
from persistence.statements import Row, Statement
from persistence.stores.integrity import Query

_ALL_IDS = (
    "SELECT id, 'scratchpad' AS tier FROM scratchpad UNION ALL "
    "SELECT id, 'episodic' FROM episodic UNION ALL SELECT id, 'semantic' FROM semantic"
)

FTS_TABLES = Statement(
    "SELECT name FROM sqlite_schema WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'"
    " AND lower(sql) LIKE '%using fts5%'"
)
"""The names of the file's FTS5 tables."""


def fts_reload(name: str) -> Statement:
    """A query reading the FTS5 table ``name``'s index (which reloads its cached
    structure when the file changed)."""
    quoted = '"' + name.replace('"', '""') + '"'
    return Statement(f"SELECT rowid FROM {quoted} WHERE {quoted} MATCH ? LIMIT 1", ("reload",))


INTEGRITY_CHECK = Statement("PRAGMA integrity_check")
"""Pages, b-trees and indexes: one row ``ok``, or a row per problem."""


def integrity_problems(found: Sequence[Row]) -> list[str]:
    """The problems :data:`INTEGRITY_CHECK`'s rows say."""
    texts = [r[0] for r in found]
    return [] if texts == ["ok"] else texts


def damaged(exc: BaseException) -> str:
    """The problem of a check SQLite stopped on a damaged page."""
    return f"SQLite reports the file is damaged: {exc}"


FOREIGN_KEYS: Query = (
    Statement("PRAGMA foreign_key_check"),
    lambda r: f"{r[0]} row {r[1]} points at a missing {r[2]} row",
)
"""Transcripts whose session is gone."""

ONE_TIER_EACH: Query = (
    Statement(
        f"SELECT id, group_concat(tier, ', ') FROM ({_ALL_IDS}) GROUP BY id HAVING count(*) > 1"
    ),
    lambda r: f"memory {r[0]} is in several tiers: {r[1]}",
)
"""Each memory id lives in exactly one tier."""


def orphans(table: str) -> Query:
    """Every ``table`` row points at a real memory."""
    return (
        Statement(
            f"SELECT DISTINCT memory_id FROM {table} "
            f"WHERE memory_id NOT IN (SELECT id FROM ({_ALL_IDS}))"
        ),
        lambda r: f"{table} names memory {r[0]}, which does not exist",
    )


def promotion_log_points_at_memories() -> Query:
    """Every promotion-log row names a memory that exists, or one that was forgotten
    (forgetting keeps the audit: the forgetting log says where the memory went)."""
    return (
        Statement(
            "SELECT DISTINCT memory_id FROM promotion_log "
            f"WHERE memory_id NOT IN (SELECT id FROM ({_ALL_IDS})) "
            "AND memory_id NOT IN (SELECT memory_id FROM forgetting_log)"
        ),
        lambda r: f"promotion_log names memory {r[0]}, which neither exists nor was forgotten",
    )


def promotion_log_agrees() -> Query:
    """A live memory sits in the tier its last promotion moved it to (promotions logged
    before it was last forgotten belong to an earlier memory of the same id)."""
    return (
        Statement(
            "SELECT p.memory_id, p.to_tier, m.tier FROM promotion_log AS p "
            f"JOIN ({_ALL_IDS}) AS m ON m.id = p.memory_id "
            "WHERE p.id = (SELECT max(id) FROM promotion_log WHERE memory_id = p.memory_id) "
            "AND p.to_tier <> m.tier AND NOT EXISTS (SELECT 1 FROM forgetting_log AS f "
            "WHERE f.memory_id = p.memory_id AND f.forgotten_at >= p.promoted_at)"
        ),
        lambda r: f"memory {r[0]} was last promoted to {r[1]} but is in {r[2]}",
    )


def dimension() -> Statement:
    """The file's embedding dimension (one value, or none)."""
    return meta_sql.read(EMBEDDING_DIM_KEY)


def embedding_sizes(dim: int | None) -> list[Query]:
    """Every embedding has the dimension ``dim`` the file records (nothing to check
    before it records one)."""
    if dim is None:
        return []
    return [_sizes(table, dim) for table in ("scratchpad", "episodic", "semantic")]


def _sizes(table: str, dim: int) -> Query:
    return (
        Statement(
            f"SELECT id, length(embedding) / 4 FROM {table} "
            "WHERE embedding IS NOT NULL AND length(embedding) <> ?",
            (dim * 4,),
        ),
        lambda r: f"{table} memory {r[0]} has a {r[1]}-dim embedding, not {dim}",
    )


KEYWORD_INDEX: tuple[Query, ...] = (
    (
        Statement(
            f"SELECT m.id, m.tier, i.tier FROM ({_ALL_IDS}) AS m "
            "LEFT JOIN memory_index AS i ON i.memory_id = m.id "
            "WHERE i.tier IS NULL OR i.tier <> m.tier"
        ),
        lambda r: f"memory {r[0]} ({r[1]}) is indexed as {r[2]}",
    ),
    (
        Statement(
            "SELECT memory_id FROM memory_index "
            f"WHERE memory_id NOT IN (SELECT id FROM ({_ALL_IDS}))"
        ),
        lambda r: f"memory_index names memory {r[0]}, which does not exist",
    ),
    (
        Statement(
            "SELECT indexed, in_fts FROM (SELECT (SELECT count(*) FROM memory_index) AS "
            "indexed, (SELECT count(*) FROM memory_fts_docsize) AS in_fts) "
            "WHERE indexed <> in_fts"
        ),
        lambda r: f"memory_fts holds {r[1]} documents for {r[0]} indexed memories",
    ),
)
"""Every memory has one keyword-index row in its own tier, no index row is stray, and
FTS5 holds one document per index row."""

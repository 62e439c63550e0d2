"""SQL for ``check_integrity`` on PostgreSQL: the library's invariants.

The server guarantees what its constraints declare (primary and foreign keys, one tier
per memory, the tier names); these checks cover what the library keeps by its own
code and triggers. Each :data:`Query` is a statement whose every row is a problem (at
most :data:`LIMIT` per statement), with the words of that problem. Built and decoded
here (:class:`~persistence.stores.integrity.IntegritySql` and PostgreSQL's own checks);
run by :mod:`persistence.postgres.integrity`.
"""

from __future__ import annotations

from migrations.postgres import LATEST_VERSION
from persistence.meta_keys import EMBEDDING_DIM_KEY
from persistence.postgres.sql import meta_sql
from persistence.statements import Statement
from persistence.stores.integrity import Query

LIMIT = 50


def _limited(query: str, params: tuple[object, ...] = ()) -> Statement:
    return Statement(f"{query} LIMIT {LIMIT}", params)


def schema_problems(version: int) -> list[str]:
    """The schema is this code's (``version``: the one the store records)."""
    if version != LATEST_VERSION:
        return [f"the schema is at version {version}, this code's is {LATEST_VERSION}"]
    return []


SCOPE_VERSION: Query = (
    Statement("SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM tm_version WHERE scope = tm_scope())"),
    lambda r: "the change-tracking row (tm_version) of this scope is missing",
)
"""The change-tracking row of the scope exists."""


def orphans(table: str) -> Query:
    """Every ``table`` row points at a live memory."""
    return (
        _limited(
            f"SELECT DISTINCT x.memory_id FROM {table} AS x WHERE NOT EXISTS "
            "(SELECT 1 FROM tm_memories AS t WHERE t.id = x.memory_id)"
        ),
        lambda r: f"{table} names memory {r[0]}, which does not exist",
    )


def promotion_log_points_at_memories() -> Query:
    """Every promotion-log row names a memory that exists or was forgotten."""
    return (
        _limited(
            "SELECT DISTINCT p.memory_id FROM tm_promotion_log AS p WHERE NOT EXISTS "
            "(SELECT 1 FROM tm_memories AS t WHERE t.id = p.memory_id) AND NOT EXISTS "
            "(SELECT 1 FROM tm_forgetting_log AS f WHERE f.memory_id = p.memory_id)"
        ),
        lambda r: f"promotion_log names memory {r[0]}, which neither exists nor was forgotten",
    )


def promotion_log_agrees() -> Query:
    """Each live memory is in the tier its last promotion named (a promotion logged
    before the id was last forgotten was of an earlier memory)."""
    return (
        _limited(
            "SELECT p.memory_id, p.to_tier, t.tier FROM tm_promotion_log AS p "
            "JOIN tm_memories AS t ON t.id = p.memory_id "
            "WHERE p.id = (SELECT max(id) FROM tm_promotion_log WHERE memory_id = p.memory_id) "
            "AND p.to_tier <> t.tier AND NOT EXISTS (SELECT 1 FROM tm_forgetting_log AS f "
            "WHERE f.memory_id = p.memory_id AND f.forgotten_at >= p.promoted_at)"
        ),
        lambda r: f"memory {r[0]} was last promoted to {r[1]} but is in {r[2]}",
    )


def dimension() -> Statement:
    """The store's embedding dimension (one value, or none)."""
    return meta_sql.read(EMBEDDING_DIM_KEY)


def embedding_sizes(dim: int | None) -> list[Query]:
    """Every vector has the store's fixed dimension ``dim`` (``None``: no vector may
    exist yet)."""
    if dim is None:
        return [
            (
                _limited("SELECT memory_id FROM tm_vectors"),
                lambda r: f"memory {r[0]} has a vector but the store has no dimension",
            )
        ]
    return [
        (
            _limited(
                "SELECT memory_id, vector_dims(embedding) FROM tm_vectors "
                "WHERE vector_dims(embedding) <> %s",
                (dim,),
            ),
            lambda r: f"memory {r[0]} has a {r[1]}-dim embedding, not {dim}",
        )
    ]


def column_problems(typed: int | None, dim: int) -> list[str]:
    """The vector column is typed with the store's dimension (the HNSW index needs it;
    ``typed``: its type's, ``None`` while untyped)."""
    if typed is not None and typed != dim:
        return [f"the vector column holds {typed}-dim vectors, the store {dim}"]
    return []


_LINKS = (
    "SELECT seq, id, tier, scope, "
    "CASE WHEN session_id IS NOT NULL THEN lag(seq, 1) OVER w END AS b1, "
    "CASE WHEN session_id IS NOT NULL THEN lag(seq, 2) OVER w END AS b2, "
    "CASE WHEN session_id IS NOT NULL THEN lead(seq, 1) OVER w END AS a1, "
    "CASE WHEN session_id IS NOT NULL THEN lead(seq, 2) OVER w END AS a2 "
    "FROM tm_memories WINDOW w AS (PARTITION BY scope, tier, session_id ORDER BY seq)"
)
"""Each memory's neighbours in its session and tier, as its document row should say."""

KEYWORD_INDEX: tuple[Query, ...] = (
    (
        _limited(
            f"SELECT t.id, t.tier, d.seq IS NULL, t.seq FROM ({_LINKS}) AS t "
            "FULL JOIN tm_kw_docs AS d ON d.seq = t.seq WHERE d.seq IS NULL OR t.seq IS NULL "
            "OR (d.scope, d.b1, d.b2, d.a1, d.a2) "
            "IS DISTINCT FROM (t.scope, t.b1, t.b2, t.a1, t.a2)"
        ),
        lambda r: (
            f"memory {r[0]} ({r[1]}) has no keyword row"
            if r[2]
            else f"keyword row {r[3]} has no memory"
            if r[0] is None
            else f"memory {r[0]} ({r[1]}) has the wrong keyword window"
        ),  # fmt: skip
    ),
    (
        _limited(
            "SELECT d.seq, d.wlen FROM tm_kw_docs AS d WHERE d.wlen <> d.len + coalesce("
            "(SELECT sum(o.len) FROM tm_kw_docs AS o WHERE o.seq IN (d.b1, d.b2, d.a1, d.a2)), 0)"
        ),
        lambda r: f"keyword row {r[0]} says its window holds {r[1]} words, its parts do not",
    ),
    (
        _limited(
            "SELECT coalesce(d.seq, p.seq), d.len, p.len FROM tm_kw_docs AS d FULL JOIN "
            "(SELECT seq, sum(tf) AS len FROM tm_kw_postings GROUP BY seq) AS p "
            "ON p.seq = d.seq WHERE coalesce(p.len, 0) <> coalesce(d.len, -1)"
        ),
        lambda r: f"keyword row {r[0]} counts {r[1]} own words, its postings {r[2]}",
    ),
    (
        _limited(
            "SELECT k.scope, k.n, k.tokens, s.n, s.tokens FROM (SELECT scope, count(*) AS n, "
            "coalesce(sum(wlen), 0) AS tokens FROM tm_kw_docs GROUP BY scope) AS k "
            "FULL JOIN tm_kw_stats AS s ON s.scope = k.scope "
            "WHERE coalesce(k.n, 0) <> coalesce(s.n, 0) OR coalesce(k.tokens, 0) <> "
            "coalesce(s.tokens, 0)"
        ),
        lambda r: (
            f"keyword statistics of scope {r[0]!r} say {r[3]} rows / {r[4]} words, the rows "
            f"hold {r[1]} / {r[2]}"
        ),
    ),
)
"""Every memory has its keyword row (``tm_kw_docs``), at its own place (scope, the two
memories before and after it in its session and tier), its window's length is its
parts', its postings count its own words, and the keyword statistics count what the
rows hold."""


def _live(memory_id: str, committed: bool) -> str:
    """Unless ``committed``: SQL that leaves out a memory ``memory_id`` (an SQL
    expression) deleted in the open transaction (its graph rows are collected at COMMIT)."""
    if committed:
        return ""
    return f" AND NOT EXISTS (SELECT 1 FROM tm_graph_dirty AS d WHERE d.memory_id = {memory_id})"


def graph_invariants(committed: bool) -> tuple[Query, ...]:
    """Provenance points at live memories, no derived entity or relation is left
    unsupported, every entity has an alias; with ``committed``, no deleted memory waits
    for collection (inside a transaction that happens at COMMIT, and the rows of
    memories deleted in it are not yet collected either)."""
    queries: tuple[Query, ...] = (
        (
            _limited(
                "SELECT 'entity', m.memory_id FROM tm_memory_entities AS m WHERE NOT EXISTS "
                "(SELECT 1 FROM tm_memories AS t WHERE t.id = m.memory_id)"
                f"{_live('m.memory_id', committed)} UNION ALL "
                "SELECT 'relation', m.memory_id FROM tm_memory_relations AS m WHERE NOT EXISTS "
                "(SELECT 1 FROM tm_memories AS t WHERE t.id = m.memory_id)"
                f"{_live('m.memory_id', committed)}"
            ),
            lambda r: f"{r[0]} provenance points at missing memory {r[1]}",
        ),
        (
            _limited(
                "SELECT id FROM tm_relations AS r WHERE NOT direct AND NOT EXISTS "
                "(SELECT 1 FROM tm_memory_relations AS m WHERE m.relation_id = r.id)"
            ),
            lambda r: f"derived relation {r[0]} is supported by no memory",
        ),
        (
            _limited(
                "SELECT id FROM tm_entities AS e WHERE NOT direct AND NOT EXISTS "
                "(SELECT 1 FROM tm_memory_entities AS m WHERE m.entity_id = e.id "
                "AND m.scope = e.scope) AND NOT EXISTS (SELECT 1 FROM tm_relations AS r "
                "WHERE (r.subject_id = e.id OR r.object_id = e.id) AND r.scope = e.scope)"
            ),
            lambda r: f"derived entity {r[0]} is supported by no memory or relation",
        ),
        (
            _limited(
                "SELECT id FROM tm_entities AS e WHERE NOT EXISTS (SELECT 1 FROM "
                "tm_entity_aliases AS a WHERE a.entity_id = e.id AND a.scope = e.scope)"
            ),
            lambda r: f"entity {r[0]} has no alias",
        ),
        (
            _limited(
                "SELECT q.memory_id FROM tm_graph_queue AS q WHERE NOT EXISTS "
                "(SELECT 1 FROM tm_memories AS t WHERE t.id = q.memory_id)"
                f"{_live('q.memory_id', committed)}"
            ),
            lambda r: f"graph_queue names memory {r[0]}, which does not exist",
        ),
    )
    if not committed:
        return queries
    return (
        *queries,
        (
            Statement("SELECT count(*) FROM tm_graph_dirty HAVING count(*) > 0"),
            lambda r: f"{r[0]} deleted memories still wait for graph collection",
        ),
    )

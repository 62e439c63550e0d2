"""SQL for the recall indexes: keyword search (FTS5), exact re-ranking and the
embeddings still to compute; built here, run by the store and the engine's keyword and
vector modules (:mod:`persistence.sqlite.keyword_search`,
:mod:`persistence.sqlite.keyword_upkeep`, :mod:`persistence.sqlite.vector_reads`).

Vector searches choose candidates from the in-RAM copy
(:mod:`persistence.sqlite.vector_mirror`, its codes kept in ``vector_codes``) and
re-rank them by exact cosine over the tier tables' float vectors. (Files before
schema 16 also kept a sqlite-vec table that no query read; migration v016 drops it.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import orjson

from persistence.records import MemoryFilter, Tier
from persistence.sqlite.sql import keyword_window_sql
from persistence.sqlite.sql.memory_sql import TABLE, accepts, filter_conditions, scoped_ids
from persistence.statements import Batch, Row, Statement
from persistence.stores.rows import index_backed as index_backed  # shared; the store asks here
from persistence.stores.scope import WHOLE, Scope

# --- keeping the keyword index -----------------------------------------------------------

KEYWORD_DIRTY_TABLE = Statement(
    "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'keyword_dirty'"
)
"""A row if the file's triggers leave keyword re-indexing to commit (schema 8 on)."""
KEYWORD_BEHIND = Statement("SELECT 1 FROM keyword_dirty LIMIT 1")
"""A row if some memory waits for re-indexing (only a writer that bypassed the store
can commit that)."""
HAS_KEYWORD_INDEX = Statement("SELECT 1 FROM sqlite_schema WHERE name = 'memory_fts'")


def fill_keyword_index(defers: bool) -> list[Statement]:
    """Rebuild ``memory_index`` and ``memory_fts`` (content and the window around it) from
    the tier tables, from scratch (``defers``: the file has ``keyword_dirty``, emptied
    too). The index triggers must be off meanwhile."""
    statements = [
        Statement("INSERT INTO memory_fts (memory_fts) VALUES ('delete-all')"),
        Statement("DELETE FROM memory_index"),
    ]
    if defers:
        statements.append(Statement("DELETE FROM keyword_dirty"))
    for tier in Tier:
        table = TABLE[tier]
        statements += [
            Statement(
                f"INSERT INTO memory_index (memory_id, tier) SELECT id, ? FROM {table} "
                "ORDER BY rowid",
                (tier.value,),
            ),
            keyword_window_sql.fill_keyword_window(table),
        ]
    return statements


DIRTY_COUNTS_SQL = "SELECT tier, count(*), count(session_id) FROM keyword_dirty GROUP BY tier"
DIRTY_COUNTS = Statement(DIRTY_COUNTS_SQL)
"""Rows waiting to be re-indexed per tier, and how many of them are in a session."""
PENDING_WORK = Statement(
    f"{DIRTY_COUNTS_SQL} UNION ALL SELECT NULL, 1, 0 WHERE EXISTS (SELECT 1 FROM graph_dirty)"
)
"""Keyword work per tier, then a row of ``NULL`` if graph garbage waits (see
:meth:`~persistence.sqlite.keyword_index.KeywordIndex.before_commit`)."""
AUTOMERGE = Statement("SELECT v FROM memory_fts_config WHERE k = 'automerge'")


def set_automerge(value: int) -> Statement:
    """FTS5's ``automerge`` setting (0: off)."""
    return Statement("INSERT INTO memory_fts (memory_fts, rank) VALUES ('automerge', ?)", (value,))


def merge_step(pages: int) -> Statement:
    """One FTS5 ``merge`` command of ``pages`` pages."""
    return Statement("INSERT INTO memory_fts (memory_fts, rank) VALUES ('merge', ?)", (pages,))


TIER_TRIGGERS = Statement(
    "SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' AND tbl_name IN "
    f"({', '.join('?' for _ in Tier)})",
    [TABLE[tier] for tier in Tier],
)
"""``(name, sql)`` of every trigger on the tier tables (the index triggers): a bulk write
drops them, then creates them again from their SQL."""


def drop_trigger(name: str) -> Statement:
    """Drop the trigger ``name`` (one :data:`TIER_TRIGGERS` named)."""
    return Statement(f'DROP TRIGGER "{name}"')


LOG_EVERY_EMBEDDING = tuple(
    Statement(
        f"INSERT INTO vector_changes (memory_id) SELECT id FROM {TABLE[tier]} "
        "WHERE embedding IS NOT NULL"
    )
    for tier in Tier
)
"""Log every embedded memory as changed (after a bulk write that bypassed the triggers)."""


# --- keyword search ----------------------------------------------------------------------


def narrow_rowids(where: MemoryFilter, tier: Tier, limit: int) -> Statement:
    """Up to ``limit`` keyword-index rowids of the memories of ``tier`` ``where`` accepts."""
    conds, params = filter_conditions(where)
    return Statement(
        f"SELECT i.rowid FROM {TABLE[tier]} AS t JOIN memory_index AS i "
        f"ON i.memory_id = t.id WHERE {' AND '.join(conds)} LIMIT ?",
        [*params, limit],
    )


def quoted(word: str) -> str:
    """``word`` as an FTS5 string (a ``"`` in it doubled)."""
    return '"' + word.replace('"', '""') + '"'


def fts5_match(words: Sequence[str]) -> str:
    """The FTS5 MATCH expression for ``words``: each a double-quoted string (a ``"`` in
    a word doubled), joined with ``OR`` -- ``["dark", "mode"]`` is ``"dark" OR "mode"``.
    A quoted string is never FTS5 syntax, so no word can be read as an operator."""
    return " OR ".join(quoted(word) for word in words)


def matches(match: str, cap: int) -> Statement:
    """How many rows ``match`` matches, counted up to ``cap + 1`` (walks no more)."""
    sql = "SELECT count(*) FROM (SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? LIMIT ?)"
    return Statement(sql, (match, cap + 1))


def newest_floor(match: str, count: int) -> Statement:
    """The keyword rowid of the ``count``-th newest row ``match`` matches (``NULL`` if
    fewer): rows at or above it are the newest ``count`` (a walk, nothing scored)."""
    sql = (
        "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?"
    )
    return Statement(sql, (match, count - 1))


MAX_KEYWORD_ROWID = Statement("SELECT coalesce(max(rowid), 0) FROM memory_index")
"""The highest keyword rowid (one b-tree seek): no file holds more memories."""


def search(
    match: str,
    limit: int,
    where: MemoryFilter,
    context_weight: float,
    after_weight: float,
    rowids: list[int] | None,
    depth: int | None = None,
    newest_from: int | None = None,
) -> Statement:
    """``(memory_id, bm25)`` of the best ``limit`` rows ``where`` accepts that match one
    FTS5 expression (``rowids``: the few rows a narrow filter accepts, see
    :func:`persistence.sqlite.keyword_search.keyword_search`). ``depth``, for current
    memories alone: the best of the ``depth`` best matching rows only, chosen inside
    FTS5 before the id look-up and the checks (fewer than ``limit`` may come back).
    ``newest_from``: only the rows at or above that keyword rowid (FTS5 bounds its walk)."""
    score = "bm25(memory_fts, 1.0, ?, ?)"
    matched = "memory_fts MATCH ?" + ("" if newest_from is None else " AND memory_fts.rowid >= ?")
    mp = [match] if newest_from is None else [match, newest_from]
    if where == MemoryFilter():
        sql = (
            f"SELECT i.memory_id, f.score FROM (SELECT rowid, {score} AS score "
            f"FROM memory_fts WHERE {matched} ORDER BY score, rowid LIMIT ?) AS f "
            "JOIN memory_index AS i ON i.rowid = f.rowid ORDER BY f.score, f.rowid"
        )
        return Statement(sql, [context_weight, after_weight, *mp, limit])
    if not where.narrows:
        sql = (
            f"SELECT i.memory_id, {score} AS score FROM memory_fts "
            "JOIN memory_index AS i ON i.rowid = memory_fts.rowid "
            f"WHERE {matched} AND i.tier = ? ORDER BY score, memory_fts.rowid LIMIT ?"
        )
        assert where.tier is not None
        return Statement(sql, [context_weight, after_weight, *mp, where.tier.value, limit])
    if rowids is not None:
        # One FTS5 walk bounded by the rows' range, the rows picked outside it (``+``):
        # ``rowid IN (...)`` handed to FTS5 runs one query per row, and bm25 weighs each
        # query word by reading all its rows in every one of them (a session of 50 at 1M
        # memories, common words: 2-9 s; this way ~0.1 s, the same rows and scores).
        sql = (
            f"SELECT i.memory_id, {score} AS score FROM memory_fts "
            "JOIN memory_index AS i ON i.rowid = memory_fts.rowid "
            "WHERE memory_fts MATCH ? AND memory_fts.rowid BETWEEN ? AND ? "
            "AND +memory_fts.rowid IN (SELECT value FROM json_each(?)) "
            "ORDER BY score, memory_fts.rowid LIMIT ?"
        )
        ids = orjson.dumps(rowids).decode()
        span = [min(rowids), max(rowids)] if rowids else [0, -1]
        return Statement(sql, [context_weight, after_weight, match, *span, ids, limit])
    if current_only(where) and depth is not None:
        tier = "" if where.tier is None else "i.tier = ? AND "
        sql = (
            f"SELECT i.memory_id, f.score FROM (SELECT rowid, {score} AS score "
            f"FROM memory_fts WHERE {matched} ORDER BY score, rowid LIMIT ?) AS f "
            f"JOIN memory_index AS i ON i.rowid = f.rowid WHERE {tier}"
            f"{not_superseded('i.memory_id')} ORDER BY f.score, f.rowid LIMIT ?"
        )
        tiers = [] if where.tier is None else [where.tier.value]
        return Statement(sql, [context_weight, after_weight, *mp, depth, *tiers, limit])
    if current_only(where):  # probes of the small partial indexes, no row read
        tier = "" if where.tier is None else " AND i.tier = ?"
        sql = (
            f"SELECT i.memory_id, {score} AS score FROM memory_fts "
            "JOIN memory_index AS i ON i.rowid = memory_fts.rowid "
            f"WHERE {matched}{tier} AND {not_superseded('i.memory_id')} "
            "ORDER BY score, memory_fts.rowid LIMIT ?"
        )
        tiers = [] if where.tier is None else [where.tier.value]
        return Statement(sql, [context_weight, after_weight, *mp, *tiers, limit])
    accepted, accepted_params = accepts(where, "i.memory_id", "i.tier")
    sql = (
        f"SELECT i.memory_id, {score} AS score FROM memory_fts "
        "JOIN memory_index AS i ON i.rowid = memory_fts.rowid "
        f"WHERE {matched} AND {accepted} ORDER BY score, memory_fts.rowid LIMIT ?"
    )
    return Statement(sql, [context_weight, after_weight, *mp, *accepted_params, limit])


WINDOW_COLUMNS = ("content", "context", "after")
"""``memory_fts``'s columns: a memory's own words, the two memories before it, the two
after it (migration v007)."""

_PARTS_OF = (
    "SELECT i.memory_id FROM memory_fts JOIN memory_index AS i ON i.rowid = memory_fts.rowid "
    "WHERE memory_fts MATCH ? AND memory_fts.rowid IN "
    "(SELECT rowid FROM memory_index WHERE memory_id IN (SELECT value FROM json_each(?)))"
)


def keyword_parts(match: str, memory_ids: Sequence[str], scope: Scope = WHOLE) -> list[Statement]:
    """The ids of ``memory_ids`` whose keyword row matches ``match`` (an FTS5 expression,
    :func:`fts5_match`) in each column of :data:`WINDOW_COLUMNS`, one statement per
    column; memories of ``scope`` only."""
    ids = orjson.dumps(list(dict.fromkeys(memory_ids))).decode()
    sql = _PARTS_OF
    mine: tuple[str, ...] = ()
    if scope.scoped:
        held, mine = scoped_ids(scope)
        sql = f"{_PARTS_OF} AND i.memory_id IN ({held})"
    return [Statement(sql, [f"{{{column}}} : ({match})", ids, *mine]) for column in WINDOW_COLUMNS]


# --- vectors -----------------------------------------------------------------------------


def accepted_ids(where: MemoryFilter, tier: Tier, limit: int) -> Statement:
    """The ids of up to ``limit`` memories of ``tier`` that ``where`` accepts and that
    have an embedding (no vector read). Tags alone are walked from the first tag's rows
    (``id IN (SELECT ...)`` would list every row of the tag first: 100k at 1M memories,
    87 ms for a check capped at 4,097) and only the id index is probed: memories without
    an embedding are counted too (a re-rank drops them)."""
    if where.tags and replace(where, tags=()) == MemoryFilter(tier=where.tier):
        conds, params = filter_conditions(where, probe_tags=True)
        return Statement(
            f"SELECT t.id FROM memory_tags AS g CROSS JOIN {TABLE[tier]} AS t "
            f"ON t.id = g.memory_id WHERE g.tag = ? AND {' AND '.join(conds)} LIMIT ?",
            [where.tags[0], *params, limit],
        )
    conds, params = filter_conditions(where)
    clause = " AND ".join([*conds, "t.embedding IS NOT NULL"])
    return Statement(
        f"SELECT t.id FROM {TABLE[tier]} AS t WHERE {clause} LIMIT ?", [*params, limit]
    )


def accepted_among(where: MemoryFilter, tier: Tier, memory_ids: Sequence[str]) -> Statement:
    """The ids of ``memory_ids`` (of ``tier``) that ``where`` accepts."""
    conds, params = filter_conditions(where, probe_tags=True)
    clause = " AND ".join(["t.id IN (SELECT value FROM json_each(?))", *conds])
    sql = f"SELECT t.id FROM {TABLE[tier]} AS t WHERE {clause}"
    return Statement(sql, [orjson.dumps(list(memory_ids)).decode(), *params])


def current_only(where: MemoryFilter) -> bool:
    """True if ``where`` asks for current memories and nothing else (a tier aside)."""
    return where.current and replace(where, tier=None, current=False) == MemoryFilter()


def not_superseded(memory_id: str) -> str:
    """A condition that holds unless the memory whose id is the SQL expression
    ``memory_id`` is superseded: a probe of each tier's partial index (v018)."""
    return " AND ".join(
        f"NOT EXISTS (SELECT 1 FROM {table} INDEXED BY idx_{table}_superseded "
        f"WHERE superseded_by IS NOT NULL AND id = {memory_id})"
        for table in TABLE.values()
    )


def superseded_among(tier: Tier, memory_ids: Sequence[str]) -> Statement:
    """The ids of ``memory_ids`` (of ``tier``) that are superseded: probes of the partial
    index ``idx_<tier>_superseded`` (v018), no row read."""
    sql = (
        f"SELECT id FROM {TABLE[tier]} INDEXED BY idx_{TABLE[tier]}_superseded "
        "WHERE superseded_by IS NOT NULL AND id IN (SELECT value FROM json_each(?))"
    )
    return Statement(sql, [orjson.dumps(list(memory_ids)).decode()])


def embeddings_of(memory_ids: Sequence[str], tier: Tier) -> Statement:
    """``(id, embedding)`` of each of ``memory_ids`` in ``tier`` that has one."""
    marks = ", ".join("?" for _ in memory_ids)
    sql = f"SELECT id, embedding FROM {TABLE[tier]} WHERE id IN ({marks}) AND embedding IS NOT NULL"
    return Statement(sql, memory_ids)


def cosine_distances_of(memory_ids: Sequence[str], tier: Tier, query: bytes) -> Statement:
    """``(id, cosine distance to query)`` of each of ``memory_ids`` in ``tier`` whose
    embedding has the query's size, by sqlite-vec's ``vec_distance_cosine`` (the
    extension must be loaded on the connection). A zero vector on either side is at
    distance 1, as numpy's re-rank has it (the function answers NULL there)."""
    marks = ", ".join("?" for _ in memory_ids)
    sql = (
        f"SELECT id, coalesce(vec_distance_cosine(embedding, ?1), 1.0) FROM {TABLE[tier]} "
        f"WHERE id IN ({marks}) AND length(embedding) = length(?1)"
    )
    return Statement(sql, [query, *memory_ids])


CHANGE_HEAD = Statement("SELECT seq, memory_id FROM vector_changes ORDER BY seq DESC LIMIT 1")
"""The newest ``vector_changes`` row: decoded by :func:`to_change_head`."""
CHANGE_FLOOR = Statement("SELECT min(seq) FROM vector_changes")
"""The oldest ``seq`` still in ``vector_changes`` (``NULL`` when it is empty)."""


def to_change_head(row: Row | None) -> tuple[int, str | None]:
    """``(seq, memory_id)`` of :data:`CHANGE_HEAD`'s row, ``(0, None)`` if none."""
    return (0, None) if row is None else (int(row[0]), str(row[1]))


def change_at(seq: int) -> Statement:
    """The memory id logged at ``seq`` (no row once that row is trimmed, or never was)."""
    return Statement("SELECT memory_id FROM vector_changes WHERE seq = ?", (seq,))


def changed_since(seq: int) -> Statement:
    """Ids of memories whose embedding changed after ``seq``."""
    return Statement("SELECT DISTINCT memory_id FROM vector_changes WHERE seq > ?", (seq,))


def embedded_rows(tier: Tier) -> Statement:
    """``(id, float32 blob)`` of every memory of ``tier`` that has an embedding."""
    return Statement(f"SELECT id, embedding FROM {TABLE[tier]} WHERE embedding IS NOT NULL")


def memory_count(at_most: int | None = None) -> Statement:
    """How many memories the file holds (all tiers, embedded or not), from the small
    keyword id table rather than a scan of the tier tables; with ``at_most``, counted
    no further than that."""
    if at_most is None:
        return Statement("SELECT count(*) FROM memory_index")
    return Statement("SELECT count(*) FROM (SELECT 1 FROM memory_index LIMIT ?)", (at_most,))


# --- the embedding queue -----------------------------------------------------------------

_UNEMBEDDED = " UNION ALL ".join(
    f"SELECT id, '{tier.value}', content FROM {TABLE[tier]} WHERE embedding IS NULL"
    for tier in Tier
)
_UNEMBEDDED_COUNT = "SELECT " + " + ".join(
    f"(SELECT count(*) FROM {TABLE[tier]} WHERE embedding IS NULL)" for tier in Tier
)


def unembedded(limit: int) -> Statement:
    """Up to ``limit`` memories without an embedding: ``(id, tier, content)``, tier by
    tier (each in the order of its partial ``idx_*_unembedded`` index)."""
    return Statement(f"{_UNEMBEDDED} LIMIT ?", (limit,))


def unembedded_count() -> Statement:
    """How many memories have no embedding (the partial ``idx_*_unembedded`` indexes)."""
    return Statement(_UNEMBEDDED_COUNT)


def set_embeddings(rows: Sequence[tuple[Tier, str, np.ndarray, str | None]]) -> list[Batch]:
    """Store computed embeddings ``(tier, id, vector, content)`` as float32 BLOBs: only
    where none was set meanwhile and, when ``content`` is given, the memory still has
    that content. One batch per run of rows of one tier, in the order given."""
    runs: list[tuple[Tier, list[tuple[bytes, str, str | None, str | None]]]] = []
    for tier, memory_id, vector, content in rows:
        if not runs or runs[-1][0] is not tier:
            runs.append((tier, []))
        runs[-1][1].append((blob_of(vector), memory_id, content, content))
    return [
        Batch(
            f"UPDATE {TABLE[tier]} SET embedding = ? WHERE id = ? AND embedding IS NULL "
            "AND (? IS NULL OR content = ?)",
            found,
        )
        for tier, found in runs
    ]


def blob_of(vector: np.ndarray) -> bytes:
    """The float32 little-endian BLOB the file stores for ``vector``."""
    return np.asarray(vector, dtype="<f4").tobytes()

"""SQL for the recall indexes: keyword search (FTS5), exact re-ranking and the
embeddings still to compute.

Vector searches choose candidates from the in-RAM copy
(:mod:`persistence.sqlite.vector_mirror`, its codes kept in ``vector_codes``) and
re-rank them here by exact cosine over the tier tables' float vectors. (Files before
schema 16 also kept a sqlite-vec table that no query read; migration v016 drops it.)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import combinations
from typing import Any

import apsw
import numpy as np
import orjson

from persistence.records import KeywordHits, KeywordParts, MemoryFilter, Tier
from persistence.sqlite.connection import query_all, query_one, query_value
from persistence.sqlite.sql import keyword_window_sql, meta_sql
from persistence.sqlite.sql.memory_sql import TABLE, accepts, filter_conditions, scoped_ids
from persistence.sqlite.sql.meta_sql import (
    EMBEDDING_ERRORS_KEY,
    EMBEDDING_MODEL_KEY,
    LAST_EMBEDDING_ERROR_KEY,
)
from persistence.statements import run, value
from persistence.stores.rows import index_backed as index_backed  # shared; the store asks here
from persistence.stores.scope import WHOLE, Scope


def fill_keyword_index(conn: apsw.Connection) -> None:
    """Rebuild ``memory_index`` and ``memory_fts`` (content and the window around it) from
    the tier tables, from scratch. The index triggers must be off meanwhile."""
    conn.execute("INSERT INTO memory_fts (memory_fts) VALUES ('delete-all')")
    conn.execute("DELETE FROM memory_index")
    if defers_keyword_index(conn):
        conn.execute("DELETE FROM keyword_dirty")
    for tier in Tier:
        table = TABLE[tier]
        conn.execute(
            f"INSERT INTO memory_index (memory_id, tier) SELECT id, ? FROM {table} ORDER BY rowid",
            (tier.value,),
        )
        keyword_window_sql.fill_keyword_window(conn, table)


BATCH_ROWS = 256
"""A transaction that leaves this many memories to re-index is a batch: its keyword rows
are written with FTS5's automerge off (see :func:`update_keyword_index`)."""

_AUTOMERGE = "SELECT v FROM memory_fts_config WHERE k = 'automerge'"
DIRTY_COUNTS = "SELECT tier, count(*), count(session_id) FROM keyword_dirty GROUP BY tier"
"""Rows waiting to be re-indexed per tier, and how many of them are in a session (what
:func:`update_keyword_index` takes)."""
_SET_AUTOMERGE = "INSERT INTO memory_fts (memory_fts, rank) VALUES ('automerge', ?)"
PENDING_WORK = (
    f"{DIRTY_COUNTS} UNION ALL SELECT NULL, 1, 0 WHERE EXISTS (SELECT 1 FROM graph_dirty)"
)
"""Keyword work per tier, then a row of ``NULL`` if graph garbage waits (see
:meth:`~persistence.sqlite.keyword_index.KeywordIndex.before_commit`)."""


def update_keyword_index(
    conn: apsw.Connection, counts: Sequence[Sequence[Any]] | None = None
) -> bool:
    """Re-index the memories this transaction's writes left waiting (``keyword_dirty``):
    each once, in one statement, in rowid order. The store calls it before every commit
    and before reading the keyword index inside a transaction. True if there were any.

    A batch is written with FTS5's ``automerge`` off, set back before the commit: FTS5
    flushes a large insert in several segments and would pay, inside the batch, for
    merging what came before (half the keyword time of a 10,000-record
    ``remember_many`` into 100k memories); those merges are left to the background
    thread's idle merges (persistence/sqlite/keyword_index.py) or to later commits. ``counts``:
    the rows of :data:`DIRTY_COUNTS`, looked up already. When none of the rows is in a
    session, no neighbour's keyword window changed: the neighbours are not looked for.
    """
    if counts is None:
        counts = conn.execute(DIRTY_COUNTS).fetchall()  # which tiers, and a batch? One look
    if not counts:
        return False
    if len(counts) == 1:  # one tier (remember()): no generators
        tier, rows, in_sessions = counts[0]
        dirty, total, sessions = frozenset((str(tier),)), int(rows or 0), bool(in_sessions)
    else:
        dirty = frozenset(str(tier) for tier, _, _ in counts)
        total = sum(int(n or 0) for _, n, _ in counts)
        sessions = any(in_sessions for _, _, in_sessions in counts)
    if total < BATCH_ROWS:
        keyword_window_sql.work_off_tiers(conn, dirty, sessions)
        return True
    setting = query_one(conn, _AUTOMERGE)
    conn.execute(_SET_AUTOMERGE, (0,))
    try:
        keyword_window_sql.work_off_tiers(conn, dirty, sessions)
        return True
    finally:
        conn.execute(_SET_AUTOMERGE, (4 if setting is None else int(setting[0]),))


MERGE_PAGES = 64
"""Pages of keyword-index merge work per background step (a few milliseconds)."""


def merge_keyword_step(conn: apsw.Connection, pages: int = MERGE_PAGES) -> bool:
    """One step of merging the keyword index's segments, in a transaction of its own
    (``BEGIN IMMEDIATE``: ``apsw.BusyError`` when a writer holds the lock); True if it
    merged something (FTS5 adds to ``total_changes`` beyond the command's own one only
    then). It merges a level that holds four segments, as FTS5's automerge does inside
    commits; done while the writer rests, it leaves commits' automerge little to do
    (the bursts of up to hundreds of pages that made the write tail)."""
    if query_one(conn, "SELECT 1 FROM sqlite_schema WHERE name = 'memory_fts'") is None:
        return False
    conn.execute("BEGIN IMMEDIATE")
    try:
        before = conn.total_changes()
        conn.execute("INSERT INTO memory_fts (memory_fts, rank) VALUES ('merge', ?)", (pages,))
        merged = conn.total_changes() - before > 1  # the INSERT itself counts one
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return merged


def defers_keyword_index(conn: apsw.Connection) -> bool:
    """True if the file's triggers leave keyword re-indexing to commit (schema 8 on)."""
    found = "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'keyword_dirty'"
    return query_one(conn, found) is not None


def keyword_index_behind(conn: apsw.Connection) -> bool:
    """True if some memory waits for re-indexing (only a writer that bypassed the store
    can commit that)."""
    return query_one(conn, "SELECT 1 FROM keyword_dirty LIMIT 1") is not None


NARROW_ROWS = 400
"""A filter that accepts at most this many memories is searched by their rowids: FTS5
seeks each one's row in every term's doclist (about 0.15 ms each at 100k memories)
instead of scoring every match in the file and checking it (300 ms at 1M memories for
a session of 50)."""


def narrow_rowids(conn: apsw.Connection, where: MemoryFilter, cap: int) -> list[int] | None:
    """The keyword-index rowids of the memories ``where`` accepts, when an index finds
    them (a session, agent, tag or time range is set) and there are at most ``cap``;
    else ``None``."""
    if not index_backed(where):
        return None
    conds, params = filter_conditions(where)
    tiers = list(Tier) if where.tier is None else [where.tier]
    found: list[int] = []
    for tier in tiers:
        rows = query_all(
            conn,
            f"SELECT i.rowid FROM {TABLE[tier]} AS t JOIN memory_index AS i "
            f"ON i.memory_id = t.id WHERE {' AND '.join(conds)} LIMIT ?",
            [*params, cap + 1 - len(found)],
        )
        found += [int(r[0]) for r in rows]
        if len(found) > cap:
            return None
    return found


def _quoted(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def fts5_match(words: Sequence[str]) -> str:
    """The FTS5 MATCH expression for ``words``: each a double-quoted string (a ``"`` in
    a word doubled), joined with ``OR`` -- ``["dark", "mode"]`` is ``"dark" OR "mode"``.
    A quoted string is never FTS5 syntax, so no word can be read as an operator."""
    return " OR ".join(_quoted(word) for word in words)


def word_pairs(words: Sequence[str], common: Sequence[str]) -> str:
    """The FTS5 expression matching the rows that hold any of ``words`` that is not in
    ``common``, or at least two of ``words`` one of which is common: the plain words,
    then the ``AND`` of each such pair -- ``"rare" OR ("a" AND "b") OR ("a" AND "rare")``
    with ``common = ["a", "b"]``."""
    plain = [_quoted(w) for w in words if w not in common]
    pairs = [
        f"({_quoted(a)} AND {_quoted(b)})"
        for a, b in combinations(words, 2)
        if a in common or b in common
    ]
    return " OR ".join(plain + pairs)


RANK_CAP = 20_000
"""A keyword query whose words match more memories than this ranks its common words
only where they meet another query word (:func:`coordinated`). FTS5's bm25 costs about
0.8 us per matching row (the row's size and every phrase's instances are read) while
walking the matches costs about 0.03 us: four words that each sit in 1% of a million
memories match 46,000 rows, and ranking them took 28-38 ms of a 1M recall's ~42 ms of
CPU. A file with at most this many memories never takes the rule (a query matches at
most every row), so small files rank exactly as before."""

ALONE_ROWS = RANK_CAP // 4
"""The rarest words are ranked wherever they are, as long as together they match at
most this many rows; the words after them are the query's common words."""

PAIRED_WORDS = 6
"""At most this many words (those that match anything) take the rule: 15 pairs. A
longer query keeps the ordinary search (each pair is two more phrases for bm25)."""


def _matches(conn: apsw.Connection, match: str, cap: int) -> int:
    """How many rows ``match`` matches, counted up to ``cap + 1`` (walks no more)."""
    sql = "SELECT count(*) FROM (SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? LIMIT ?)"
    return int(query_value(conn, sql, [match, cap + 1]))


def _rowids_at_most(conn: apsw.Connection, cap: int) -> bool:
    """True if no keyword row has a rowid over ``cap``: the file then holds at most
    ``cap`` memories and no query can match more (one b-tree seek)."""
    return int(query_value(conn, "SELECT coalesce(max(rowid), 0) FROM memory_index")) <= cap


def coordinated(
    conn: apsw.Connection, words: Sequence[str], cap: int = RANK_CAP
) -> tuple[str, str] | None:
    """The FTS5 expression to rank instead of the plain ``OR`` of ``words``, and the
    sentence that says what it leaves out, when the plain one matches more than ``cap``
    rows; else ``None``.

    A common-terms rule (as Lucene's CommonTermsQuery, with "minimum should match 2" for
    the common words): the rarest words, while together they match at most
    ``cap // 4`` rows, count wherever they are; every other word (a common one) counts
    only in the rows that hold another query word as well (:func:`word_pairs`). At a
    million memories the best bm25 rows of a several-word query hold two or more of its
    words (the 100 best of a 4-word query over 46,000 matches all did), and ranking only
    those costs a fifth. Words that match nothing are left out; 2 to
    :data:`PAIRED_WORDS` words that match must remain, else ``None``. Each word's rows
    are counted up to ``cap // 4 + 1``, the plain ``OR``'s up to ``cap + 1``, and only
    when some word is common; nothing is counted in a file whose keyword rowids stay
    within ``cap``."""
    if len(words) < 2 or _rowids_at_most(conn, cap):
        return None
    alone_cap = cap // 4
    counts = {w: _matches(conn, _quoted(w), alone_cap) for w in words}
    live = sorted((w for w in words if counts[w]), key=lambda w: counts[w])
    if not 2 <= len(live) <= PAIRED_WORDS:
        return None
    alone, total = 0, 0
    while alone < len(live) and total + counts[live[alone]] <= alone_cap:
        total += counts[live[alone]]
        alone += 1
    common = [w for w in words if w in live[alone:]]  # in the query's order
    if not common or _matches(conn, fts5_match(live), cap) <= cap:
        return None
    named = ", ".join(f"'{w}'" for w in common)
    skipped = (
        f"keyword search: the query's words match over {cap:,} memories, so {named} "
        f"(the commonest of them) counted only in memories holding another query word "
        "(bm25 over the word pairs)"
    )
    return word_pairs([w for w in words if w in live], common), skipped


def keyword_search(
    conn: apsw.Connection,
    words: Sequence[str],
    limit: int,
    where: MemoryFilter,
    context_weight: float,
    after_weight: float,
    narrow_cap: int = NARROW_ROWS,
    rank_cap: int | None = None,
) -> KeywordHits:
    """``(memory_id, bm25)`` of the memories ``where`` accepts that hold any of
    ``words``, best first (FTS5's bm25 is negative: lower is better; ties in index
    order).

    bm25 weighs a memory's own words 1, the two memories before it in its session
    ``context_weight`` and the two after it ``after_weight``. Without a filter the best
    rows are chosen inside FTS5 before the id lookup (twice as fast as joining every
    match); a filter is part of the query, so the best ``limit`` accepted rows come back
    however few memories it accepts. A filter that accepts few memories (at most
    ``narrow_cap``, see :data:`NARROW_ROWS`) is searched through their rowids, with the
    same scores. When ``words`` match more than ``rank_cap`` rows, the common ones count
    only in rows that hold another query word (:func:`coordinated`; the result's
    ``skipped`` says so) if that still gives ``limit`` rows; else every match is ranked.
    """
    narrowed = narrow_rowids(conn, where, narrow_cap) if where.narrows else None
    if narrowed is not None and not narrowed:
        return KeywordHits()
    plain = fts5_match(words)
    cap = RANK_CAP if rank_cap is None else rank_cap
    pairs = coordinated(conn, words, cap) if narrowed is None else None
    if pairs is not None:
        sql, params = _search_sql(pairs[0], limit, where, context_weight, after_weight, None)
        hits = KeywordHits(((r[0], float(r[1])) for r in query_all(conn, sql, params)), pairs[1])
        if len(hits) >= limit:
            return hits
    sql, params = _search_sql(plain, limit, where, context_weight, after_weight, narrowed)
    return KeywordHits((r[0], float(r[1])) for r in query_all(conn, sql, params))


def _search_sql(
    match: str,
    limit: int,
    where: MemoryFilter,
    context_weight: float,
    after_weight: float,
    rowids: list[int] | None,
) -> tuple[str, list[object]]:
    """The keyword search's SQL and parameters for one FTS5 expression (``rowids``: the
    few rows a narrow filter accepts, see :func:`keyword_search`)."""
    score = "bm25(memory_fts, 1.0, ?, ?)"
    if where == MemoryFilter():
        sql = (
            f"SELECT i.memory_id, f.score FROM (SELECT rowid, {score} AS score "
            "FROM memory_fts WHERE memory_fts MATCH ? ORDER BY score, rowid LIMIT ?) AS f "
            "JOIN memory_index AS i ON i.rowid = f.rowid ORDER BY f.score, f.rowid"
        )
        return sql, [context_weight, after_weight, match, limit]
    if not where.narrows:
        sql = (
            f"SELECT i.memory_id, {score} AS score FROM memory_fts "
            "JOIN memory_index AS i ON i.rowid = memory_fts.rowid "
            "WHERE memory_fts MATCH ? AND i.tier = ? ORDER BY score, memory_fts.rowid LIMIT ?"
        )
        assert where.tier is not None
        return sql, [context_weight, after_weight, match, where.tier.value, limit]
    if rowids is not None:
        sql = (
            f"SELECT i.memory_id, {score} AS score FROM memory_fts "
            "JOIN memory_index AS i ON i.rowid = memory_fts.rowid "
            "WHERE memory_fts MATCH ? AND memory_fts.rowid IN (SELECT value FROM json_each(?)) "
            "ORDER BY score, memory_fts.rowid LIMIT ?"
        )
        return sql, [context_weight, after_weight, match, orjson.dumps(rowids).decode(), limit]
    accepted, accepted_params = accepts(where, "i.memory_id", "i.tier")
    sql = (
        f"SELECT i.memory_id, {score} AS score FROM memory_fts "
        "JOIN memory_index AS i ON i.rowid = memory_fts.rowid "
        f"WHERE memory_fts MATCH ? AND {accepted} ORDER BY score, memory_fts.rowid LIMIT ?"
    )
    return sql, [context_weight, after_weight, match, *accepted_params, limit]


WINDOW_COLUMNS = ("content", "context", "after")
"""``memory_fts``'s columns: a memory's own words, the two memories before it, the two
after it (migration v007)."""

_PARTS_OF = (
    "SELECT i.memory_id FROM memory_fts JOIN memory_index AS i ON i.rowid = memory_fts.rowid "
    "WHERE memory_fts MATCH ? AND memory_fts.rowid IN "
    "(SELECT rowid FROM memory_index WHERE memory_id IN (SELECT value FROM json_each(?)))"
)


def keyword_parts(
    conn: apsw.Connection, match: str, memory_ids: Sequence[str], scope: Scope = WHOLE
) -> dict[str, KeywordParts]:
    """Which columns of each of ``memory_ids``' keyword row match ``match`` (an FTS5
    expression, :func:`fts5_match`): one column-filtered query per column; memories of
    ``scope`` only."""
    ids = orjson.dumps(list(dict.fromkeys(memory_ids))).decode()
    sql = _PARTS_OF
    mine: tuple[str, ...] = ()
    if scope.scoped:
        held, mine = scoped_ids(scope)
        sql = f"{_PARTS_OF} AND i.memory_id IN ({held})"
    found = [
        {r[0] for r in query_all(conn, sql, [f"{{{column}}} : ({match})", ids, *mine])}
        for column in WINDOW_COLUMNS
    ]
    return {
        memory_id: KeywordParts(
            memory_id in found[0], memory_id in found[1], memory_id in found[2]
        )  # fmt: skip
        for memory_id in set().union(*found)
    }


def accepted_embeddings(
    conn: apsw.Connection, where: MemoryFilter, cap: int
) -> list[tuple[str, Tier, bytes]] | None:
    """The embedding of every memory ``where`` accepts that has one, with its tier; ``None``
    when there are more than ``cap`` (then search the RAM copy instead)."""
    found: list[tuple[str, Tier, bytes]] = []
    tiers = list(Tier) if where.tier is None else [where.tier]
    conds, params = filter_conditions(where)
    clause = " AND ".join([*conds, "t.embedding IS NOT NULL"])
    for tier in tiers:
        rows = query_all(
            conn,
            f"SELECT t.id, t.embedding FROM {TABLE[tier]} AS t WHERE {clause} LIMIT ?",
            [*params, cap + 1 - len(found)],
        )
        found += [(memory_id, tier, blob) for memory_id, blob in rows]
        if len(found) > cap:
            return None
    return found


def accepted_among(
    conn: apsw.Connection, where: MemoryFilter, candidates: Sequence[tuple[str, Tier]]
) -> list[tuple[str, Tier]]:
    """The ``candidates`` that ``where`` accepts, in their order."""
    conds, params = filter_conditions(where, probe_tags=True)
    keep: set[str] = set()
    for tier in Tier:
        ids = [memory_id for memory_id, at in candidates if at is tier]
        if not ids or (where.tier is not None and tier is not where.tier):
            continue
        clause = " AND ".join(["t.id IN (SELECT value FROM json_each(?))", *conds])
        rows = query_all(conn, f"SELECT t.id FROM {TABLE[tier]} AS t WHERE {clause}",
                         [orjson.dumps(ids).decode(), *params])  # fmt: skip
        keep.update(r[0] for r in rows)
    return [(memory_id, tier) for memory_id, tier in candidates if memory_id in keep]


def rerank(
    conn: apsw.Connection, candidates: list[tuple[str, Tier]], query: np.ndarray, limit: int
) -> list[tuple[str, float]]:
    """``(memory_id, cosine distance)`` of the ``limit`` nearest ``(id, tier)`` candidates,
    exactly, from the float vectors in the tier tables (those without one are dropped)."""
    found = []
    for tier in Tier:
        ids = [memory_id for memory_id, where in candidates if where is tier]
        if ids:
            found += embeddings_of(conn, ids, (tier,))
    return nearest(found, query, limit)


def nearest(
    found: Sequence[tuple[str, Tier, bytes]], query: np.ndarray, limit: int
) -> list[tuple[str, float]]:
    """``(memory_id, cosine distance)`` of the ``limit`` of ``found`` nearest to ``query``
    (ties in the order given)."""
    if not found:
        return []
    ids, distances = cosine_distances(found, query)
    order = np.argsort(distances, kind="stable")[:limit]
    return [(ids[i], float(distances[i])) for i in order]


def cosine_distances(
    found: Sequence[tuple[str, Tier, bytes]], query: np.ndarray
) -> tuple[list[str], np.ndarray]:
    """The ids of ``found`` (as :func:`embeddings_of` gives it) and their cosine distances
    to ``query``."""
    ids = [memory_id for memory_id, _, _ in found]
    matrix = np.frombuffer(b"".join(blob for _, _, blob in found), dtype="<f4")
    matrix = matrix.reshape(len(ids), -1)
    norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(query)), 1e-12)
    return ids, 1.0 - (matrix @ query) / np.clip(norms, 1e-12, None)


def embeddings_of(
    conn: apsw.Connection, memory_ids: list[str], tiers: Sequence[Tier] = tuple(Tier)
) -> list[tuple[str, Tier, bytes]]:
    """The current embedding of each of ``memory_ids`` (looked for in ``tiers``) that has
    one, with its tier."""
    marks = ", ".join("?" for _ in memory_ids)
    found: list[tuple[str, Tier, bytes]] = []
    for tier in tiers:
        rows = query_all(
            conn,
            f"SELECT id, embedding FROM {TABLE[tier]} "
            f"WHERE id IN ({marks}) AND embedding IS NOT NULL",
            memory_ids,
        )
        found += [(memory_id, tier, blob) for memory_id, blob in rows]
    return found


def change_head(conn: apsw.Connection) -> tuple[int, str | None]:
    """``(seq, memory_id)`` of the newest ``vector_changes`` row, ``(0, None)`` if none."""
    row = query_one(conn, "SELECT seq, memory_id FROM vector_changes ORDER BY seq DESC LIMIT 1")
    return (0, None) if row is None else (int(row[0]), str(row[1]))


def change_floor(conn: apsw.Connection) -> int:
    """The oldest ``seq`` still in ``vector_changes`` (0 when it is empty)."""
    return int(query_value(conn, "SELECT min(seq) FROM vector_changes") or 0)


def embedded_rows(conn: apsw.Connection, tier: Tier) -> Iterator[tuple[str, bytes]]:
    """``(id, float32 blob)`` of every memory of ``tier`` that has an embedding, streamed."""
    return iter(
        conn.execute(f"SELECT id, embedding FROM {TABLE[tier]} WHERE embedding IS NOT NULL")
    )


def memory_count(conn: apsw.Connection, *, at_most: int | None = None) -> int:
    """How many memories the file holds (all tiers, embedded or not), from the small
    keyword id table rather than a scan of the tier tables; with ``at_most``, counted
    no further than that."""
    if at_most is None:
        return int(query_value(conn, "SELECT count(*) FROM memory_index") or 0)
    sql = "SELECT count(*) FROM (SELECT 1 FROM memory_index LIMIT ?)"
    return int(query_value(conn, sql, (at_most,)) or 0)


def change_at(conn: apsw.Connection, seq: int) -> str | None:
    """The memory id logged at ``seq``, or ``None`` once that row is trimmed (or never was)."""
    value = query_value(conn, "SELECT memory_id FROM vector_changes WHERE seq = ?", (seq,))
    return None if value is None else str(value)


def changed_since(conn: apsw.Connection, seq: int) -> list[str]:
    """Ids of memories whose embedding changed after ``seq``."""
    rows = query_all(conn, "SELECT DISTINCT memory_id FROM vector_changes WHERE seq > ?", (seq,))
    return [r[0] for r in rows]


def unembedded(conn: apsw.Connection, limit: int) -> list[tuple[str, Tier, str]]:
    """Up to ``limit`` memories without an embedding: ``(id, tier, content)``."""
    found: list[tuple[str, Tier, str]] = []
    for tier in Tier:
        if len(found) >= limit:
            break
        rows = query_all(
            conn,
            f"SELECT id, content FROM {TABLE[tier]} WHERE embedding IS NULL LIMIT ?",
            (limit - len(found),),
        )
        found += [(r[0], tier, r[1]) for r in rows]
    return found


def unembedded_count(conn: apsw.Connection) -> int:
    """How many memories have no embedding (the partial ``idx_*_unembedded`` indexes)."""
    return sum(
        int(query_value(conn, f"SELECT count(*) FROM {TABLE[tier]} WHERE embedding IS NULL"))
        for tier in Tier
    )


def set_embeddings(
    conn: apsw.Connection, rows: Sequence[tuple[Tier, str, np.ndarray, str | None]]
) -> None:
    """Store computed embeddings ``(tier, id, vector, content)`` as float32 BLOBs: only
    where none was set meanwhile and, when ``content`` is given, the memory still has
    that content."""
    for tier, memory_id, vector, content in rows:
        conn.execute(
            f"UPDATE {TABLE[tier]} SET embedding = ? WHERE id = ? AND embedding IS NULL "
            "AND (? IS NULL OR content = ?)",
            (blob_of(vector), memory_id, content, content),
        )


def blob_of(vector: np.ndarray) -> bytes:
    """The float32 little-endian BLOB the file stores for ``vector``."""
    return np.asarray(vector, dtype="<f4").tobytes()


def embedding_model(conn: apsw.Connection) -> str | None:
    """The model id the file's vectors were made with (``None`` before any)."""
    model: str | None = value(conn, meta_sql.read(EMBEDDING_MODEL_KEY))
    return model


def record_embedding_error(conn: apsw.Connection, message: str) -> int:
    """Count one failure of background embedding and keep its message; returns the count.

    Kept in the file so that every process (the operator's ``tiered-memory stats``
    beside a running agent) sees it.
    """
    count = int(value(conn, meta_sql.add(EMBEDDING_ERRORS_KEY, 1)))
    run(conn, meta_sql.write(LAST_EMBEDDING_ERROR_KEY, message))
    return count

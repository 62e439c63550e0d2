"""Spike: the SQLite-shaped members of MemoryStorage on PostgreSQL + pgvector.

Not product code. It implements, against a real server, the members the design review
flagged as the riskiest to port:

- ``transaction(join=...)`` with nested savepoints, ``after_commit`` / ``after_rollback``,
  ``in_transaction`` (the semantics of persistence/database.py ``Database.transaction``);
- ``on_external_change`` / ``check_external_changes`` (LISTEN/NOTIFY, plus an exact
  version row read at BEGIN, the equivalent of SQLite's ``data_version``);
- ``keyword_search`` (three scorers: ``ts_rank``, ``ts_rank`` weighted by idf, and an
  exact FTS5-style bm25 computed from the tsvector) with the filter in the query;
- ``vector_search`` / ``vector_distances`` (pgvector, HNSW, cosine, filter in the query,
  iterative index scans).

Connections mirror the SQLite engine: one write connection per store behind an RLock
(transactions are per store and thread, like Database), one autocommit read connection
per thread, one LISTEN connection.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import pq

Hook = Callable[[], None]

TIERS = ("scratchpad", "episodic", "semantic")


# --- stand-ins for the domain records (persistence.records) ------------------------------


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    tier: str | None = None
    session_id: str | None = None
    agent_id: str | None = None
    tags: tuple[str, ...] = ()
    created_after: int | None = None
    created_before: int | None = None
    min_retention: float | None = None

    @property
    def narrows(self) -> bool:
        return replace(self, tier=None) != MemoryFilter()


class TransactionAbortedError(RuntimeError):
    pass


def filter_sql(where: MemoryFilter, alias: str = "m") -> tuple[str, dict[str, object]]:
    """``MemoryFilter`` -> one SQL condition on ``memories`` and its named parameters:
    every field is a plain indexed predicate, so the planner can put the filter inside
    the search (GIN / HNSW / btree), never after a LIMIT."""
    conds: list[str] = []
    params: dict[str, object] = {}
    for name in ("tier", "session_id", "agent_id"):
        value = getattr(where, name)
        if value is not None:
            conds.append(f"{alias}.{name} = %(f_{name})s")
            params[f"f_{name}"] = value
    if where.tags:
        conds.append(f"{alias}.tags @> %(f_tags)s::text[]")
        params["f_tags"] = list(dict.fromkeys(where.tags))
    if where.created_after is not None:
        conds.append(f"{alias}.created_at >= %(f_after)s")
        params["f_after"] = where.created_after
    if where.created_before is not None:
        conds.append(f"{alias}.created_at < %(f_before)s")
        params["f_before"] = where.created_before
    if where.min_retention is not None:
        conds.append(f"{alias}.retention >= %(f_ret)s")
        params["f_ret"] = where.min_retention
    return (" AND ".join(conds) or "true"), params


_QUOTED = re.compile(r'"((?:[^"]|"")*)"')
_PUNCT = re.compile(r"[!-/:-@\[-`{-~]+")  # ASCII punctuation: [[:punct:]] in the C locale


def match_words(match: str) -> list[str]:
    """The words of the domain's keyword query (``"dark" OR "mode"``)."""
    return [m.replace('""', '"') for m in _QUOTED.findall(match) if m.strip()]


def tsquery_text(words: Sequence[str]) -> str:
    """``to_tsquery`` input: each word quoted (a quoted multi-token word is a phrase, as
    in FTS5), joined with ``|``; normalised by the store's text search configuration."""
    words = [" ".join(_PUNCT.sub(" ", w).split()) for w in words]  # as tm_tsv splits text
    quoted = ["'" + w.replace("\\", "\\\\").replace("'", "''") + "'" for w in words if w]
    return " | ".join(quoted)


class PgStore:
    """The spike's store. ``uri`` is a libpq URL; ``writer_id`` tells this store's own
    commits from other processes' (NOTIFY payload)."""

    def __init__(self, uri: str, *, change_check_interval_ms: int = 0,
                 exact_version: bool = True) -> None:  # fmt: skip
        self.uri = uri
        self.writer_id = uuid.uuid4().hex
        self.lock = threading.RLock()
        self._writer: psycopg.Connection | None = None
        self._listener: psycopg.Connection | None = None
        self._local = threading.local()
        self._readers: list[psycopg.Connection] = []
        self._depth = 0
        self._owner: int | None = None
        self._hooks: list[tuple[list[Hook], list[Hook]]] = []
        self._aborted = False
        self._joined = False
        self._writes = 0  # statements that wrote, this transaction (the joined-block rule)
        self._change_listeners: list[Hook] = []
        self._seen_version: int | None = None
        self._check_interval = change_check_interval_ms / 1000
        self._next_check = 0.0
        self.exact_version = exact_version
        self.ef_search = 100

    # --- lifecycle ---------------------------------------------------------------------

    @property
    def path(self) -> str:
        info = psycopg.conninfo.conninfo_to_dict(self.uri)
        info.pop("password", None)
        return psycopg.conninfo.make_conninfo(**info)

    def _connect(self) -> psycopg.Connection:
        conn = psycopg.connect(self.uri, autocommit=True)
        register_vector(conn)
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        return conn

    def open(self) -> PgStore:
        with self.lock:
            if self._writer is not None:
                return self
            self._writer = self._connect()
            self._writer.execute("SELECT set_config('tm.writer', %s, false)", (self.writer_id,))
            self._listener = psycopg.connect(self.uri, autocommit=True)
            self._listener.execute("LISTEN tm_changes")
            self._seen_version = self._read_version(self._writer)
            return self

    def close(self) -> None:
        with self.lock:
            for conn in [self._writer, self._listener, *self._readers]:
                if conn is not None:
                    conn.close()
            self._writer = self._listener = None
            self._readers = []
            self._local = threading.local()

    @staticmethod
    def _read_version(conn: psycopg.Connection) -> int:
        return int(conn.execute("SELECT v FROM tm_version").fetchone()[0])

    # --- transactions (persistence/database.py semantics) ------------------------------

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0 and self._owner == threading.get_ident()

    def write(self, conn: psycopg.Connection, sql: str, params: object = None) -> psycopg.Cursor:
        """Every write statement goes through here: it counts for the joined-block rule
        (SQLite's ``total_changes()``; PostgreSQL has no per-connection change count)."""
        self._writes += 1
        return conn.execute(sql, params)

    def executemany(self, conn: psycopg.Connection, sql: str, rows: Sequence[object]) -> None:
        self._writes += 1
        with conn.cursor() as cur:
            cur.executemany(sql, rows)

    @contextmanager
    def transaction(self, *, join: bool = False) -> Iterator[psycopg.Connection]:
        with self.lock:
            conn = self._writer
            assert conn is not None, "store is not open"
            if self._depth and (join or self._joined) and self.in_transaction:
                if self._aborted:
                    raise TransactionAbortedError("an earlier joined block failed")
                writes, outer_joined = self._writes, self._joined
                self._joined = True
                self._begin_frame()
                try:
                    yield conn
                except BaseException:
                    failed = conn.info.transaction_status == pq.TransactionStatus.INERROR
                    if failed or self._writes != writes:
                        self._aborted = True  # half written (or PG aborted it): all must go
                    self._finish_inner(commit=False)
                    raise
                finally:
                    self._joined = outer_joined
                self._finish_inner(commit=True)
                return
            if self._depth == 0:
                self._begin(conn)
                self._begin_frame()
                self._joined = join
                self._writes = 0
                try:
                    yield conn
                except BaseException:
                    self._end_outer(conn, commit=False)
                    raise
                self._end_outer(conn, commit=True)
            else:
                if self._aborted:
                    raise TransactionAbortedError("an earlier joined block failed")
                name = f"tm_savepoint_{self._depth}"
                conn.execute(f"SAVEPOINT {name}")
                self._begin_frame()
                try:
                    yield conn
                except BaseException:
                    conn.execute(f"ROLLBACK TO SAVEPOINT {name}")
                    conn.execute(f"RELEASE SAVEPOINT {name}")
                    self._finish_inner(commit=False)
                    raise
                conn.execute(f"RELEASE SAVEPOINT {name}")
                self._finish_inner(commit=True)

    def _begin(self, conn: psycopg.Connection) -> None:
        """BEGIN and, with ``exact_version``, lock the version row (writers queue here,
        as at SQLite's BEGIN IMMEDIATE) and compare it with the last one seen: the
        exact check SQLite makes with ``PRAGMA data_version`` at every write."""
        if not self.exact_version:
            conn.execute("BEGIN")
            return
        cur = conn.execute("BEGIN; SELECT v FROM tm_version FOR UPDATE", prepare=False)
        while cur.pgresult is not None and cur.pgresult.ntuples == 0 and cur.nextset():
            pass  # the BEGIN's empty result comes first
        version = int(cur.fetchone()[0])
        self._drain_notifications()  # what the exact check covers is noticed once
        changed = self._seen_version is not None and version != self._seen_version
        self._seen_version = version
        if changed:
            for callback in self._change_listeners:
                callback()

    def _begin_frame(self) -> None:
        self._depth += 1
        self._owner = threading.get_ident()
        self._hooks.append(([], []))

    def _finish_inner(self, commit: bool) -> None:
        on_commit, on_rollback = self._hooks.pop()
        self._depth -= 1
        if commit:
            self._hooks[-1][0].extend(on_commit)
            self._hooks[-1][1].extend(on_rollback)
        else:
            for callback in reversed(on_rollback):
                callback()

    def _end_outer(self, conn: psycopg.Connection, commit: bool) -> None:
        on_commit, on_rollback = self._hooks.pop()
        self._depth, self._owner, self._joined = 0, None, False
        aborted, self._aborted = self._aborted, False
        failed = conn.info.transaction_status == pq.TransactionStatus.INERROR
        if commit and (aborted or failed):
            conn.execute("ROLLBACK")
            for callback in reversed(on_rollback):
                callback()
            raise TransactionAbortedError("rolled back after an earlier error; nothing committed")
        if commit:
            try:
                if self.exact_version and self._writes:
                    row = conn.execute("UPDATE tm_version SET v = v + 1 RETURNING v").fetchone()
                    version = int(row[0])
                conn.execute("COMMIT")  # deferred triggers (keyword window) run here
            except BaseException:
                if conn.info.transaction_status != pq.TransactionStatus.IDLE:
                    conn.execute("ROLLBACK")
                for callback in reversed(on_rollback):
                    callback()
                raise
            if self.exact_version and self._writes:
                self._seen_version = version
            for callback in on_commit:
                callback()
        else:
            conn.execute("ROLLBACK")
            for callback in reversed(on_rollback):
                callback()

    def after_commit(self, callback: Hook) -> None:
        if self.in_transaction:
            self._hooks[-1][0].append(callback)
        else:
            callback()

    def after_rollback(self, callback: Hook) -> None:
        if self.in_transaction:
            self._hooks[-1][1].append(callback)

    # --- other processes' commits --------------------------------------------------------

    def on_external_change(self, callback: Hook) -> None:
        self._change_listeners.append(callback)

    def _drain_notifications(self) -> bool:
        """True if another writer's NOTIFY arrived (own commits carry our id)."""
        listener = self._listener
        assert listener is not None
        other = False
        for note in listener.notifies(timeout=0):
            if note.payload != self.writer_id:
                other = True
        return other

    def check_external_changes(self, wait_s: float = 0.05) -> bool:
        """Poll the LISTEN connection (a non-blocking socket read): never waits for a
        writer, so ``wait_s`` has nothing to do; False only if the listener is lost
        (then the caller must not trust RAM copies until it is back)."""
        now = time.monotonic()
        if now < self._next_check:
            return True
        self._next_check = now + self._check_interval
        try:
            changed = self._drain_notifications()
        except psycopg.OperationalError:
            return False  # a reconnect must then call the listeners (changes were missed)
        if changed:
            if self._writer is not None and not self._depth:
                self._seen_version = self._read_version_quietly()
            for callback in self._change_listeners:
                callback()
        return True

    def _read_version_quietly(self) -> int | None:
        if not self.exact_version:
            return None
        with self.reading() as conn:
            return self._read_version(conn)

    # --- reading ------------------------------------------------------------------------

    @contextmanager
    def reading(self) -> Iterator[psycopg.Connection]:
        """This thread's autocommit read connection; the writer inside this thread's
        transaction (it must see its own uncommitted rows)."""
        if self.in_transaction:
            with self.lock:
                assert self._writer is not None
                yield self._writer
            return
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            with self.lock:
                self._readers.append(conn)
        yield conn

    # --- recall: keyword ---------------------------------------------------------------

    def keyword_search(
        self,
        match: str,
        limit: int,
        tier: str | None = None,
        context_weight: float = 0.5,
        after_weight: float = 0.5,
        *,
        where: MemoryFilter | None = None,
        scorer: str = "bm25",
    ) -> list[tuple[str, float]]:
        """``(memory_id, score)`` best (lowest, negative) first. ``scorer``: ``bm25``
        (FTS5's formula from the tsvector: idf, tf weighted per window part, length
        normalisation), ``idf`` (sum over words of idf * ts_rank), ``rank`` (plain
        ``-ts_rank``: no idf)."""
        words = match_words(match)
        if not words:
            return []
        accepted = where or MemoryFilter()
        if tier is not None:
            accepted = replace(accepted, tier=tier)
        cond, params = filter_sql(accepted)
        params.update(q=tsquery_text(words), limit=limit, cw=context_weight, aw=after_weight,
                      words=words)  # fmt: skip
        with self.reading() as conn:
            if self.in_transaction:  # this transaction's writes are not indexed yet
                conn.execute("SET CONSTRAINTS tm_kw_work IMMEDIATE")
                conn.execute("SET CONSTRAINTS tm_kw_work DEFERRED")
            sql = _KEYWORD[scorer].format(cond=cond)
            return [(r[0], float(r[1])) for r in conn.execute(sql, params)]

    # --- recall: vectors -------------------------------------------------------------------

    def vector_search(
        self,
        vector: object,
        limit: int,
        tier: str | None = None,
        *,
        where: MemoryFilter | None = None,
        ef_search: int | None = None,
        exact: bool = False,
    ) -> list[tuple[str, float]]:
        """``(memory_id, cosine distance)`` nearest first, the filter inside the index
        scan (pgvector >= 0.8 iterative scan: the scan goes on until ``limit`` rows pass
        the filter). ``exact`` forces a sequential scan (the reference)."""
        accepted = where or MemoryFilter()
        if tier is not None:
            accepted = replace(accepted, tier=tier)
        cond, params = filter_sql(accepted)
        params.update(v=np.asarray(vector, dtype=np.float32), limit=limit)
        ef = max(ef_search or self.ef_search, limit)
        sql = (
            "SELECT id, d FROM (SELECT m.id, m.embedding <=> %(v)s AS d FROM memories m "
            f"WHERE m.embedding IS NOT NULL AND {cond} "
            "ORDER BY m.embedding <=> %(v)s LIMIT %(limit)s) AS near ORDER BY d, id"
        )
        with self.reading() as conn:
            if exact:
                conn.execute("SET enable_indexscan = off")
                try:
                    return [(r[0], float(r[1])) for r in conn.execute(sql, params)]
                finally:
                    conn.execute("SET enable_indexscan = on")
            if getattr(conn, "_tm_ef", None) != ef:
                conn.execute(f"SET hnsw.ef_search = {int(ef)}")
                conn._tm_ef = ef  # type: ignore[attr-defined]
            return [(r[0], float(r[1])) for r in conn.execute(sql, params)]

    def vector_distances(self, vector: object, memory_ids: Sequence[str]) -> dict[str, float]:
        with self.reading() as conn:
            rows = conn.execute(
                "SELECT id, embedding <=> %s FROM memories "
                "WHERE id = ANY(%s) AND embedding IS NOT NULL",
                (np.asarray(vector, dtype=np.float32), list(memory_ids)),
            )
            return {r[0]: float(r[1]) for r in rows}

    # --- the few writes the spike needs ----------------------------------------------------

    def insert_memories(self, rows: Sequence[dict[str, object]]) -> None:
        cols = ("id", "tier", "key", "content", "session_id", "agent_id", "tags",
                "created_at", "retention", "embedding")  # fmt: skip
        sql = (f"INSERT INTO memories ({', '.join(cols)}) VALUES "
               f"({', '.join('%(' + c + ')s' for c in cols)})")  # fmt: skip
        with self.transaction() as conn:
            self.executemany(conn, sql, [{c: r.get(c) for c in cols} for r in rows])

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction(join=True) as conn:
            self.write(conn, "INSERT INTO tm_meta VALUES (%s, %s) ON CONFLICT (key) "
                             "DO UPDATE SET value = excluded.value", (key, value))  # fmt: skip

    def get_meta(self, key: str) -> str | None:
        with self.reading() as conn:
            row = conn.execute("SELECT value FROM tm_meta WHERE key = %s", (key,)).fetchone()
            return None if row is None else row[0]


_KEYWORD_HEAD = """
WITH q AS (SELECT to_tsquery('tm_english', %(q)s) AS q)
"""

_KEYWORD = {
    # plain ts_rank: weights {D, C, B, A} = {0, after, context, 1}; no idf
    "rank": _KEYWORD_HEAD
    + """
SELECT m.id, -ts_rank(ARRAY[0, %(aw)s, %(cw)s, 1.0]::float4[], m.kw, q.q) AS score
FROM memories m, q WHERE m.kw @@ q.q AND {cond}
ORDER BY score, m.seq LIMIT %(limit)s""",
    # sum over the query's lexemes of idf * ts_rank (df counted with the GIN index)
    "idf": """
WITH stats AS MATERIALIZED (SELECT n FROM tm_kw_stats),
lexemes AS MATERIALIZED (
    SELECT DISTINCT u.lexeme AS lex FROM unnest(%(words)s::text[]) AS w,
    unnest(tm_tsv(w)) AS u
), terms AS MATERIALIZED (
    SELECT plainto_tsquery('simple', l.lex) AS q,
           greatest(ln((s.n - c.df + 0.5) / (c.df + 0.5)), 1e-6) AS idf
    FROM lexemes l CROSS JOIN stats s CROSS JOIN LATERAL
         (SELECT count(*) AS df FROM memories WHERE kw @@ plainto_tsquery('simple', l.lex)) c
), q AS MATERIALIZED (SELECT to_tsquery('tm_english', %(q)s) AS q)
SELECT m.id, -(SELECT sum(t.idf * ts_rank(ARRAY[0, %(aw)s, %(cw)s, 1.0]::float4[], m.kw, t.q))
               FROM terms t) AS score
FROM memories m, q WHERE m.kw @@ q.q AND {cond}
ORDER BY score, m.seq LIMIT %(limit)s""",
    # FTS5's bm25 (k1 = 1.2, b = 0.75): tf = hits weighted per part of the window,
    # |D| = tokens of the whole row, N and avgdl from tm_kw_stats, df per lexeme
    "bm25": """
WITH stats AS MATERIALIZED (
    SELECT n, tokens::float8 / greatest(n, 1) AS avgdl FROM tm_kw_stats
), lexemes AS MATERIALIZED (
    SELECT DISTINCT u.lexeme AS lex FROM unnest(%(words)s::text[]) AS w,
    unnest(tm_tsv(w)) AS u
), idf AS MATERIALIZED (
    SELECT l.lex, greatest(ln((s.n - c.df + 0.5) / (c.df + 0.5)), 1e-6) AS idf
    FROM lexemes l CROSS JOIN stats s CROSS JOIN LATERAL
         (SELECT count(*) AS df FROM memories WHERE kw @@ plainto_tsquery('simple', l.lex)) c
), q AS MATERIALIZED (SELECT to_tsquery('tm_english', %(q)s) AS q),
matched AS MATERIALIZED (
    SELECT m.id, m.seq, m.kw_len, m.kw FROM memories m, q WHERE m.kw @@ q.q AND {cond}
), hits AS (
    SELECT x.id, x.seq, x.kw_len, i.idf,
           (SELECT sum(CASE w WHEN 'A' THEN 1.0 WHEN 'B' THEN %(cw)s WHEN 'C' THEN %(aw)s
                       ELSE 0 END) FROM unnest(u.weights) AS w) AS f
    FROM matched x CROSS JOIN LATERAL unnest(x.kw) AS u JOIN idf i ON i.lex = u.lexeme
)
SELECT h.id, -sum(h.idf * (h.f * 2.2) / (h.f + 1.2 * (0.25 + 0.75 * h.kw_len / s.avgdl))) AS score
FROM hits h, stats s GROUP BY h.id, h.seq ORDER BY score, h.seq LIMIT %(limit)s""",
    # the same bm25, tf looked up in per-row arrays written with the tsvector (kw_lex,
    # kw_fa/fb/fc): array_position instead of unnesting every matched row's tsvector
    "bm25arr": """
WITH stats AS MATERIALIZED (
    SELECT n, tokens::float8 / greatest(n, 1) AS avgdl FROM tm_kw_stats
), lexemes AS MATERIALIZED (
    SELECT DISTINCT u.lexeme AS lex FROM unnest(%(words)s::text[]) AS w,
    unnest(tm_tsv(w)) AS u
), idf AS MATERIALIZED (
    SELECT l.lex, greatest(ln((s.n - c.df + 0.5) / (c.df + 0.5)), 1e-6) AS idf
    FROM lexemes l CROSS JOIN stats s CROSS JOIN LATERAL
         (SELECT count(*) AS df FROM memories WHERE kw @@ plainto_tsquery('simple', l.lex)) c
), q AS MATERIALIZED (SELECT to_tsquery('tm_english', %(q)s) AS q)
SELECT m.id, -(
    SELECT sum(i.idf * (f.f * 2.2) / (f.f + 1.2 * (0.25 + 0.75 * m.kw_len / s.avgdl)))
    FROM idf i CROSS JOIN LATERAL (SELECT array_position(m.kw_lex, i.lex) AS p) p
    CROSS JOIN LATERAL (SELECT m.kw_fa[p.p] + %(cw)s * m.kw_fb[p.p] + %(aw)s * m.kw_fc[p.p] AS f) f
    WHERE p.p IS NOT NULL) AS score
FROM memories m, q, stats s WHERE m.kw @@ q.q AND {cond}
ORDER BY score, m.seq LIMIT %(limit)s""",
}

"""The keyword search under row-level security (an ordinary role, an agent-scoped
handle, no superuser setting): its plan reads the posting table through its primary key
and never scans every keyword row, and its results are the scope's own bm25 (N, avgdl and
document frequencies of the scope's windows), as a Python reference computes them from
the scope's memories. Migration v012 upgrades a v011 database with data to the same
rankings its keyword rows gave."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from migrations.postgres import apply_migrations, available_migrations
from persistence.postgres import PostgresStore
from persistence.postgres.integrity import CHECKS
from persistence.postgres.sql import keyword_sql
from persistence.records import MemoryFilter
from tests.support.pg_keywords import reference_search
from tests.support.pg_server import MIGRATED, PgServer, app_url

pytestmark = pytest.mark.postgres

AGENTS = ("a", "b", "c")
PER_AGENT = 600
COMMON = [f"common{i}" for i in range(30)]
RARE = [f"rare{i}" for i in range(300)]

_INSERT = (
    "INSERT INTO tm_memories (id, tier, key, content, session_id, agent_id, tags, speaker, "
    "retention, created_at, updated_at) VALUES (%s, %s, NULL, %s, %s, %s, '{}', NULL, 1.0, %s, 0)"
)


def _rows(rng: random.Random) -> list[tuple[object, ...]]:
    rows = []
    for i in range(PER_AGENT * len(AGENTS)):
        agent = AGENTS[i % len(AGENTS)]
        words = rng.choices(COMMON, k=rng.randint(2, 8)) + rng.choices(RARE, k=rng.randint(0, 2))
        tier = "semantic" if i % 11 == 0 else "episodic"
        session = None if i % 13 == 0 else f"{agent}-s{i % 17}"
        rows.append((f"m{i:05d}", tier, " ".join(words), session, agent, i))
    return rows


@pytest.fixture(scope="module")
def loaded(pg_server: PgServer) -> Iterator[str]:
    """A database of three agents' memories written by the operator's (unscoped) handle
    as the ordinary role (each memory in its agent's scope), analysed; its URL."""
    with pg_server.database("keyword_rls", MIGRATED) as superuser_url:
        url = app_url(pg_server, superuser_url)
        with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
            cur.executemany(_INSERT, _rows(random.Random(4)))
            conn.execute("ANALYZE")
        yield url


def _plan(conn: Any, words: list[str], where: MemoryFilter) -> dict[str, Any]:
    lexemes = keyword_sql.lexemes(words)
    found = dict(conn.execute(lexemes.sql, lexemes.params).fetchall())
    scope = conn.execute("SELECT current_setting('tm.scope')").fetchone()[0]
    statement = keyword_sql.search([found[w] for w in words], scope, 10, where, 0.5, 0.5)
    assert statement is not None
    (plan,) = conn.execute(
        "EXPLAIN (ANALYZE, FORMAT JSON) " + statement.sql, statement.params
    ).fetchone()
    return dict(plan[0] if isinstance(plan, list) else json.loads(plan)[0])


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", ()):
        yield from _nodes(child)


@pytest.mark.slow  # about 10 s: one module-wide load
@pytest.mark.parametrize("words", [["rare7"], ["rare7", "common3"], ["rare12", "rare40"]])
def test_a_scoped_search_reads_the_postings_by_index_not_every_keyword_row(
    loaded: str, words: list[str]
) -> None:
    store = PostgresStore(loaded, scope="a").open()
    try:
        with store.engine.reading() as conn:
            assert conn.execute("SELECT current_setting('tm.scope')").fetchone() == ("a",)
            (bypasses,) = conn.execute(
                "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
            ).fetchone()
            assert not bypasses  # row-level security binds this role
            (total,) = conn.execute(
                "SELECT count(*) FROM tm_kw_postings WHERE scope = 'a'"
            ).fetchone()
            nodes = list(_nodes(_plan(conn, words, MemoryFilter(agent_id="a"))["Plan"]))
    finally:
        store.close()
    on_postings = [n for n in nodes if n.get("Relation Name") == "tm_kw_postings"]
    by_key = [n for n in nodes if n.get("Index Name") == "tm_kw_postings_pkey"]
    assert on_postings and by_key, [(n["Node Type"], n.get("Index Name")) for n in nodes]
    assert all(n["Node Type"] != "Seq Scan" for n in on_postings)
    if all(w.startswith("rare") for w in words):  # a few windows: their rows by key
        scanned = {n["Relation Name"] for n in nodes if n["Node Type"] == "Seq Scan"}
        assert not scanned & {"tm_kw_postings", "tm_kw_docs", "tm_memories"}, scanned
    read = sum(n["Actual Rows"] * n["Actual Loops"] for n in on_postings)
    assert read < total / 10, (read, total)  # the query's lexemes only


def _ranked(found: list[tuple[str, float]]) -> list[tuple[float, str]]:
    """Scores rounded (float sums in another order) and sorted, ties by id."""
    return sorted((round(s, 9), m) for m, s in found)


@pytest.mark.slow  # shares the module's load
def test_a_scoped_search_ranks_the_scopes_windows_as_the_reference_does(loaded: str) -> None:
    """Under the policy the search sees the scope's rows only: N, avgdl and document
    frequencies are its own, and the scores equal the reference over the scope's
    memories (as the operator's connection sees them, restricted to the scope)."""
    with psycopg.connect(loaded, autocommit=True) as conn:
        expected = {
            (agent, tuple(words)): reference_search(conn, words, 0.5, 0.5, scope=agent)
            for agent in ("a", "c")
            for words in (["rare7"], ["common1", "rare20"], ["common2", "common5"])
        }
    for (agent, words), reference in expected.items():
        store = PostgresStore(loaded, scope=agent).open()
        try:
            found = store.indexes.keyword_search(list(words), 5000)
        finally:
            store.close()
        assert reference and _ranked(found) == _ranked(reference), (agent, words)


@pytest.mark.pg_unmigrated
def test_v012_upgrades_a_v011_database_with_data_to_the_same_rankings(pg_url: str) -> None:
    """A v011 database with memories in sessions, tiers and scopes: after v012 every
    search ranks as v011's keyword rows (``tm_keywords``' per-part term frequencies)
    scored, and the statistics and integrity checks agree."""
    rng = random.Random(8)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        apply_migrations(conn, available_migrations()[:11])
        with conn.cursor() as cur:
            cur.executemany(_INSERT, _rows(rng)[:400])
        conn.execute("DELETE FROM tm_memories WHERE id IN ('m00005', 'm00040')")
        conn.execute("UPDATE tm_memories SET tier = 'semantic' WHERE id = 'm00050'")
        cases = [(["common1"], 0.5, 0.5), (["common2", "rare9", "common7"], 0.3, 0.8),
                 (["rare3", "rare4"], 1.0, 0.0)]  # fmt: skip
        before = {tuple(w): _v011_scores(conn, w, cw, aw) for w, cw, aw in cases}
        stats = conn.execute("SELECT sum(n), sum(tokens) FROM tm_kw_stats").fetchone()
        assert apply_migrations(conn, available_migrations()[:12]) == [12]
        assert conn.execute("SELECT to_regclass('tm_keywords')").fetchone() == (None,)
        assert conn.execute("SELECT sum(n), sum(tokens) FROM tm_kw_stats").fetchone() == stats
    store = PostgresStore(pg_url).open()
    try:
        for words, cw, aw in cases:
            found = store.indexes.keyword_search(words, 1000, None, cw, aw)
            assert before[tuple(words)] and _ranked(found) == _ranked(before[tuple(words)])
        with store.engine.reading() as conn:
            assert CHECKS["keyword_index_matches"](conn) == []
    finally:
        store.close()


def _v011_scores(conn: Any, words: list[str], cw: float, aw: float) -> list[tuple[str, float]]:
    """bm25 of every memory from version 11's keyword rows (``kw_lex``, ``kw_fa/fb/fc``,
    ``kw_len``) and statistics."""
    query = "SELECT DISTINCT u.lexeme FROM unnest(%s::text[]) w, unnest(tm_tsv(w)) u"
    lexemes = [r[0] for r in conn.execute(query, (words,))]
    n, tokens = conn.execute("SELECT sum(n), sum(tokens) FROM tm_kw_stats").fetchone()
    rows = conn.execute(
        "SELECT memory_id, kw_len, kw_lex, kw_fa, kw_fb, kw_fc FROM tm_keywords"
    ).fetchall()
    n, avgdl = int(n), float(tokens) / int(n)
    df = {x: sum(x in r[2] for r in rows) for x in lexemes}
    scored = []
    for memory_id, length, lex, fa, fb, fc in rows:
        held = [x for x in lexemes if x in lex]
        score = 0.0
        for x in held:
            i = lex.index(x)
            f = fa[i] + cw * fb[i] + aw * fc[i]
            idf = max(math.log((n - df[x] + 0.5) / (df[x] + 0.5)), 1e-6)
            score -= idf * (f * 2.2) / (f + 1.2 * (0.25 + 0.75 * length / avgdl))
        if held:
            scored.append((memory_id, score))
    return scored

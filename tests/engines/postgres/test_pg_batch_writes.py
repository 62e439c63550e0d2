"""Batches on PostgreSQL are set-based: ``remember_many()`` and an import in ``replace``
mode write their memory rows and vectors with one multi-row INSERT per
``memory_sql.MULTI_ROW`` rows, so the statement triggers on ``tm_memories`` (the keyword
postings and windows, the embedding queue) and on ``tm_vectors`` fire once per chunk, not
once per row (per-row statements made batches and imports about 2.3x slower once the
keyword postings of migration v012 hung off them). What they write is what row-by-row
writes give: every row, vector and keyword entry (checked against a rebuild)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest

from persistence.postgres.sql import memory_sql
from tests.support.backends import keyword_state, rebuilt_keyword_state
from tests.support.pg_server import PgServer
from tiered_memory import AgentMemoryManager

pytestmark = pytest.mark.postgres

COUNT = 2_345  # three chunks of MULTI_ROW, the last one short
WORDS = ("harbour", "lantern", "quarry", "w7", "w11")

_COUNTER = (
    "CREATE TABLE test_fired (tbl text)",
    "GRANT ALL ON test_fired TO PUBLIC",
    """CREATE FUNCTION test_count_firing() RETURNS trigger LANGUAGE plpgsql
        SECURITY DEFINER AS $$
        BEGIN INSERT INTO test_fired VALUES (TG_TABLE_NAME); RETURN NULL; END $$""",
    """CREATE TRIGGER test_fired_memories AFTER INSERT ON tm_memories
        FOR EACH STATEMENT EXECUTE FUNCTION test_count_firing()""",
    """CREATE TRIGGER test_fired_vectors AFTER INSERT ON tm_vectors
        FOR EACH STATEMENT EXECUTE FUNCTION test_count_firing()""",
)


def _records(session_id: str) -> list[dict[str, object]]:
    rng = np.random.default_rng(3)
    out: list[dict[str, object]] = []
    for i in range(COUNT):
        vector = rng.standard_normal(8).astype(np.float32)
        content = f"{WORDS[i % 3]} note w{i % 13} number {i}"
        out.append({"content": content, "session_id": session_id, "embedding": vector})
    return out


def _firings(server: PgServer, database: str) -> dict[str, int]:
    """Statement-trigger firings per table since the counter was installed (then reset)."""
    with server.connect(database) as conn:
        found = conn.execute("SELECT tbl, count(*) FROM test_fired GROUP BY tbl").fetchall()
        conn.execute("DELETE FROM test_fired")
        conn.commit()
    return {str(t): int(n) for t, n in found}


def _install_counter(server: PgServer, database: str) -> None:
    with server.connect(database) as conn:
        for statement in _COUNTER:
            conn.execute(statement)
        conn.commit()


@pytest.mark.slow  # about 20 s on a busy machine (two batches of 2,345 memories)
def test_a_batch_and_an_import_write_set_based_and_exactly(
    pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    database = urlsplit(pg_url).path.lstrip("/")
    memory = AgentMemoryManager.open(pg_url, embedder=None)
    session = memory.start_session().session_id
    _install_counter(pg_server, database)
    ids = [m.id for m in memory.remember_many(_records(session))]
    chunks = -(-COUNT // memory_sql.MULTI_ROW)
    assert chunks == 3
    assert _firings(pg_server, database) == {"tm_memories": chunks, "tm_vectors": chunks}
    assert memory.statistics().vector_pending == 0
    assert {m.id for m in memory.query(limit=COUNT + 1)} == set(ids)
    state = keyword_state(memory.store, WORDS)
    assert state == rebuilt_keyword_state(memory.store, WORDS)
    assert state[1] == COUNT
    export = tmp_path / "batch.json"
    memory.export_json(export)
    memory.import_json(export, "replace")
    assert _firings(pg_server, database) == {"tm_memories": chunks, "tm_vectors": chunks}
    assert {m.id for m in memory.query(limit=COUNT + 1)} == set(ids)
    assert keyword_state(memory.store, WORDS) == state
    # A word of one memory only (its neighbours' windows hold it at a lower weight): the
    # imported keyword index finds that memory first. (Words shared by hundreds of rows
    # rank by their windows, which depend on the random ids' order: not asked here.)
    hits = memory.recall(f"number {COUNT - 2}", k=5, session_id=session)
    assert hits[0].memory.content.endswith(f" number {COUNT - 2}")
    memory.close()


def test_a_batch_is_one_statement_per_chunk_of_rows() -> None:
    """``insert_many`` gives one multi-row INSERT per ``MULTI_ROW`` memories and vectors,
    each carrying its rows' parameters in order (the ON CONFLICT clause kept once)."""
    rows = [(f"m{i}",) + (None,) * 21 for i in range(memory_sql.MULTI_ROW + 1)]
    vectors = [(f"m{i}", np.zeros(4, np.float32)) for i in range(3)]
    memories, vectored = memory_sql.insert_many(rows, vectors)
    assert all(isinstance(s.params, list) for s in (*memories, *vectored))
    assert [len(s.params) for s in memories] == [22 * memory_sql.MULTI_ROW, 22]
    assert list(memories[1].params)[0] == f"m{memory_sql.MULTI_ROW}"
    assert memories[0].sql.count("(%s, ") == memory_sql.MULTI_ROW
    (only,) = vectored
    assert only.sql.count("(%s, %s)") == 3 and only.sql.count("ON CONFLICT") == 1
    assert list(only.params)[0::2] == ["m0", "m1", "m2"]

"""Schema 16: the sqlite-vec table ``memory_vec`` (kept by triggers, read by no query) is
gone, from new files and from old ones on upgrade; the library runs without sqlite-vec."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest

import migrations.sqlite as sqlite_chain
from benchmarks.raw_sql import load_sqlite_vec
from migrations.sqlite import v016_write_path
from persistence import Memory, QueryOptions, Tier
from persistence.sqlite import SQLiteStore
from tests.conftest import old_schema_store

TIERS = ("scratchpad", "episodic", "semantic")
DIM = 16


def _old_vector_table(path: Path) -> None:
    """Add ``memory_vec`` and its triggers as schema 15's library made them (bits)."""
    conn = apsw.Connection(str(path))
    load_sqlite_vec(conn)
    conn.execute(
        "CREATE VIRTUAL TABLE memory_vec USING vec0("
        f"memory_id text primary key, tier text, embedding_bits bit[{DIM}])"
    )
    insert = (
        "INSERT INTO memory_vec (memory_id, tier, embedding_bits) "
        "VALUES (NEW.id, '{tier}', vec_quantize_binary(NEW.embedding))"
    )
    delete = "DELETE FROM memory_vec WHERE memory_id = OLD.id"
    for tier in TIERS:
        conn.execute(
            "INSERT INTO memory_vec (memory_id, tier, embedding_bits) SELECT id, ?, "
            f"vec_quantize_binary(embedding) FROM {tier} WHERE embedding IS NOT NULL",
            (tier,),
        )
        for name, event, when, body in (
            ("insert", "INSERT", "NEW.embedding IS NOT NULL", insert.format(tier=tier)),
            ("delete", "DELETE", "1", delete),
            ("update", "UPDATE OF embedding", "NEW.embedding IS NOT NULL",
             f"{delete}; {insert.format(tier=tier)}"),
            ("unset", "UPDATE OF embedding", "NEW.embedding IS NULL", delete),
        ):  # fmt: skip
            conn.execute(
                f"CREATE TRIGGER {tier}_vector_{name} AFTER {event} ON {tier} "
                f"WHEN {when} BEGIN {body}; END"
            )
    conn.close()


def _vector_objects(path: Path) -> list[str]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = conn.execute(
            "SELECT name FROM sqlite_schema WHERE name GLOB 'memory_vec*' "
            "OR (type = 'trigger' AND name GLOB '*_vector_*' AND name NOT GLOB '*_vector_log_*' "
            "AND name NOT GLOB '*_vector_code_*') ORDER BY name"
        )
        return [r[0] for r in rows]
    finally:
        conn.close()


def _v15_file(path: Path) -> np.ndarray:
    vectors = np.random.default_rng(3).standard_normal((30, DIM)).astype(np.float32)
    with old_schema_store(path, 15) as old:
        assert old.schema_version == 15
        for i, vector in enumerate(vectors):
            old.memories.put_memory(
                Memory.create(f"fact {i}", Tier.EPISODIC, id=f"m{i}", embedding=vector)
            )
    _old_vector_table(path)
    assert "memory_vec" in _vector_objects(path)
    return vectors


def test_a_v15_file_loses_the_vector_table_and_keeps_its_memories(db_path: Path) -> None:
    """Upgraded by a library that does not load sqlite-vec: the table, its shadow tables
    and its twelve triggers go; every memory, vector and search result stays."""
    vectors = _v15_file(db_path)
    assert len(_vector_objects(db_path)) > 12  # the table, its shadow tables, 12 triggers
    with SQLiteStore(db_path) as store:
        assert store.schema_version == sqlite_chain.LATEST_VERSION >= 16
        assert _vector_objects(db_path) == []
        for i, vector in enumerate(vectors):
            assert store.indexes.vector_search(vector, 1)[0][0] == f"m{i}"
        with store.engine.reading() as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            (count,) = conn.execute("SELECT count(*) FROM episodic").fetchone()
        assert count == len(vectors)
        # Writes with and without vectors work without the old triggers' function.
        store.memories.put_memory(
            Memory.create("new", Tier.EPISODIC, id="new", embedding=-vectors[0])
        )
        store.memories.forget_memory("m1", reason="test")
        assert store.indexes.vector_search(-vectors[0], 1)[0][0] == "new"


def test_the_migration_drops_the_table_normally_when_sqlite_vec_is_loaded(db_path: Path) -> None:
    _v15_file(db_path)
    conn = apsw.Connection(str(db_path))
    load_sqlite_vec(conn)
    with conn:
        v016_write_path.up(conn)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()
    assert _vector_objects(db_path) == []


def test_new_files_have_no_vector_table(db_path: Path) -> None:
    with SQLiteStore(db_path) as store:
        store.memories.put_memory(Memory.create("v", embedding=np.ones(DIM, dtype=np.float32)))
    assert _vector_objects(db_path) == []


_WITHOUT_SQLITE_VEC = """
import sys
sys.modules["sqlite_vec"] = None  # any import of it fails
import numpy as np
from tiered_memory import AgentMemoryManager
with AgentMemoryManager.open(sys.argv[1], embedder=None) as memory:
    a = memory.remember("the cat sat", embedding=np.eye(8, dtype=np.float32)[0])
    b = memory.remember("a dog ran", embedding=np.eye(8, dtype=np.float32)[1])
    found = memory.store.indexes.vector_search(np.eye(8, dtype=np.float32)[1], 1)
    assert found[0][0] == b.id, found
    assert memory.recall("cat")[0].memory.id == a.id
print("ok")
"""


@pytest.mark.slow  # 3.9 s measured on a busy machine
def test_the_library_runs_without_sqlite_vec(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _WITHOUT_SQLITE_VEC, str(tmp_path / "m.db")],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[3],
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")


# --- partial agent and category indexes (schema 16) -------------------------------------


def _plans(store: SQLiteStore, run: Any) -> list[str]:
    """The query plans of the statements ``run(store)`` executes on the read connection."""
    seen: list[tuple[str, Any]] = []

    def trace(cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
        if sql.lstrip().upper().startswith("SELECT"):
            seen.append((sql, bindings))
        return True

    with store.engine.reading() as conn:
        conn.set_exec_trace(trace)
        try:
            run(store)
        finally:
            conn.set_exec_trace(None)
        return [
            " ".join(str(r[3]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", bindings))
            for sql, bindings in seen
        ]


def test_agent_and_category_indexes_are_partial_and_still_used(db_path: Path) -> None:
    """Memories without an agent or category write no row into those indexes, and the
    queries that filter by them still find their rows through them."""
    with SQLiteStore(db_path) as store:
        for tier in (Tier.EPISODIC, Tier.SEMANTIC):
            store.memories.insert_memories([
                Memory.create(f"{tier.value} {i}", tier, agent_id="a" if i % 50 == 0 else None,
                              category="c" if i % 40 == 0 else None)
                for i in range(2000)
            ])  # fmt: skip
        with store.engine.reading() as conn:
            conn.execute("ANALYZE")
        for tier in (Tier.EPISODIC, Tier.SEMANTIC):
            for index, column, value, expected in (
                (f"idx_{tier.value}_agent", "agent_id", "a", 40),
                (f"idx_{tier.value}_category", "category", "c", 50),
            ):
                with store.engine.reading() as conn:
                    (sql,) = conn.execute(
                        "SELECT sql FROM sqlite_schema WHERE name = ?", (index,)
                    ).fetchone()
                    (entries,) = conn.execute(  # an index b-tree's cells are its entries
                        "SELECT sum(ncell) FROM dbstat WHERE name = ?", (index,)
                    ).fetchone()
                assert sql.endswith(f"WHERE {column} IS NOT NULL")
                assert entries == expected  # NULLs are not in the index
                options = QueryOptions(**{column: value}, limit=None)  # type: ignore[arg-type]
                found: list[list[Any]] = []
                plans = _plans(store, lambda s, o=options, t=tier, out=found: out.append(
                    s.memories.query(t, o)))  # fmt: skip
                assert len(found[0]) == expected
                assert any(f"INDEX {index}" in plan for plan in plans), plans
        # The agent's own listing (agent-scoped handles) uses it too.
        with store.engine.reading() as conn:
            sql = "EXPLAIN QUERY PLAN SELECT id FROM episodic WHERE agent_id = ?"
            plan = " ".join(str(r[3]) for r in conn.execute(sql, ("a",)))
        assert "INDEX idx_episodic_agent" in plan

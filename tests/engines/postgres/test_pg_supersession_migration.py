"""A PostgreSQL database from before facts that change (schema 12) migrates to 13 with
every memory current and as it was, and supersession works on it (issue 43, point 5;
the file's twin is tests/migrations/test_migrations.py's v17 -> v18)."""

from __future__ import annotations

import psycopg
import pytest

from migrations.postgres import read_schema_version
from tests.conftest import FakeClock
from tiered_memory import AgentMemoryManager

pytestmark = pytest.mark.postgres

BEFORE_13 = (  # version 13's own statements undone: the schema of a version 12 database
    "DROP INDEX tm_memories_superseded_by",
    "ALTER TABLE tm_memories DROP COLUMN superseded_by, DROP COLUMN valid_to, "
    "DROP COLUMN superseded_reason",
    "DELETE FROM tm_schema_version WHERE version = 13",
)


def test_a_v12_database_migrates_with_every_memory_current(pg_url: str, clock: FakeClock) -> None:
    with AgentMemoryManager.open(pg_url, clock=clock, embedder=None) as memory:
        stored = [memory.remember(f"Ana lives in city {i}", tags=(f"t{i % 3}",)).id
                  for i in range(6)]  # fmt: skip
        stored.append(memory.remember("Ana lives in Paris",
                                      relations=[("Ana", "lives_in", "Paris")]).id)  # fmt: skip
        before = [memory.get(m) for m in stored]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for statement in BEFORE_13:
            conn.execute(statement)
        assert read_schema_version(conn) == 12
    with AgentMemoryManager.open(pg_url, clock=clock, embedder=None) as memory:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            assert read_schema_version(conn) == 13
        after = [memory.get(m) for m in stored]
        assert after == before
        assert all(m is not None and m.current and m.valid_to is None for m in after)
        assert not memory.store.memories.has_superseded()
        assert len(memory.recall("Ana lives", 10)) == 7
        clock.advance(1000)
        berlin = memory.remember("Ana moved to Berlin", relations=[("Ana", "lives_in", "Berlin")])
        assert memory.get(stored[-1]).superseded_by == berlin.id  # type: ignore[union-attr]
        assert memory.store.memories.has_superseded()

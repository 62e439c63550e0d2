"""The Memory field list is written once (persistence.records.MEMORY_FIELDS); the export
format, the SQL column mapping and remember()'s fields all follow it."""

from __future__ import annotations

import inspect

import pytest

from persistence import MEMORY_FIELDS, NEW_MEMORY_FIELDS, Memory
from persistence.postgres.sql.memory_sql import _COLUMNS as PG_COLUMNS
from persistence.sqlite.sql.memory_sql import _COLUMNS
from persistence.transfer.json_export import MEMORY_FIELDS as EXPORTED
from tiered_memory import AgentMemoryManager

pytestmark = pytest.mark.both_backends


def test_the_export_format_keeps_its_field_order() -> None:
    assert EXPORTED == (
        "id",
        "content",
        "key",
        "session_id",
        "agent_id",
        "category",
        "tags",
        "importance",
        "retention",
        "token_count",
        "source",
        "metadata",
        "linked_memories",
        "embedding",
        "access_count",
        "last_accessed_at",
        "created_at",
        "updated_at",
        "speaker",
    )  # fmt: skip  (speaker: schema 9, optional on import)
    assert set(MEMORY_FIELDS) == set(EXPORTED) | {"tier"}


def test_the_tier_tables_store_every_field() -> None:
    # SQLite: key (scratchpad only), tags (memory_tags) and tier (the table) are stored apart
    assert set(_COLUMNS) | {"key", "tags", "tier"} == set(MEMORY_FIELDS)
    # PostgreSQL: one table with a tier column; the vector lives in tm_vectors
    assert set(PG_COLUMNS) | {"embedding"} == set(MEMORY_FIELDS)


def test_remember_takes_exactly_the_new_memory_fields() -> None:
    taken = set(inspect.signature(AgentMemoryManager.remember).parameters) - {"self", "content"}
    graph_facts = {"entities", "relations"}  # facts for the knowledge graph, not fields
    per_call = {"dedup"}  # how this call writes, not a field
    assert taken == set(NEW_MEMORY_FIELDS) | {"tier", "key"} | graph_facts | per_call
    assert all(name in {f for f in Memory.__dataclass_fields__} for name in NEW_MEMORY_FIELDS)


def test_remember_stores_every_new_memory_field_it_is_given(any_location: str) -> None:
    chosen = {"session_id": None, "agent_id": "agent", "importance": 0.25, "tags": ["a", "b"],
              "metadata": {"k": 1}, "source": "src", "category": "cat",
              "embedding": None, "speaker": "Ann"}  # fmt: skip
    assert set(chosen) == set(NEW_MEMORY_FIELDS)
    with AgentMemoryManager.open(any_location, embedder=None) as memory:
        stored = memory.remember("text", **chosen)
        for name, value in chosen.items():
            expected = tuple(value) if name == "tags" else value
            assert getattr(stored, name) == expected, name
            assert getattr(memory.get(stored.id), name) == expected, name

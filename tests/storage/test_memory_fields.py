"""The Memory field list is written once (persistence.records.MEMORY_FIELDS); the export
format, the SQL column mapping and remember()'s fields all follow it."""

from __future__ import annotations

import inspect
import math
from dataclasses import replace
from pathlib import Path

import pytest

from persistence import (
    MEMORY_FIELDS,
    NEW_MEMORY_FIELDS,
    InvalidInputError,
    InvalidTypeError,
    Memory,
    Tier,
    check_memory_fields,
)
from persistence.postgres.sql.memory_sql import _COLUMNS as PG_COLUMNS
from persistence.sqlite.sql.memory_sql import _COLUMNS
from persistence.transfer.json_export import MEMORY_FIELDS as EXPORTED
from tiered_memory import AgentMemoryManager


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
        "superseded_by",
        "valid_to",
        "superseded_reason",
    )  # fmt: skip  (speaker: schema 9, the last three 18: optional on import)
    assert set(MEMORY_FIELDS) == set(EXPORTED) | {"tier"}


def test_the_tier_tables_store_every_field() -> None:
    # SQLite: key (scratchpad only), tags (memory_tags) and tier (the table) are stored apart
    assert set(_COLUMNS) | {"key", "tags", "tier"} == set(MEMORY_FIELDS)
    # PostgreSQL: one table with a tier column; the vector lives in tm_vectors
    assert set(PG_COLUMNS) | {"embedding"} == set(MEMORY_FIELDS)


def test_remember_takes_exactly_the_new_memory_fields() -> None:
    taken = set(inspect.signature(AgentMemoryManager.remember).parameters) - {"self", "content"}
    graph_facts = {"entities", "relations"}  # facts for the knowledge graph, not fields
    per_call = {"dedup", "supersedes"}  # how this call writes (what it replaces), not a field
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


# --- one rule set for a memory's fields (persistence.validation.check_memory_fields) -----

_BAD_FIELDS = [
    ("importance", "high", InvalidTypeError),
    ("importance", 1.5, InvalidInputError),
    ("importance", math.nan, InvalidInputError),
    ("tags", "a", InvalidTypeError),
    ("tags", [""], InvalidInputError),
    ("metadata", [1], InvalidTypeError),
    ("session_id", "", InvalidInputError),
    ("source", 3, InvalidTypeError),
    ("speaker", b"x", InvalidTypeError),
]


@pytest.mark.parametrize(("field", "bad", "error"), _BAD_FIELDS)
def test_the_domain_and_the_store_refuse_a_field_by_the_same_rule(
    field: str, bad: object, error: type[Exception], tmp_path: Path
) -> None:
    """remember() names the argument, the store's check names the field; same type."""
    with AgentMemoryManager.open(tmp_path / "a.db", embedder=None) as memory:
        with pytest.raises(error, match=rf"^(each of )?{field} ") as by_argument:
            memory.remember("text", **{field: bad})  # type: ignore[arg-type]
        record = {"content": "text", field: bad}
        with pytest.raises(error, match=rf"^(each of )?{field} ") as by_record:
            memory.remember_many([record])
        stored = Memory.create("text", Tier.SEMANTIC)
        with pytest.raises(error, match=rf"^(each of )?memory\.{field} ") as by_field:
            memory.store.memories.put_memory(replace(stored, **{field: bad}))
        assert memory.query() == []
    assert type(by_argument.value) is type(by_field.value) is type(by_record.value)
    named = str(by_argument.value).replace(f"{field} ", f"memory.{field} ", 1)
    assert str(by_field.value) == named


def test_importance_out_of_range_says_what_it_must_be() -> None:
    for what in ("", "memory."):
        with pytest.raises(InvalidInputError, match=r"must be a finite number within \[0, 1\]"):
            check_memory_fields(what, importance=math.inf)
    check_memory_fields(importance=1, tags=[], metadata={}, session_id=None, agent_id=None)


def test_an_empty_agent_id_is_refused_when_written_now_and_kept_from_a_file(
    any_location: str, tmp_path: Path
) -> None:
    """A caller's new memory needs a real agent (``""`` could never be a scope's);
    a stored one may hold ``""`` (the store's API takes it), and its export imports."""
    with pytest.raises(InvalidInputError, match="^agent_id must not be empty"):
        check_memory_fields(agent_id="", new=True)
    check_memory_fields("memory.", agent_id="")  # a stored memory's field
    with AgentMemoryManager.open(any_location, embedder=None) as memory:
        for write in (
            lambda: memory.remember("text", agent_id=""),
            lambda: memory.remember("text", Tier.SCRATCHPAD, key="k", agent_id=""),
            lambda: memory.remember_many([{"content": "text", "agent_id": ""}]),
            lambda: memory.scratchpad.put("k", "text", agent_id=""),
        ):
            with pytest.raises(InvalidInputError, match="agent_id must not be empty"):
                write()
        assert memory.query() == [] and len(memory.scratchpad) == 0
        kept = memory.store.memories.put_memory(Memory.create("older", Tier.SEMANTIC, agent_id=""))
        exported = memory.export_json(tmp_path / "export.json")
    with AgentMemoryManager.open(tmp_path / "again.db", embedder=None) as again:
        again.import_json(exported)
        assert again.get(kept.id) == kept

"""persistence/schema_sql.py is the DDL a freshly migrated file carries (the runtime's copy
of the keyword window, its triggers and the vector table)."""

from __future__ import annotations

import numpy as np

from persistence import Memory
from persistence.sqlite import SQLiteStore
from persistence.sqlite.connection import query_all
from persistence.sqlite.sql import schema_sql


def _schema(store: SQLiteStore, kind: str, like: str) -> dict[str, str]:
    with store.read_connection() as conn:
        rows = query_all(
            conn, "SELECT name, sql FROM sqlite_schema WHERE type = ? AND name LIKE ?", (kind, like)
        )
    return {name: sql for name, sql in rows}


def test_a_new_file_carries_the_current_keyword_triggers(file_store: SQLiteStore) -> None:
    stored = _schema(file_store, "trigger", "%_keyword_%")
    expected = {
        f"{tier}_keyword_{event}": sql
        for tier in schema_sql.TIERS
        for event, sql in zip(
            schema_sql.KEYWORD_EVENTS, schema_sql.keyword_triggers(tier), strict=True
        )
    }
    assert stored == expected


def test_the_vector_table_and_its_triggers_are_the_current_ddl(file_store: SQLiteStore) -> None:
    file_store.put_episodic(Memory.create("v", embedding=np.ones(16, dtype=np.float32)))
    table = _schema(file_store, "table", "memory_vec")
    assert table == {"memory_vec": schema_sql.create_vector_table(16)}
    triggers = _schema(file_store, "trigger", "%_vector_%")
    expected = {
        f"{table}_vector_{event}": sql
        for table in schema_sql.TIERS
        for event, sql in zip(
            schema_sql.VECTOR_EVENTS,
            schema_sql.vector_triggers(table, table, 16),
            strict=True,
        )
    }
    kept = {k: v for k, v in triggers.items() if not ("_vector_log_" in k or "_vector_code_" in k)}
    assert kept == expected

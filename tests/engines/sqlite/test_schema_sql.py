"""persistence/schema_sql.py is the DDL a freshly migrated file carries (the runtime's copy
of the keyword window, its triggers and the vector table)."""

from __future__ import annotations

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

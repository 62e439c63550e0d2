"""The keyword window's DDL has one home, the SQLite migration chain: a new file carries
the triggers the chain last defined (v008, over v007's window), which the runtime's work-off in
persistence/sqlite/sql/keyword_window_sql.py relies on (test_keyword_context checks that work-off
against a recomputation)."""

from __future__ import annotations

from migrations.sqlite import v007_keyword_window as window
from migrations.sqlite import v008_keyword_window_order as keyword_window
from persistence.sqlite import SQLiteStore
from persistence.sqlite.connection import query_all
from persistence.sqlite.sql import keyword_window_sql


def _schema(store: SQLiteStore, kind: str, like: str) -> dict[str, str]:
    with store.engine.reading() as conn:
        rows = query_all(
            conn, "SELECT name, sql FROM sqlite_schema WHERE type = ? AND name LIKE ?", (kind, like)
        )
    return {name: sql for name, sql in rows}


def test_a_new_file_carries_the_keyword_triggers_of_the_chain(file_store: SQLiteStore) -> None:
    stored = _schema(file_store, "trigger", "%_keyword_%")
    expected = {
        f"{tier}_keyword_{event}": sql
        for tier in window.TIERS
        for event, sql in zip(
            ("insert", "delete", "update"), keyword_window.triggers(tier), strict=True
        )
    }
    assert stored == expected


def test_the_runtime_window_is_the_one_the_chain_built() -> None:
    assert (keyword_window_sql.TIERS, keyword_window_sql.WINDOW) == (window.TIERS, window.WINDOW)

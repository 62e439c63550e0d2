"""A store on each backend for the record-family tests: SQLite in memory, SQLite on a
file, and PostgreSQL (a fresh database per test): the conftest's ``any_store`` locations
(ids ``memory``, ``sqlite``, ``postgres``, the same as ``make_memory``/``memory``), with
backend-neutral helpers. A test module imports :func:`store_on_each_backend`; it
overrides the ``store`` fixture there (the conftest's own ``store`` is SQLite's)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from persistence.locations import is_server_url
from persistence.postgres import PostgresStore
from persistence.sqlite import SQLiteStore
from persistence.storage import MemoryStorage
from tests.conftest import FakeClock
from tiered_memory import AgentMemoryManager


@pytest.fixture(name="store")
def store_on_each_backend(any_store: str, clock: FakeClock) -> Iterator[MemoryStorage]:
    """An open store at each ``any_store`` location: in memory, on a file, on a server."""
    opened: Any
    if is_server_url(any_store):
        opened = PostgresStore(any_store, clock=clock).open()
    else:
        opened = SQLiteStore(any_store, clock=clock).open()
    try:
        yield opened
    finally:
        opened.close()


def is_postgres(store: MemoryStorage) -> bool:
    return isinstance(store, PostgresStore)


def snapshot(store: MemoryStorage) -> list[tuple[object, ...]]:
    """Every row of every table, to prove a failed call changed nothing."""
    if is_postgres(store):
        with store.engine.reading() as conn:
            tables = [
                r[0]
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1"
                ).fetchall()
            ]
            return [
                (t, [tuple(map(str, row)) for row in conn.execute(
                    f"SELECT * FROM {t} ORDER BY 1"  # noqa: S608 (catalogue names)
                ).fetchall()])
                for t in tables
            ]  # fmt: skip
    with store.transaction() as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                "ORDER BY name"
            ).fetchall()
        ]
        return [(t, conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()) for t in tables]


def refuse_inserts(
    store: MemoryStorage, table: str, message: str, when_id: str | None = None
) -> None:
    """Make every insert into a log table fail with ``message`` (for one memory id, if
    given): a write that fails midway. ``table`` is SQLite's name; PostgreSQL's is
    ``tm_`` + it (``forgetting_log``, ``promotion_log``)."""
    if is_postgres(store):
        condition = "" if when_id is None else f"IF NEW.memory_id = '{when_id}' THEN "
        end = "" if when_id is None else " END IF;"
        with store.transaction() as conn:
            conn.execute(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                f"{condition}RAISE EXCEPTION '{message}';{end} RETURN NEW; END $$"
            )
            conn.execute(
                f"CREATE TRIGGER refuse BEFORE INSERT ON tm_{table} "
                "FOR EACH ROW EXECUTE FUNCTION refuse()"
            )
        return
    when = "" if when_id is None else f"WHEN NEW.memory_id = '{when_id}' "
    with store.transaction() as conn:
        conn.execute(
            f"CREATE TRIGGER refuse BEFORE INSERT ON {table} {when}"
            f"BEGIN SELECT RAISE(ABORT, '{message}'); END"
        )


def keyword_state(store: MemoryStorage, words: Iterable[str]) -> tuple[dict[str, object], int]:
    """Each word's keyword hits with their scores, and the number of indexed memories."""
    if not is_postgres(store):
        from tests.engines.sqlite.test_keyword_context import scores_and_size

        return scores_and_size(store, words)
    with store.engine.reading() as conn:
        return _pg_keyword_state(conn, words)


def rebuilt_keyword_state(
    store: MemoryStorage, words: Iterable[str]
) -> tuple[dict[str, object], int]:
    """:func:`keyword_state` after rebuilding the keyword index from scratch (rolled back)."""
    if not is_postgres(store):
        from tests.engines.sqlite.test_keyword_context import rebuilt_scores_and_size

        return rebuilt_scores_and_size(store, words)
    from persistence.postgres import keyword_search

    class Undo(Exception):
        pass

    try:
        with store.transaction() as conn:
            keyword_search.rebuild(conn)
            result = _pg_keyword_state(conn, words)
            raise Undo
    except Undo:
        return result


def _pg_keyword_state(conn: Any, words: Iterable[str]) -> tuple[dict[str, object], int]:
    from persistence.postgres import keyword_search
    from persistence.records import MemoryFilter

    if conn.info.transaction_status != 0:  # inside a transaction: index its writes first
        keyword_search.catch_up(conn)
    scores: dict[str, object] = {
        w: sorted(
            (m, round(s, 9))
            for m, s in keyword_search.search(conn, [w], 1000, MemoryFilter(), 0.3, 0.7)
        )
        for w in words
    }
    (rows,) = conn.execute("SELECT count(*) FROM tm_kw_docs").fetchone()
    return scores, rows


def index_rows(store: MemoryStorage) -> tuple[int, int]:
    """(memories in the keyword index, tag rows) of a store."""
    with store.engine.reading() as conn:
        if is_postgres(store):
            keywords = conn.execute("SELECT count(*) FROM tm_kw_docs").fetchone()[0]
            tags = conn.execute("SELECT coalesce(sum(cardinality(tags)), 0) FROM tm_memories")
            return keywords, int(tags.fetchone()[0])
        fts = conn.execute("SELECT count(*) FROM memory_fts_docsize").fetchone()[0]
        return fts, conn.execute("SELECT count(*) FROM memory_tags").fetchone()[0]


def open_as(location: str, agent: str | None) -> AgentMemoryManager:
    """A manager on ``location`` scoped to ``agent`` (``None``: the operator's, unscoped),
    without an embedder: what scope tests write and read is the data, not its vectors."""
    return AgentMemoryManager.open(location, agent_id=agent, embedder=None,
                                   embed_in_background=False)  # fmt: skip

"""The PostgreSQL keyword search (bm25 over each memory's window, from the posting table
of migration v012), as the shared store's
:class:`~persistence.stores.index_engine.KeywordSearch`: it runs the statements
:mod:`~persistence.postgres.sql.keyword_sql` builds (the searches unprepared, see
:mod:`persistence.postgres.unprepared`): the query's lexemes first, then the search
planned for them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from persistence.postgres import unprepared
from persistence.postgres.sql import keyword_sql
from persistence.records import KeywordParts, MemoryFilter
from persistence.statements import run_all
from persistence.stores.scope import WHOLE, Scope

Connection = psycopg.Connection[Any]


def catch_up(conn: Connection) -> None:
    """Nothing to do: triggers index each write in its own statement."""
    run_all(conn, keyword_sql.CATCH_UP)


def search(
    conn: Connection, words: Sequence[str], limit: int, where: MemoryFilter,
    context_weight: float, after_weight: float,
) -> list[tuple[str, float]]:  # fmt: skip
    """``(memory_id, score)`` of the memories ``where`` accepts, best (lowest) first."""
    (found,) = unprepared.rows(conn, keyword_sql.lexemes(words))
    statement = keyword_sql.search(found, limit, where, context_weight, after_weight)
    if statement is None:
        return []
    return [(r[0], float(r[1])) for r in unprepared.rows(conn, statement)]


def parts(
    conn: Connection, words: Sequence[str], memory_ids: Sequence[str], scope: Scope = WHOLE
) -> dict[str, KeywordParts]:
    """Which parts of each memory's keyword window hold a lexeme of ``words`` (memories
    of ``scope`` only)."""
    return keyword_sql.to_parts(unprepared.rows(conn, keyword_sql.parts(words, memory_ids, scope)))


def rebuild(conn: Connection) -> None:
    """Re-index every memory from scratch, in the caller's transaction (repair, tests)."""
    run_all(conn, keyword_sql.REBUILD)

"""The PostgreSQL keyword search (bm25 over each memory's window, from the posting table
of migration v012), as the shared store's
:class:`~persistence.stores.index_engine.KeywordSearch` (:class:`PostingSearch`): it runs
the statements :mod:`~persistence.postgres.sql.keyword_sql` builds (the searches
unprepared, see :mod:`persistence.postgres.unprepared`), planned for the query's lexemes
(looked up once per word and kept: ``tm_tsv`` is immutable)."""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from typing import Any

import psycopg

from persistence.postgres import unprepared
from persistence.postgres.sql import keyword_sql
from persistence.records import KeywordParts, MemoryFilter
from persistence.statements import run_all
from persistence.stores.scope import WHOLE, Scope

Connection = psycopg.Connection[Any]

KEPT_WORDS = 20_000
"""Words whose lexemes a :class:`PostingSearch` keeps (all forgotten when full)."""


def catch_up(conn: Connection) -> None:
    """Nothing to do: triggers index each write in its own statement."""
    run_all(conn, keyword_sql.CATCH_UP)


def word_lexemes(
    conn: Connection, words: Sequence[str], kept: MutableMapping[str, tuple[str, ...]]
) -> list[tuple[str, ...]]:
    """Each word's lexemes, from ``kept`` or (those not there) the database, kept."""
    missing = [w for w in dict.fromkeys(words) if w not in kept]
    if missing:
        if len(kept) + len(missing) > KEPT_WORDS:
            kept.clear()
        for word, lexes in unprepared.rows(conn, keyword_sql.lexemes(missing)):
            kept[word] = tuple(lexes)
    return [kept[w] for w in words]


def search(
    conn: Connection, words: Sequence[str], limit: int, where: MemoryFilter,
    context_weight: float, after_weight: float, scope: str = "",
    kept: MutableMapping[str, tuple[str, ...]] | None = None,
) -> list[tuple[str, float]]:  # fmt: skip
    """``(memory_id, score)`` of the memories ``where`` accepts, best (lowest) first, on a
    connection of ``scope`` (``''``: unscoped)."""
    lexes = word_lexemes(conn, words, {} if kept is None else kept)
    statement = keyword_sql.search(lexes, scope, limit, where, context_weight, after_weight)
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


class PostingSearch:
    """The keyword search of one store (its connections' ``scope``), keeping the lexemes
    of the words it was asked (:data:`KEPT_WORDS`)."""

    def __init__(self, scope: str) -> None:
        self.scope = scope
        self._kept: dict[str, tuple[str, ...]] = {}

    def catch_up(self, conn: Connection) -> None:
        """Nothing to do: triggers index each write in its own statement."""
        catch_up(conn)

    def search(
        self, conn: Connection, words: Sequence[str], limit: int, where: MemoryFilter,
        context_weight: float, after_weight: float,
    ) -> list[tuple[str, float]]:  # fmt: skip
        """See :func:`search`."""
        return search(conn, words, limit, where, context_weight, after_weight, self.scope,
                      self._kept)  # fmt: skip

    def parts(
        self, conn: Connection, words: Sequence[str], memory_ids: Sequence[str],
        scope: Scope = WHOLE,
    ) -> dict[str, KeywordParts]:  # fmt: skip
        """See :func:`parts`."""
        return parts(conn, words, memory_ids, scope)

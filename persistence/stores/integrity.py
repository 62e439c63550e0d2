"""Integrity checks, run the same way on both engines.

A check is a function of a connection returning human-readable problems (an empty list
means it passed). Most are :data:`Query` pairs an engine's ``integrity_sql`` builds: a
statement whose every row is a problem, and the words that row becomes. The checks of
the memory tables both engines keep by their own code (rows pointing at memories, the
promotion log, the vectors' size) are assembled here once (:func:`memory_checks`) from
an engine's :class:`IntegritySql`; each engine's ``integrity`` module adds its own
(SQLite's ``PRAGMA`` checks and FTS5 index, PostgreSQL's schema and keyword window).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from persistence.engine import Connection
from persistence.records import IntegrityProblem
from persistence.statements import Row, Statement, rows, value

Query = tuple[Statement, Callable[[Row], str]]
"""A statement whose rows are problems, and the words of each."""

Check = Callable[[Connection], list[str]]
"""One named check: the problems it finds on a connection."""


class IntegritySql(Protocol):
    """The checks of the memory tables an engine's ``integrity_sql`` builds."""

    def orphans(self, table: str) -> Query:
        """Rows of ``table`` whose ``memory_id`` names no memory."""
        ...

    def promotion_log_points_at_memories(self) -> Query:
        """Promotion-log rows naming a memory that neither exists nor was forgotten."""
        ...

    def promotion_log_agrees(self) -> Query:
        """Live memories not in the tier their last promotion moved them to."""
        ...

    def dimension(self) -> Statement:
        """The store's embedding dimension (one value, ``None`` before any embedding)."""
        ...

    def embedding_sizes(self, dim: int | None) -> Sequence[Query]:
        """Vectors whose size is not ``dim`` (``None``: the store has none yet)."""
        ...


def found(conn: Connection, queries: Sequence[Query]) -> list[str]:
    """The problems ``queries`` find, in order."""
    return [words(r) for statement, words in queries for r in rows(conn, statement)]


def checking(*queries: Query) -> Check:
    """The check that runs ``queries``."""

    def check(conn: Connection) -> list[str]:
        return found(conn, queries)

    return check


def memory_checks(
    sql: IntegritySql,
    orphans: Mapping[str, str],
    vectors: Callable[[Connection, int], list[str]] | None = None,
) -> dict[str, Check]:
    """The checks of the memory tables, by name: each ``orphans`` name's table points at
    real memories, the promotion log points at memories and agrees with their tiers,
    every vector has the store's size (and ``vectors(conn, dim)`` finds nothing else
    wrong with them)."""

    def embedding_sizes(conn: Connection) -> list[str]:
        stored = value(conn, sql.dimension())
        dim = None if stored is None else int(stored)
        problems = found(conn, sql.embedding_sizes(dim))
        if vectors is not None and dim is not None:
            problems += vectors(conn, dim)
        return problems

    checks = {name: checking(sql.orphans(table)) for name, table in orphans.items()}
    checks["promotion_log_points_at_memories"] = checking(sql.promotion_log_points_at_memories())
    checks["promotion_log_agrees_with_tiers"] = checking(sql.promotion_log_agrees())
    checks["embedding_sizes"] = embedding_sizes
    return checks


def problems(conn: Connection, checks: Mapping[str, Check]) -> list[IntegrityProblem]:
    """Every problem ``checks`` find, named by its check."""
    return [
        IntegrityProblem(name, detail) for name, check in checks.items() for detail in check(conn)
    ]

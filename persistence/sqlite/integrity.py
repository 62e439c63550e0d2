"""``check_integrity`` on a file: SQLite's own checks and the library's invariants, run
over the statements :mod:`~persistence.sqlite.sql.integrity_sql` builds.

:data:`CHECKS` names each check (a function of a connection returning problems);
:func:`check` runs them the way ``check_integrity`` does, reporting a check that SQLite
stops on a damaged page as a problem. :func:`sqlite_integrity` is ``PRAGMA
integrity_check`` in one read snapshot, after FTS5 reloads its structures.
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from persistence.engine import Connection
from persistence.records import IntegrityProblem
from persistence.sqlite import cell_check, graph_steps
from persistence.sqlite.connection import read_snapshot
from persistence.sqlite.sql import integrity_sql as sql
from persistence.statements import rows
from persistence.stores.integrity import Check, checking, memory_checks, problems


def reload_fts_structures(conn: apsw.Connection) -> None:
    """Make every FTS5 table of ``conn`` reload its index structure from the file.

    FTS5 caches a table's structure per connection, and its integrity check (run by
    ``PRAGMA integrity_check``) reads that cache without looking for commits made since by
    other connections: on a long-lived connection it reports damage that is not there.
    Any query reading the index reloads the cache when the file has changed.
    """
    for (name,) in rows(conn, sql.FTS_TABLES):
        rows(conn, sql.fts_reload(name))


def sqlite_integrity(conn: apsw.Connection) -> list[str]:
    """``PRAGMA integrity_check``: pages, b-trees and indexes (a raise counts as damage).

    FTS5 structures are reloaded first, in the same read snapshot as the check.
    """
    try:
        with read_snapshot(conn):
            reload_fts_structures(conn)
            found = rows(conn, sql.INTEGRITY_CHECK)
    except (apsw.CorruptError, apsw.NotADBError) as exc:
        return [sql.damaged(exc)]
    return sql.integrity_problems(found)


CHECKS: dict[str, Check] = {
    "integrity_check": sqlite_integrity,
    "foreign_key_check": checking(sql.FOREIGN_KEYS),
    "one_tier_per_memory": checking(sql.ONE_TIER_EACH),
    **memory_checks(
        sql,
        {
            "schedules_point_at_memories": "repetition_schedules",
            "tags_point_at_memories": "memory_tags",
        },
    ),
    "keyword_index_matches": checking(*sql.KEYWORD_INDEX),
    "graph_invariants": graph_steps.check,
    "vector_cells_match": cell_check.check,
}
"""Check name -> the check."""


def check(conn: Connection, names: Sequence[str] = tuple(CHECKS)) -> list[IntegrityProblem]:
    """What the checks ``names`` find on ``conn``; a check SQLite stops on a damaged
    page reports the damage, and the others still run."""
    return problems(conn, {name: _reporting_damage(CHECKS[name]) for name in names})


def _reporting_damage(check: Check) -> Check:
    def reporting(conn: Connection) -> list[str]:
        try:
            return check(conn)
        except (apsw.CorruptError, apsw.NotADBError) as exc:
            return [sql.damaged(exc)]

    return reporting

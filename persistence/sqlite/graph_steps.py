"""The graph steps only a file takes, run over the statements
:mod:`persistence.sqlite.sql.graph_sql` builds: collecting what nothing supports any more
(relations, then their endpoints: PostgreSQL does it in one function), working off the
memories deleted in a transaction before it commits (PostgreSQL's deferred trigger does),
and the graph's integrity checks."""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from persistence.sqlite.row_checks import texts
from persistence.sqlite.sql import graph_sql
from persistence.statements import row, rows, run, run_all, value
from persistence.stores import graph_reads


def collect(conn: apsw.Connection, entity_ids: Sequence[str], relation_ids: Sequence[str]) -> None:
    """Delete the derived relations, then entities, among these that nothing supports
    any more (an entity also stays while a relation uses it); re-weigh the rest."""
    ends: list[str] = []
    if relation_ids:
        gone = rows(conn, graph_sql.collect_relations(relation_ids))
        ends = texts("relations", "subject_id or object_id", (e for r in gone for e in r))
        run(conn, graph_sql.reweigh(relation_ids))
    candidates = set(entity_ids) | set(ends)
    if candidates:
        run(conn, graph_sql.collect_entities(candidates))


def collect_garbage(conn: apsw.Connection) -> bool:
    """Work off ``graph_dirty`` (memories deleted in this transaction): the provenance of
    those still gone goes, and with it what nothing supports any more. True if there
    was anything to do. Runs just before every commit."""
    if row(conn, graph_sql.COLLECTION_BEHIND) is None:
        return False
    run(conn, graph_sql.KEEP_RESTORED)
    gone = texts("graph_dirty", "memory_id", (r[0] for r in rows(conn, graph_sql.TAKE_DIRTY)))
    if gone:
        entities, relations = graph_reads.drop_provenance(graph_sql, conn, gone)
        versions = row(conn, graph_sql.HAS_VERSIONS) is not None
        run_all(conn, graph_sql.forget_rows(gone, versions))
        collect(conn, entities, relations)
    return True


def check(conn: apsw.Connection) -> list[str]:
    """The graph's invariants: endpoints and provenance point at rows that exist, no
    derived entity or relation is left unsupported, aliases and their index agree."""
    if row(conn, graph_sql.has_graph()) is None:
        return []
    problems = [words(r) for statement, words in graph_sql.CHECKS for r in rows(conn, statement)]
    index_rows = int(value(conn, graph_sql.INDEX_ROWS))
    alias_rows = int(value(conn, graph_sql.ALIAS_ROWS))
    if index_rows != alias_rows:
        problems.append(f"entity name index has {index_rows} rows for {alias_rows} aliases")
    dirty = int(value(conn, graph_sql.DIRTY_ROWS))
    if dirty:
        problems.append(f"{dirty} deleted memories still wait for graph collection")
    return problems

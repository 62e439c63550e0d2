"""The graph walk, written once: breadth first, level by level, over an engine's
:meth:`~persistence.stores.graph_engine.GraphSql.hops` statements (SQLite builds one per
entity, run only as the walk reads that entity's rows; PostgreSQL one per batch of a
level's entities), so every engine returns the same reaches for the same graph."""

from __future__ import annotations

import math
from collections.abc import Sequence

from persistence.engine import Connection
from persistence.graph_records import Reach, Relation
from persistence.statements import rows as rows_of_statement
from persistence.stores.graph_engine import GraphSql, Row


def walk(
    sql: GraphSql,
    conn: Connection,
    start: str,
    depth: int,
    at: int,
    fanout: int,
    cap: int,
    predicates: Sequence[str] | None = None,
    *,
    limit: int | None = None,
    target: str | None = None,
) -> list[Reach]:
    """The entities within ``depth`` hops of ``start`` (itself left out), each with its
    shallowest path, of those the best supported (then the one with the smallest
    relation ids); nearest, then best supported, then by id first; the first ``limit``.

    Each entity is expanded once, at its shallowest depth, best supported first,
    following its ``fanout`` best supported relations valid at ``at`` (of
    ``predicates``) per direction, both ways, never back to an entity reached on an
    earlier level (cycle-safe). No entity is expanded once ``cap`` relations have been
    read. The walk ends after the level on which ``limit`` entities are reached (deeper
    ones would rank after them) or ``target`` is. A level's entities go to the engine in
    batches no larger than the ``cap`` left could need.
    """
    # entity -> (depth, support, the entity it was reached from, the relation's row)
    reached: dict[str, tuple[int, float, str, Row]] = {start: (0, 0.0, "", ())}

    def ids(eid: str, last: Row) -> list[str]:
        """The relation ids along the path to ``eid``'s parent, then ``last``'s."""
        path = [last[0]]
        while eid != start:
            _, _, eid, row = reached[eid]
            path.append(row[0])
        return path[::-1]

    frontier = [start]
    read = 0
    for level in range(1, depth + 1):
        found: dict[str, tuple[int, float, str, Row]] = {}
        i = 0
        while i < len(frontier) and read < cap:
            size = max(1, math.ceil((cap - read) / max(1, 2 * fanout)))
            batch = frontier[i : i + size]
            i += len(batch)
            statements = sql.hops(batch, at, fanout, predicates)
            results = (rows_of_statement(conn, s) for s in statements)  # run as read
            rows_of = sql.hop_rows(batch, results)
            for node, rows in zip(batch, rows_of, strict=True):
                if read >= cap:
                    break
                base = reached[node][1]
                for row in rows:
                    read += 1
                    other = row[3] if row[1] == node else row[1]
                    if other in reached:
                        continue
                    support = base + row[5]
                    have = found.get(other)
                    if (
                        have is None
                        or support > have[1]
                        or (support == have[1] and ids(node, row) < ids(have[2], have[3]))
                    ):
                        found[other] = (level, support, node, row)
        if not found:
            break
        reached.update(found)
        if (limit is not None and len(reached) > limit) or (target is not None and target in found):
            break
        frontier = sorted(found, key=lambda e: (-found[e][1], e))
    del reached[start]
    order = sorted(reached, key=lambda e: (reached[e][0], -reached[e][1], e))[:limit]
    relations: dict[str, Relation] = {}

    def via(eid: str) -> tuple[Relation, ...]:
        path = []
        while eid != start:
            _, _, eid, row = reached[eid]
            if row[0] not in relations:
                relations[row[0]] = sql.relation(row)
            path.append(relations[row[0]])
        return tuple(path[::-1])

    return [Reach(e, reached[e][0], via(e), reached[e][1]) for e in order]

"""The graph walk on PostgreSQL: breadth first, level by level, with one query per batch
of a level's entities (:func:`persistence.postgres.sql.graph_sql.hops`) instead of one
per entity. The order of expansion, the ``cap`` and every tie-break are those of the
SQLite walk (:func:`persistence.sqlite.sql.graph_sql.walk`), so both backends return the
same reaches for the same graph."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from persistence.graph_records import Reach, Relation
from persistence.postgres.sql import graph_sql
from persistence.postgres.sql.graph_sql import Connection

Row = tuple[Any, ...]


def walk(
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
    ``predicates``) per direction, never back to an entity reached on an earlier level.
    No entity is expanded once ``cap`` relations have been read. The walk ends after the
    level on which ``limit`` entities are reached or ``target`` is. A level's entities
    go to the server in batches no larger than the ``cap`` left could need.
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
            rows_of = graph_sql.hops(conn, batch, at, fanout, predicates)
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
                relations[row[0]] = graph_sql.relation(row)
            path.append(relations[row[0]])
        return tuple(path[::-1])

    return [Reach(e, reached[e][0], via(e), reached[e][1]) for e in order]

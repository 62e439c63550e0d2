"""The SQLite engine's reads of the float vectors and their change log, and exact
cosine comparison: what the vector copy (:mod:`persistence.sqlite.vector_mirror`), the
codes kept in the file (:mod:`persistence.sqlite.code_sync`) and the vector search
(:class:`~persistence.sqlite.mirror_vectors.MirrorVectors`) run, over the statements
:mod:`~persistence.sqlite.sql.index_sql` builds."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import apsw
import numpy as np

from persistence.records import MemoryFilter, Tier
from persistence.sqlite.sql import index_sql
from persistence.statements import column, row, rows, stream, value


def change_head(conn: apsw.Connection) -> tuple[int, str | None]:
    """``(seq, memory_id)`` of the newest ``vector_changes`` row, ``(0, None)`` if none."""
    return index_sql.to_change_head(row(conn, index_sql.CHANGE_HEAD))


def change_floor(conn: apsw.Connection) -> int:
    """The oldest ``seq`` still in ``vector_changes`` (0 when it is empty)."""
    return int(value(conn, index_sql.CHANGE_FLOOR) or 0)


def change_at(conn: apsw.Connection, seq: int) -> str | None:
    """The memory id logged at ``seq``, or ``None`` once that row is trimmed (or never was)."""
    found = value(conn, index_sql.change_at(seq))
    return None if found is None else str(found)


def changed_since(conn: apsw.Connection, seq: int) -> list[str]:
    """Ids of memories whose embedding changed after ``seq``."""
    return column(conn, index_sql.changed_since(seq))


def memory_count(conn: apsw.Connection, *, at_most: int | None = None) -> int:
    """How many memories the file holds (see :func:`index_sql.memory_count`)."""
    return int(value(conn, index_sql.memory_count(at_most)) or 0)


def embedded_rows(conn: apsw.Connection, tier: Tier) -> Iterator[tuple[str, bytes]]:
    """``(id, float32 blob)`` of every memory of ``tier`` that has an embedding, streamed."""
    return stream(conn, index_sql.embedded_rows(tier))


IDS_PER_READ = 4_096
"""Ids one statement of :func:`embeddings_of` binds at most (SQLite refuses more than
32,766 parameters: a cell or a deep search may ask for more)."""


def embeddings_of(
    conn: apsw.Connection, memory_ids: list[str], tiers: Sequence[Tier] = tuple(Tier)
) -> list[tuple[str, Tier, bytes]]:
    """The current embedding of each of ``memory_ids`` (looked for in ``tiers``) that has
    one, with its tier (read :data:`IDS_PER_READ` ids a statement)."""
    found: list[tuple[str, Tier, bytes]] = []
    for tier in tiers:
        for start in range(0, len(memory_ids), IDS_PER_READ):
            chunk = memory_ids[start : start + IDS_PER_READ]
            found += [
                (i, tier, blob) for i, blob in rows(conn, index_sql.embeddings_of(chunk, tier))
            ]
    return found


def accepted_pairs(
    conn: apsw.Connection, where: MemoryFilter, cap: int
) -> list[tuple[str, Tier]] | None:
    """``(id, tier)`` of every memory ``where`` accepts that has an embedding (no vector
    read; tags alone may bring some without one: a re-rank drops them); ``None`` when
    there are more than ``cap`` (counted no further)."""
    found: list[tuple[str, Tier]] = []
    for tier in list(Tier) if where.tier is None else [where.tier]:
        ids = column(conn, index_sql.accepted_ids(where, tier, cap + 1 - len(found)))
        found += [(memory_id, tier) for memory_id in ids]
        if len(found) > cap:
            return None
    return found


def accepted_among(
    conn: apsw.Connection, where: MemoryFilter, candidates: Sequence[tuple[str, Tier]]
) -> list[tuple[str, Tier]]:
    """The ``candidates`` that ``where`` accepts, in their order (for ``current`` alone,
    the superseded ones are looked up in their partial index and left out)."""
    if index_sql.current_only(where):
        gone: set[str] = set()
        for tier in Tier:
            ids = [memory_id for memory_id, at in candidates if at is tier]
            if ids and (where.tier is None or tier is where.tier):
                gone.update(column(conn, index_sql.superseded_among(tier, ids)))
        return [
            (memory_id, tier)
            for memory_id, tier in candidates
            if memory_id not in gone and (where.tier is None or tier is where.tier)
        ]
    keep: set[str] = set()
    for tier in Tier:
        ids = [memory_id for memory_id, at in candidates if at is tier]
        if not ids or (where.tier is not None and tier is not where.tier):
            continue
        keep.update(column(conn, index_sql.accepted_among(where, tier, ids)))
    return [(memory_id, tier) for memory_id, tier in candidates if memory_id in keep]


def rerank(
    conn: apsw.Connection, candidates: list[tuple[str, Tier]], query: np.ndarray, limit: int
) -> list[tuple[str, float]]:
    """``(memory_id, cosine distance)`` of the ``limit`` nearest ``(id, tier)`` candidates,
    exactly, from the float vectors in the tier tables (those without one are dropped)."""
    found = []
    for tier in Tier:
        ids = [memory_id for memory_id, where in candidates if where is tier]
        if ids:
            found += embeddings_of(conn, ids, (tier,))
    return nearest(found, query, limit)


def nearest(
    found: Sequence[tuple[str, Tier, bytes]], query: np.ndarray, limit: int
) -> list[tuple[str, float]]:
    """``(memory_id, cosine distance)`` of the ``limit`` of ``found`` nearest to ``query``
    (ties in the order given)."""
    if not found:
        return []
    ids, distances = cosine_distances(found, query)
    order = np.argsort(distances, kind="stable")[:limit]
    return [(ids[i], float(distances[i])) for i in order]


def cosine_distances(
    found: Sequence[tuple[str, Tier, bytes]], query: np.ndarray
) -> tuple[list[str], np.ndarray]:
    """The ids of ``found`` (as :func:`embeddings_of` gives it) and their cosine distances
    to ``query``.

    A memory's distance depends on its vector and the query alone, never on which other
    rows share the batch or where it stands among them: ``einsum`` sums each row the same
    way, where a BLAS product (``matrix @ query``) may round a row differently by its
    place in the matrix (a few rows in a thousand, in the last bit). So the distances
    are the same whatever order SQL returned the rows in, and whichever look-up (the
    search's re-rank, ``vector_distances``, a cache) computed them."""
    ids = [memory_id for memory_id, _, _ in found]
    matrix = np.frombuffer(b"".join(blob for _, _, blob in found), dtype="<f4")
    matrix = matrix.reshape(len(ids), -1)
    norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(query)), 1e-12)
    return ids, 1.0 - np.einsum("ij,j->i", matrix, query) / np.clip(norms, 1e-12, None)

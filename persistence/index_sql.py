"""SQL for the recall indexes: keyword search (FTS5), the vector index (sqlite-vec) and
the embeddings still to compute.

The vector table needs the embedding dimension, so it is created when the file first
records one (in that same transaction), with triggers that keep it in step with the
tier tables. When the dimension is a multiple of 8 it also holds a bit-quantized copy
of each vector: KNN runs on the bits with oversampling, then exact cosine re-ranks.
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw
import numpy as np

from persistence.connection import query_all, query_one
from persistence.memory_sql import TABLE
from persistence.meta_sql import EMBEDDING_DIM_KEY, read_meta
from persistence.records import Tier

OVERSAMPLE = 4


def has_vector_index(conn: apsw.Connection) -> bool:
    """True once the vector table exists."""
    return query_one(conn, "SELECT 1 FROM sqlite_schema WHERE name = 'memory_vec'") is not None


def _uses_bits(conn: apsw.Connection) -> bool:
    row = query_one(conn, "SELECT sql FROM sqlite_schema WHERE name = 'memory_vec'")
    return row is not None and "embedding_bits" in str(row[0])


def _layout(dim: int) -> str:
    """The vector table for ``dim``: bits only when quantizable (re-rank reads the floats
    from the tier tables), else exact float vectors."""
    if dim % 8 == 0:
        return f"memory_id text primary key, tier text, embedding_bits bit[{dim}]"
    return f"memory_id text primary key, tier text, embedding float[{dim}] distance_metric=cosine"


def ensure_vector_index(conn: apsw.Connection) -> bool:
    """Create (and fill) the vector table if the file records a dimension; True if it exists.

    The table is derived data: one of another layout is dropped and rebuilt.
    """
    dim_text = read_meta(conn, EMBEDDING_DIM_KEY)
    if dim_text is None:
        return has_vector_index(conn)
    dim = int(dim_text)
    layout = _layout(dim)
    row = query_one(conn, "SELECT sql FROM sqlite_schema WHERE name = 'memory_vec'")
    if row is not None:
        if layout in str(row[0]):
            return True
        drop_vector_index(conn)
    bits = dim % 8 == 0
    conn.execute(f"CREATE VIRTUAL TABLE memory_vec USING vec0({layout})")
    column = "embedding_bits" if bits else "embedding"
    value = "vec_quantize_binary({})" if bits else "{}"
    for tier in Tier:
        table = TABLE[tier]
        # VALUES, not INSERT ... SELECT: a SELECT drops the bit vector's SQL subtype.
        insert = (
            f"INSERT INTO memory_vec (memory_id, tier, {column}) "
            f"VALUES (NEW.id, '{tier.value}', {value.format('NEW.embedding')})"
        )
        delete = "DELETE FROM memory_vec WHERE memory_id = OLD.id"
        for name, event, when, body in (
            ("insert", "INSERT", "NEW.embedding IS NOT NULL", insert),
            ("delete", "DELETE", "1", delete),
            ("update", "UPDATE OF embedding", "NEW.embedding IS NOT NULL", f"{delete}; {insert}"),
            ("unset", "UPDATE OF embedding", "NEW.embedding IS NULL", delete),
        ):
            conn.execute(
                f"CREATE TRIGGER {table}_vector_{name} AFTER {event} ON {table} "
                f"WHEN {when} BEGIN {body}; END"
            )
        rows = query_all(conn, f"SELECT id, embedding FROM {table} WHERE embedding IS NOT NULL")
        marks = f"?, ?, {value.format('?')}"
        conn.executemany(
            f"INSERT INTO memory_vec (memory_id, tier, {column}) VALUES ({marks})",
            [(memory_id, tier.value, blob) for memory_id, blob in rows],
        )
    return True


def drop_vector_index(conn: apsw.Connection) -> None:
    """Drop the vector table and its triggers (before the file changes dimension)."""
    for tier in Tier:
        for event in ("insert", "delete", "update", "unset"):
            conn.execute(f"DROP TRIGGER IF EXISTS {TABLE[tier]}_vector_{event}")
    conn.execute("DROP TABLE IF EXISTS memory_vec")


def keyword_search(
    conn: apsw.Connection, match: str, limit: int, tier: Tier | None
) -> list[tuple[str, float]]:
    """``(memory_id, bm25)`` best first (FTS5's bm25 is negative: lower is better)."""
    sql = (
        "SELECT i.memory_id, bm25(memory_fts) AS score FROM memory_fts "
        "JOIN memory_index AS i ON i.rowid = memory_fts.rowid WHERE memory_fts MATCH ?"
    )
    params: list[object] = [match]
    if tier is not None:
        sql += " AND i.tier = ?"
        params.append(tier.value)
    rows = query_all(conn, sql + " ORDER BY score LIMIT ?", [*params, limit])
    return [(r[0], float(r[1])) for r in rows]


def vector_search(
    conn: apsw.Connection, vector: bytes, limit: int, tier: Tier | None
) -> list[tuple[str, float]]:
    """``(memory_id, cosine distance)`` nearest first.

    Bit-quantized KNN takes ``limit * OVERSAMPLE`` candidates; their float vectors are read
    from the tier tables and re-ranked by exact cosine distance.
    """
    where = " AND tier = ?" if tier is not None else ""
    extra: list[object] = [tier.value] if tier is not None else []
    if not _uses_bits(conn):
        rows = query_all(
            conn,
            f"SELECT memory_id, distance FROM memory_vec WHERE embedding MATCH ? AND k = ?{where} "
            "ORDER BY distance",
            [vector, limit, *extra],
        )
        return [(r[0], float(r[1])) for r in rows]
    candidates = [r[0] for r in query_all(
        conn,
        "SELECT memory_id FROM memory_vec "
        f"WHERE embedding_bits MATCH vec_quantize_binary(?) AND k = ?{where}",
        [vector, limit * OVERSAMPLE, *extra],
    )]  # fmt: skip
    if not candidates:
        return []
    ids, blobs = _embeddings_of(conn, candidates)
    matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(ids), -1)
    query = np.frombuffer(vector, dtype="<f4")
    norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(query)), 1e-12)
    distances = 1.0 - (matrix @ query) / np.clip(norms, 1e-12, None)
    order = np.argsort(distances, kind="stable")[:limit]
    return [(ids[i], float(distances[i])) for i in order]


def _embeddings_of(conn: apsw.Connection, memory_ids: list[str]) -> tuple[list[str], list[bytes]]:
    marks = ", ".join("?" for _ in memory_ids)
    ids: list[str] = []
    blobs: list[bytes] = []
    for tier in Tier:
        for memory_id, blob in query_all(
            conn,
            f"SELECT id, embedding FROM {TABLE[tier]} "
            f"WHERE id IN ({marks}) AND embedding IS NOT NULL",
            memory_ids,
        ):
            ids.append(memory_id)
            blobs.append(blob)
    return ids, blobs


def unembedded(conn: apsw.Connection, limit: int) -> list[tuple[str, Tier, str]]:
    """Up to ``limit`` memories without an embedding: ``(id, tier, content)``."""
    found: list[tuple[str, Tier, str]] = []
    for tier in Tier:
        if len(found) >= limit:
            break
        rows = query_all(
            conn,
            f"SELECT id, content FROM {TABLE[tier]} WHERE embedding IS NULL LIMIT ?",
            (limit - len(found),),
        )
        found += [(r[0], tier, r[1]) for r in rows]
    return found


def set_embeddings(conn: apsw.Connection, rows: Sequence[tuple[Tier, str, bytes]]) -> None:
    """Store computed embeddings (only where none was set meanwhile)."""
    for tier, memory_id, blob in rows:
        conn.execute(
            f"UPDATE {TABLE[tier]} SET embedding = ? WHERE id = ? AND embedding IS NULL",
            (blob, memory_id),
        )

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


def ensure_vector_index(conn: apsw.Connection) -> bool:
    """Create (and fill) the vector table if the file records a dimension; True if it exists."""
    if has_vector_index(conn):
        return True
    dim_text = read_meta(conn, EMBEDDING_DIM_KEY)
    if dim_text is None:
        return False
    dim = int(dim_text)
    bits = dim % 8 == 0
    bit_column = f", embedding_bits bit[{dim}]" if bits else ""
    conn.execute(
        "CREATE VIRTUAL TABLE memory_vec USING vec0(memory_id text primary key, tier text, "
        f"embedding float[{dim}] distance_metric=cosine{bit_column})"
    )
    columns = "memory_id, tier, embedding" + (", embedding_bits" if bits else "")
    marks = "?, ?, ?" + (", vec_quantize_binary(?)" if bits else "")
    for tier in Tier:
        table = TABLE[tier]
        values = f"NEW.id, '{tier.value}', NEW.embedding" + (
            ", vec_quantize_binary(NEW.embedding)" if bits else ""
        )
        # VALUES, not INSERT ... SELECT: a SELECT drops the bit vector's SQL subtype.
        insert = f"INSERT INTO memory_vec ({columns}) VALUES ({values})"
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
        conn.executemany(
            f"INSERT INTO memory_vec ({columns}) VALUES ({marks})",
            [(memory_id, tier.value, blob, *((blob,) if bits else ())) for memory_id, blob in rows],
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
    """``(memory_id, cosine distance)`` nearest first."""
    where = " AND tier = ?" if tier is not None else ""
    extra: list[object] = [tier.value] if tier is not None else []
    if _uses_bits(conn):
        rows = query_all(
            conn,
            "WITH candidates AS (SELECT memory_id FROM memory_vec "
            f"WHERE embedding_bits MATCH vec_quantize_binary(?) AND k = ?{where}) "
            "SELECT v.memory_id, vec_distance_cosine(v.embedding, ?) AS distance "
            "FROM memory_vec AS v JOIN candidates USING (memory_id) ORDER BY distance LIMIT ?",
            [vector, limit * OVERSAMPLE, *extra, vector, limit],
        )
    else:
        rows = query_all(
            conn,
            f"SELECT memory_id, distance FROM memory_vec WHERE embedding MATCH ? AND k = ?{where} "
            "ORDER BY distance",
            [vector, limit, *extra],
        )
    return [(r[0], float(r[1])) for r in rows]


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

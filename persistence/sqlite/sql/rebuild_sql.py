"""SQL for re-embedding with another model: stage new vectors beside the live ones,
then swap them in with one transaction.

Functions run inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw
import numpy as np

from persistence.meta_keys import REBUILD_DIM_KEY, REBUILD_MODEL_KEY
from persistence.records import Tier, content_hash
from persistence.sqlite.connection import query_all
from persistence.sqlite.sql import meta_sql
from persistence.sqlite.sql.index_sql import blob_of
from persistence.sqlite.sql.memory_sql import TABLE
from persistence.statements import run, run_all
from persistence.stores.facts import rebuild_state, swapped_model


def state(conn: apsw.Connection) -> tuple[str, int] | None:
    """The rebuild under way in the file (see :func:`~persistence.stores.facts.rebuild_state`)."""
    return rebuild_state(conn, meta_sql)


def begin(conn: apsw.Connection, model_id: str, dim: int) -> bool:
    """Start (or resume) building ``model_id``; True if earlier staged work is kept."""
    if state(conn) == (model_id, dim):
        return True
    conn.execute("DELETE FROM embedding_rebuild")
    run(conn, meta_sql.write(REBUILD_MODEL_KEY, model_id))
    run(conn, meta_sql.write(REBUILD_DIM_KEY, str(dim)))
    return False


def unstaged(conn: apsw.Connection, limit: int) -> list[tuple[str, str]]:
    """Up to ``limit`` memories with no staged vector yet: ``(id, content)``."""
    found: list[tuple[str, str]] = []
    for tier in Tier:
        if len(found) >= limit:
            break
        found += query_all(
            conn,
            f"SELECT t.id, t.content FROM {TABLE[tier]} AS t "
            "LEFT JOIN embedding_rebuild AS r ON r.memory_id = t.id "
            "WHERE r.memory_id IS NULL LIMIT ?",
            (limit - len(found),),
        )
    return found


def stage(conn: apsw.Connection, rows: Sequence[tuple[str, bytes, np.ndarray]]) -> None:
    """Keep ``(memory id, content hash, vector)`` for the swap (a float32 BLOB)."""
    conn.executemany(
        "INSERT INTO embedding_rebuild (memory_id, content_hash, embedding) VALUES (?, ?, ?) "
        "ON CONFLICT (memory_id) DO UPDATE SET content_hash = excluded.content_hash, "
        "embedding = excluded.embedding",
        [(memory_id, h, blob_of(v)) for memory_id, h, v in rows],
    )


def stale(conn: apsw.Connection) -> list[tuple[str, str]]:
    """Memories whose staged vector is missing or was made from other content."""
    out: list[tuple[str, str]] = []
    for tier in Tier:
        rows = query_all(
            conn,
            f"SELECT t.id, t.content, r.content_hash FROM {TABLE[tier]} AS t "
            "LEFT JOIN embedding_rebuild AS r ON r.memory_id = t.id",
        )
        out += [(i, c) for i, c, h in rows if h is None or bytes(h) != content_hash(c)]
    return out


def swap(conn: apsw.Connection, model_id: str, dim: int) -> int:
    """Replace every memory's embedding with its staged one, record the new model and
    size; returns how many memories were updated.

    Every memory must have an up-to-date staged vector (see :func:`stale`).
    """
    updated = 0
    for tier in Tier:
        conn.execute(
            f"UPDATE {TABLE[tier]} SET embedding = (SELECT r.embedding FROM embedding_rebuild "
            f"AS r WHERE r.memory_id = {TABLE[tier]}.id)"
        )
        updated += conn.changes()
    run_all(conn, swapped_model(meta_sql, model_id, dim))
    conn.execute("DELETE FROM embedding_rebuild")
    return updated

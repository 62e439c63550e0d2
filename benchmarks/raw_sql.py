"""Raw APSW statements the benchmarks use as floors (the SQL the library must run)."""

from __future__ import annotations

import apsw

from persistence.sqlite.sql import memory_sql

_COLUMNS = ", ".join(memory_sql._COLUMNS)


_PLACES = ", ".join("?" for _ in memory_sql._COLUMNS)


def raw_promote(conn: apsw.Connection, memory_id: str) -> None:
    """Move one row from episodic to semantic and log it, in one transaction.

    Read, delete, then insert, as the library does: the keyword-index triggers give
    every memory one ``memory_index`` row, so the row cannot be in both tiers at once.
    """
    conn.execute("BEGIN IMMEDIATE")
    row = conn.execute(f"SELECT {_COLUMNS} FROM episodic WHERE id = ?", (memory_id,)).fetchone()
    conn.execute("DELETE FROM episodic WHERE id = ?", (memory_id,))
    conn.execute(f"INSERT INTO semantic ({_COLUMNS}) VALUES ({_PLACES})", row)
    conn.execute(
        "INSERT INTO promotion_log (memory_id, from_tier, to_tier, promoted_at) "
        "VALUES (?, 'episodic', 'semantic', 0)",
        (memory_id,),
    )
    conn.execute("COMMIT")


def raw_keyword(conn: apsw.Connection, match: str, limit: int) -> list[tuple[str, float]]:
    """FTS5 bm25 candidates, as the library asks for them."""
    return conn.execute(
        "SELECT i.memory_id, bm25(memory_fts) AS score FROM memory_fts "
        "JOIN memory_index AS i ON i.rowid = memory_fts.rowid WHERE memory_fts MATCH ? "
        "ORDER BY score LIMIT ?",
        (match, limit),
    ).fetchall()


def raw_vec0_knn(conn: apsw.Connection, vector: bytes, k: int) -> list[tuple[str, float]]:
    """sqlite-vec's own bit KNN over the file's ``memory_vec`` table (no re-rank)."""
    return conn.execute(
        "SELECT memory_id, distance FROM memory_vec "
        "WHERE embedding_bits MATCH vec_quantize_binary(?) AND k = ?",
        (vector, k),
    ).fetchall()
